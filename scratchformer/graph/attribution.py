"""The attribution graph of one logit: its nodes, and the direct effects between them in the local replacement
model (scratchformer.graph.replacement).

Nodes, in this order (circuit-tracer's):
    features     every active transcoder feature at every (layer, position), encoder layers first
    errors       one per (feed-forward, position): what the transcoder misses of the real feed-forward there
    embeddings   one per position and side: the token embedding plus its positional encoding
    logit        the explained logit: one token at one decoder position

Edges are the replacement's direct effects. Every target t (a feature's pre-activation, or the logit) is affine in
the node values u (see replacement.py),

    y_t = Σ_s J_ts u_s + b_t,      A[t, s] = J_ts u_s   (the edge s → t),   bias[t] = b_t,

with J_ts = ∂y_t/∂u_s taken through the frozen linear paths only: a feature's value is an input of the
replacement pass, never recomputed from its pre-activation, so a path through another feature is not part of
this edge. J is read row by row with backward passes, a batch of targets at a time: row b of a batch of B copies
of the leaves gets the gradient of target b alone (the rows of the batch do not mix). b_t is the same pass with
every node at 0: what the biases (b_enc, b_dec, the attention and feed-forward biases, LayerNorm's β) carry.

So, exactly (up to rounding): a feature's incoming edges plus its bias are its pre-activation, and the logit's
incoming edges plus its bias are the logit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .progress import tick
from .replacement import LocalReplacement, ffn_side

BATCH = 32  # targets per backward pass; on a 4-layer GPT-2-shape, 64 took 1.2× as long (its passes outgrow the cache)


@dataclass
class Node:
    """One node of the graph. `layer`: the feed-forward layer of a feature or error node (counted per side), −1 for
    an embedding, the number of decoder layers for the logit; `position` counts from 0 on its side."""

    id: str
    kind: str  # "embedding" | "feature" | "error" | "logit"
    side: str  # "encoder" | "decoder"
    layer: int
    position: int
    token: str  # the token at this position (for the logit: the token it is the logit of)
    feature: int | None = None
    activation: float | None = None
    step: str = ""  # the feed-forward's output step (features and errors): where the node writes in the trace


@dataclass
class Graph:
    """Nodes, the full adjacency (targets × sources, rows of embeddings and errors empty), each node's value u,
    each target's bias and its value in the replacement (pre-activation or logit) and in the real model."""

    nodes: list[Node]
    adjacency: torch.Tensor  # (n, n) float64: adjacency[t, s] = the direct effect of s on t
    values: torch.Tensor  # (n,) u: a feature's activation, 1 for errors and embeddings, the logit for the logit
    bias: torch.Tensor  # (n,) b_t of each target, 0 elsewhere
    totals: torch.Tensor  # (n,) y_t of each target in the replacement pass (its pre-activation, the logit)
    real: torch.Tensor  # (n,) the same in the model itself (the transcoder's pre on the real input, real logit)
    n_features: int
    n_errors: int
    n_embeddings: int
    position: int  # the decoder position whose prediction is explained
    token_id: int
    token: str
    logit_error: float  # largest |replacement − model| over every logit at this position
    notes: list[str] = field(default_factory=list)

    @property
    def logit_index(self) -> int:
        return len(self.nodes) - 1


def _short(side: str) -> str:
    return "enc" if side == "encoder" else "dec"


def make_nodes(rep: LocalReplacement, tokens: dict[str, list[str]], position: int, token: str) -> list[Node]:
    """The nodes of a replacement, in the graph's order (see the module's text)."""
    layer_of = {s: int(s.split(".")[1]) for s in rep.transcoders}
    nodes = []
    for step, act in rep.active.items():
        side, layer = ffn_side(step), layer_of[step]
        for p, f, v in zip(act.pos.tolist(), act.feat.tolist(), act.value.tolist()):
            nodes.append(Node(f"{_short(side)}.{layer}.f{f}@{p}", "feature", side, layer, p, tokens[side][p], f, v,
                              step))  # fmt: skip
    for step, err in rep.errors.items():
        side, layer = ffn_side(step), layer_of[step]
        for p in range(err.shape[0]):
            nodes.append(Node(f"{_short(side)}.{layer}.err@{p}", "error", side, layer, p, tokens[side][p], step=step))
    for side, n in rep.lengths().items():
        nodes += [Node(f"{_short(side)}.emb@{p}", "embedding", side, -1, p, tokens[side][p]) for p in range(n)]
    n_layers = rep.config.n_decoder_layers
    nodes.append(Node(f"logit@{position}", "logit", "decoder", n_layers, position, token))
    return nodes


def _target_parts_and_hidden(rep: LocalReplacement, leaves, position: int, token_id: int, linear: bool = False,
                             gates=None) -> tuple[list[torch.Tensor], torch.Tensor]:  # fmt: skip
    """Every active feature's pre-activation, step by step ((B, n_step) each), then the logit ((B, 1)), in one
    replacement pass; and the pass's final hidden state (B, T, d_model)."""
    pre, hidden = rep.forward(leaves, linear, gates)
    return [pre[s] for s in rep.active] + [rep.logits(hidden, position, token_id)[:, None]], hidden


def _target_parts(rep: LocalReplacement, leaves, position: int, token_id: int, linear: bool = False, gates=None
                  ) -> list[torch.Tensor]:  # fmt: skip
    """The targets of one replacement pass, step by step (see _target_parts_and_hidden)."""
    return _target_parts_and_hidden(rep, leaves, position, token_id, linear, gates)[0]


def _targets(rep: LocalReplacement, leaves, position: int, token_id: int, linear: bool = False, gates=None):
    """(B, n_features + 1): every active feature's pre-activation, then the logit, in one replacement pass."""
    return torch.cat(_target_parts(rep, leaves, position, token_id, linear, gates), dim=1)


def rows(rep: LocalReplacement, targets: list[int], position: int, token_id: int, batch: int = BATCH
         ) -> torch.Tensor:  # fmt: skip
    """The incoming edges of the given targets (indices into features + [logit]): (len(targets), n_sources),
    sources in the graph's order (features, errors, embeddings). Row i is J[t_i, :] ⊙ u.

    One replacement pass of `batch` identical rows, then one backward pass per `batch` targets through it, row i
    seeded at its own target: every row of the pass holds the same values, so the pass is made once. Each backward
    pass starts from the steps its targets are in, so it goes no further down than they reach."""
    out = []
    b = min(batch, len(targets))
    if b:
        leaves = rep.leaves(b, grad=True)
        parts = _target_parts(rep, leaves, position, token_id)  # (b, n_step) per step, then (b, 1)
        ends = torch.tensor([x.shape[1] for x in parts]).cumsum(0)  # where each part ends among the targets
        wrt = leaves.tensors()  # features, errors, embeddings: the sources' order
        for a in range(0, len(targets), b):
            tick("reading the edges", a, len(targets))  # the caller's progress; Cancelled when it gives up
            chunk = torch.tensor(targets[a : a + b])
            k = len(chunk)
            which = torch.searchsorted(ends, chunk, right=True)  # (k,): the part of each target
            ys, seeds = [], []
            for j in which.unique().tolist():
                mine = (which == j).nonzero()[:, 0]  # the rows whose target is in part j
                seed = torch.zeros_like(parts[j])
                start = int(ends[j]) - parts[j].shape[1]
                seed[mine.to(rep.device), (chunk[mine] - start).to(rep.device)] = 1.0  # row i: d(target i)/d(row i)
                ys.append(parts[j])
                seeds.append(seed)
            last = a + b >= len(targets)
            grads = torch.autograd.grad(ys, wrt, seeds, retain_graph=not last, allow_unused=True)
            edges = [torch.zeros_like(x[:k]) if g is None else g[:k] * x[:k] for g, x in zip(grads, wrt)]
            out.append(torch.cat(edges, dim=1).detach())  # (k, n_sources)
    n_src = sum(x.shape[1] for x in rep.leaves(1).tensors())
    return torch.cat(out) if out else torch.zeros(0, n_src, dtype=rep.dtype)


def target_values(rep: LocalReplacement, position: int, token_id: int, fill: str = "real", linear: bool = False,
                  gates=None) -> torch.Tensor:  # fmt: skip
    """(n_features + 1,): the targets in one pass with every node at its value ("real") or at 0 ("zero": the
    biases)."""
    with torch.no_grad():
        return _targets(rep, rep.leaves(1, fill), position, token_id, linear, gates)[0]


def attribute(rep: LocalReplacement, tokens: dict[str, list[str]], position: int, token_id: int, token: str,
              real_logits: torch.Tensor, batch: int = BATCH) -> Graph:  # fmt: skip
    """The full graph of one logit (every node and edge; pruning is scratchformer.graph.influence's).
    real_logits: (vocab,) the model's own logits at `position`."""
    nodes = make_nodes(rep, tokens, position, token)
    n = len(nodes)
    n_feat = sum(len(a.pos) for a in rep.active.values())
    n_err = sum(e.shape[0] for e in rep.errors.values())
    n_emb = sum(rep.lengths().values())
    targets = list(range(n_feat + 1))
    incoming = rows(rep, targets, position, token_id, batch)  # (n_feat + 1, n − 1)
    adjacency = torch.zeros(n, n, dtype=rep.dtype)
    adjacency[:n_feat, : n - 1] = incoming[:n_feat].cpu()
    adjacency[n - 1, : n - 1] = incoming[n_feat].cpu()
    zero = target_values(rep, position, token_id, "zero")
    with torch.no_grad():  # every node at its value: the targets, and every logit at the position
        parts, hidden = _target_parts_and_hidden(rep, rep.leaves(1), position, token_id)
        full = torch.cat(parts, dim=1)[0]  # (n_features + 1,)
        every = rep.logits(hidden, position)[0].cpu()  # (vocab,)
    index = torch.tensor([*range(n_feat), n - 1])
    bias = torch.zeros(n, dtype=rep.dtype).index_put((index,), zero.cpu())
    totals = torch.zeros(n, dtype=rep.dtype).index_put((index,), full.cpu())
    real_pre = torch.cat([a.pre for a in rep.active.values()]).cpu()
    real = torch.zeros(n, dtype=rep.dtype)
    real[:n_feat] = real_pre
    real[n - 1] = float(real_logits[token_id] - (real_logits.mean() if rep.demeaned else 0.0))
    values = torch.ones(n, dtype=rep.dtype)
    values[:n_feat] = torch.cat([a.value for a in rep.active.values()]).cpu()
    values[n - 1] = totals[n - 1]
    error = float((every - real_logits.to(every.dtype)).abs().max())
    return Graph(nodes, adjacency, values, bias, totals, real, n_feat, n_err, n_emb, position, token_id, token, error)


def logit_without(rep: LocalReplacement, graph: Graph, index: int, linear: bool = True) -> float:
    """The replacement's logit with node `index` removed (its value set to 0). linear False: every other node held
    at its value, so the logit moves by the node's edge into it (its direct effect). linear True: the features
    follow their pre-activations (the linear regime), so it moves by influence.total_effects' entry."""
    node = graph.nodes[index]
    leaves, gates = rep.leaves(1), {}
    if node.kind == "feature":
        act = rep.active[node.step]
        j = int(((act.pos == node.position) & (act.feat == node.feature)).nonzero()[0, 0])
        leaves.feat[node.step][0, j] = 0.0
        gates[node.step] = torch.ones_like(act.value).index_fill(0, torch.tensor([j], device=rep.device), 0.0)
    elif node.kind == "error":
        leaves.err[node.step][0, node.position] = 0.0
    elif node.kind == "embedding":
        leaves.emb[node.side][0, node.position] = 0.0
    with torch.no_grad():
        return float(_targets(rep, leaves, graph.position, graph.token_id, linear, gates)[0, -1])
