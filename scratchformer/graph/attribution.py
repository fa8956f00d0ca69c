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

from .packing import deal, target_groups
from .progress import tick
from .replacement import FullPass, LocalReplacement, ffn_side

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
    versus: str | None = None  # the logit node of a logit difference: the token whose logit it is taken against


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
    versus_id: int | None = None  # a logit difference's second token: the logit node is token − versus

    @property
    def logit_index(self) -> int:
        return len(self.nodes) - 1


def _short(side: str) -> str:
    return "enc" if side == "encoder" else "dec"


def make_nodes(rep: LocalReplacement, tokens: dict[str, list[str]], position: int, token: str,
               versus: str | None = None) -> list[Node]:  # fmt: skip
    """The nodes of a replacement, in the graph's order (see the module's text); `versus`: the token of a logit
    difference's second logit."""
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
    nodes.append(Node(f"logit@{position}", "logit", "decoder", n_layers, position, token, versus=versus))
    return nodes


def target_name(node: Node) -> str:
    """What the logit node explains, quoted: “A”, or “A” − “B” for a logit difference."""
    return f"“{node.token}”" if node.versus is None else f"“{node.token}” − “{node.versus}”"


def _target_parts_and_hidden(rep: LocalReplacement, leaves, position: int, token_id: int, linear: bool = False,
                             gates=None, lengths=None) -> tuple[list[torch.Tensor], torch.Tensor]:  # fmt: skip
    """Every active feature's pre-activation, step by step ((B, n_step) each), then the logit ((B, 1)), in one
    replacement pass; and the pass's final hidden state (B, T, d_model). `lengths`: see LocalReplacement.forward."""
    pre, hidden = rep.forward(leaves, linear, gates, lengths)
    return [pre[s] for s in rep.active] + [rep.logits(hidden, position, token_id)[:, None]], hidden


def _target_parts(rep: LocalReplacement, leaves, position: int, token_id: int, linear: bool = False, gates=None,
                  lengths=None) -> list[torch.Tensor]:  # fmt: skip
    """The targets of one replacement pass, step by step (see _target_parts_and_hidden)."""
    return _target_parts_and_hidden(rep, leaves, position, token_id, linear, gates, lengths)[0]


def _targets(rep: LocalReplacement, leaves, position: int, token_id: int, linear: bool = False, gates=None):
    """(B, n_features + 1): every active feature's pre-activation, then the logit, in one replacement pass."""
    return torch.cat(_target_parts(rep, leaves, position, token_id, linear, gates), dim=1)


def _places(rep: LocalReplacement, targets: list[int], position: int) -> tuple[list[int], list[int]]:
    """Each target's part (its feed-forward step in order, the logit last) and the decoder position it reads up to
    (−1: the encoder's features read no decoder position)."""
    parts, reach = [], []
    for j, (step, act) in enumerate(rep.active.items()):
        parts += [j] * len(act.pos)
        reach += act.pos.tolist() if ffn_side(step) == "decoder" else [-1] * len(act.pos)
    parts.append(len(rep.active))  # the logit
    reach.append(position)  # the logit
    return [parts[t] for t in targets], [reach[t] for t in targets]


def rows(rep: LocalReplacement, targets: list[int], position: int, token_id: int, batch: int = BATCH
         ) -> torch.Tensor:  # fmt: skip
    """The incoming edges of the given targets (indices into features + [logit]): (len(targets), n_sources),
    sources in the graph's order (features, errors, embeddings). Row i is J[t_i, :] ⊙ u.

    One replacement pass of a batch of identical rows, then backward passes through it, each reading one target
    per row (packing.deal: a layer's targets share passes, and a row carries only the decoder positions its targets
    read). Each backward pass starts from the steps its targets are in, so it goes no further down than they
    reach."""
    n_src = sum(x.shape[1] for x in rep.leaves(1).tensors())
    out = torch.zeros(len(targets), n_src, dtype=rep.dtype)
    if not targets:
        return out
    parts_of, reach = _places(rep, targets, position)
    plan = deal(target_groups(parts_of, batch), reach, batch, rep.lengths()["decoder"])
    leaves = rep.leaves(plan.rows, grad=True)
    parts = _target_parts(rep, leaves, position, token_id, lengths=plan.lengths)  # (B, n_step) per step, (B, 1)
    starts = torch.tensor([0] + [x.shape[1] for x in parts]).cumsum(0).tolist()  # where each part begins
    wrt = leaves.tensors()  # features, errors, embeddings: the sources' order
    done = 0
    for k, pairs in enumerate(plan.passes):
        tick("reading the edges", done, len(targets))  # the caller's progress; Cancelled when it gives up
        seeds = {}
        for b, i in pairs:
            j = parts_of[i]
            if j not in seeds:
                seeds[j] = torch.zeros_like(parts[j])
            seeds[j][b, targets[i] - starts[j]] = 1.0  # row b: d(target i)/d(row b)
        used = sorted(seeds)
        last = k == len(plan.passes) - 1
        grads = torch.autograd.grad([parts[j] for j in used], wrt, [seeds[j] for j in used], retain_graph=not last,
                                    allow_unused=True)  # fmt: skip
        mine = torch.tensor([b for b, _ in pairs], device=rep.device)
        edges = [torch.zeros(len(pairs), x.shape[1], dtype=rep.dtype) if g is None else (g[mine] * x[mine]).cpu()
                 for g, x in zip(grads, wrt)]  # fmt: skip
        out[[i for _, i in pairs]] = torch.cat(edges, dim=1).detach()  # (k, n_sources)
        done += len(pairs)
    return out


def target_values(rep: LocalReplacement, position: int, token_id: int, fill: str = "real", linear: bool = False,
                  gates=None) -> torch.Tensor:  # fmt: skip
    """(n_features + 1,): the targets in one pass with every node at its value ("real") or at 0 ("zero": the
    biases)."""
    with torch.no_grad():
        return _targets(rep, rep.leaves(1, fill), position, token_id, linear, gates)[0]


def attribute(rep: LocalReplacement, tokens: dict[str, list[str]], position: int, token_id: int, token: str,
              real_logits: torch.Tensor, full: FullPass | None = None, batch: int = BATCH,
              versus: str | None = None) -> Graph:  # fmt: skip
    """The full graph of one logit (every node and edge; pruning is scratchformer.graph.influence's), or of a
    logit difference when the replacement has `versus` (whose token is `versus`).
    real_logits: (vocab,) the model's own logits at `position`; `full`: rep.full_pass(position), when made."""
    nodes = make_nodes(rep, tokens, position, token, versus)
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
    full = full or rep.full_pass(position)  # every node at its value: the targets, and every logit there
    with torch.no_grad():
        logit = rep.logits(full.hidden, position, token_id)  # (1,)
    every = full.logits  # (vocab,)
    replaced = torch.cat([*(full.pre[s] for s in rep.active), logit[:, None]], dim=1)[0]  # (n_features + 1,)
    index = torch.tensor([*range(n_feat), n - 1])
    bias = torch.zeros(n, dtype=rep.dtype).index_put((index,), zero.cpu())
    totals = torch.zeros(n, dtype=rep.dtype).index_put((index,), replaced.cpu())
    real_pre = torch.cat([a.pre for a in rep.active.values()]).cpu()
    real = torch.zeros(n, dtype=rep.dtype)
    real[:n_feat] = real_pre
    against = real_logits[rep.versus] if rep.versus is not None else real_logits.mean() if rep.demeaned else 0.0
    real[n - 1] = float(real_logits[token_id] - against)
    values = torch.ones(n, dtype=rep.dtype)
    values[:n_feat] = torch.cat([a.value for a in rep.active.values()]).cpu()
    values[n - 1] = totals[n - 1]
    error = float((every - real_logits.to(every.dtype)).abs().max())
    return Graph(nodes, adjacency, values, bias, totals, real, n_feat, n_err, n_emb, position, token_id, token, error,
                 versus_id=rep.versus)  # fmt: skip


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
