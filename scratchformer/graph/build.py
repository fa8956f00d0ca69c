"""One call from a model and an input to the attribution graph of one prediction, and what `scratchformer graph`
prints of it (DESIGN.md, "Many inputs, features, graphs, live pages"):

    {"nodes": [{"id", "kind", "side", "layer", "position", "feature"?, "activation"?, "influence"}],
     "edges": [{"source", "target", "weight"}], "logit": {"token", "id", "value"},
     "scores": {"replacement", "completeness"}, "pruned": {"nodes", "edges", "kept_influence"}}

The prediction is the one made at decoder position P (from 0): by default the last position of a typed decoder
input (teacher forcing: what comes after the target), and the first generated token when an encoder-decoder reads
its own output. The logit is that position's most likely token in the model. Positions after P cannot reach it
(the decoder is causal), so the decoder input is cut after P. A graph with more active features than
`max_features` keeps the most influential ones as nodes (chosen as circuit-tracer does, by influence on the logit
through the rows computed so far) and folds the others into their layer's error nodes, so it stays exact.

`demeaned` explains the logit minus the mean of every logit at that position (circuit-tracer's target);
`like_circuit_tracer` takes all of circuit-tracer's conventions, for setting a graph beside its own: the demeaned
logit, embedding nodes of the token's vector alone (the positional encoding a constant), and the first position
(the start token) holding its features and error as constants (benchmarks/bench_graph.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ..errors import UserError
from ..loading.memory import default_budget, size_text
from ..patching.interventions import HeadChange, KeyKnockout, intervene
from ..patching.metric import read_token
from . import influence as inf
from .attribution import Graph, attribute, rows
from .progress import Cancelled, watching
from .replacement import SMALL_MODEL, LocalReplacement
from .transcoders import open_set

MAX_FEATURES = 4096  # feature nodes kept (by influence) before the rest are folded into the error nodes
PRECISIONS = {"float64": torch.float64, "float32": torch.float32}
CHOOSE_BATCH = 64  # features whose incoming edges are read per round of the influence-ordered choice
ALTERNATIVES = 10  # the most likely tokens a result lists, whose logits a graph may explain instead (`token`)


@dataclass
class GraphResult:
    """A graph with its pruning and scores; `to_dict()` is what `scratchformer graph --json` prints."""

    graph: Graph
    kept: inf.Pruned
    replacement: float
    completeness: float
    seconds: float
    tokens: dict[str, list[str]]
    notes: list[str] = field(default_factory=list)
    replacement_model: LocalReplacement | None = None  # what the graph was read from: passes with nodes removed
    # (id, token, probability) of the model's ALTERNATIVES most likely tokens at the position, the most likely first:
    # what else `token` (or `versus`) could name
    likely: list[tuple[int, str, float]] = field(default_factory=list)

    @property
    def demeaned(self) -> bool:
        """Whether the logit node is the logit minus the mean logit (circuit-tracer's target; not for a logit
        difference, whose means cancel)."""
        rm = self.replacement_model
        return bool(rm is not None and rm.demeaned and rm.versus is None)

    def _versus(self) -> dict:
        """The JSON's second token of a logit difference ({} for one logit)."""
        g = self.graph
        versus = g.nodes[g.logit_index].versus
        return {} if versus is None else {"versus": {"token": versus, "id": g.versus_id}}

    def kept_nodes(self) -> list[int]:
        return [i for i in range(len(self.graph.nodes)) if bool(self.kept.nodes[i])]

    def to_dict(self) -> dict:
        g, k = self.graph, self.kept
        nodes = []
        for i in self.kept_nodes():
            n = g.nodes[i]
            row = {"id": n.id, "kind": n.kind, "side": n.side, "layer": n.layer, "position": n.position}
            if n.kind == "feature":
                row.update(feature=n.feature, activation=n.activation)
            row["influence"] = float(k.influence[i])
            nodes.append(row)
        t, s = k.edges.nonzero(as_tuple=True)
        edges = [{"source": g.nodes[b].id, "target": g.nodes[a].id, "weight": float(g.adjacency[a, b])}
                 for a, b in zip(t.tolist(), s.tolist())]  # fmt: skip
        all_edges = int((g.adjacency != 0).sum())
        return {"nodes": nodes, "edges": edges,
                "logit": {"token": g.token, "id": g.token_id, "value": float(g.real[g.logit_index]), **self._versus(),
                          **({"demeaned": True} if self.demeaned else {})},
                "scores": {"replacement": self.replacement, "completeness": self.completeness},
                "pruned": {"nodes": len(g.nodes) - len(nodes), "edges": all_edges - len(edges),
                           "kept_influence": k.kept_influence}}  # fmt: skip

    def text(self, top: int = 12) -> str:
        """A readable summary: the logit, the scores, what pruning kept, the most influential nodes and the
        strongest edges into the logit."""
        from .report import text_report

        return text_report(self, top)


def default_position(bundle, inputs) -> int:
    """The decoder position explained when none is asked for (see the module's text)."""
    if bundle.config.has_encoder and inputs.decoder_input == "generated":
        return 0
    return inputs.tgt.shape[1] - 1


def build_graph(bundle, inputs, transcoders=None, position: int | None = None,
                node_threshold: float = inf.NODE_THRESHOLD, edge_threshold: float = inf.EDGE_THRESHOLD,
                prune: bool = True, max_features: int = MAX_FEATURES, budget: int | None = None, dictionaries=(),
                demeaned: bool = False, like_circuit_tracer: bool = False, progress=None,
                cancelled=None, precision: str | None = None, threads: int | None = None, interventions=(),
                token: str | int | None = None, versus: str | int | None = None) -> GraphResult | None:  # fmt: skip
    """The graph of the prediction at decoder `position` (see the module's text). `transcoders`: a transcoder
    set's folder, or {ffn step: Dictionary} (scratchformer.graph.transcoders.open_set); `dictionaries`: single
    transcoder folders (with a set or instead of one); neither: the bundled set.
    `prune` False keeps every node and edge; `demeaned`, `like_circuit_tracer`: see the module's text.
    `precision`: "float64" or "float32" for the replacement's passes; by default float64 below
    replacement.SMALL_MODEL parameters (the sums close to about 1e-12) and float32 above (to about 1e-5, as
    circuit-tracer computes, in about half the time).
    `progress(stage, done, total)` hears how far the edges have got; once `cancelled()` turns true the build stops
    and returns None. `threads`: PyTorch's threads while it builds (default: one for a model under
    replacement.SMALL_MODEL parameters, see _threads; PyTorch's own otherwise). `interventions`: heads changed and
    keys knocked out (scratchformer.patching.interventions' HeadChange, KeyKnockout), which the graph's run makes
    and its frozen patterns keep, so the graph explains the changed model. `token`: whose logit is explained — by
    default the most likely token at the position; an id, or a text read as one token ('id:N', ' Mary': as the
    sweep's --answer). `versus`: a second token, read alike; the graph then explains logit(token) − logit(versus),
    why the model prefers the one to the other (the sweep's logit-diff). Bad input raises UserError with one
    sentence."""
    if precision not in (None, *PRECISIONS):
        raise UserError(f"--graph-precision is float64 or float32, not {precision}.")
    conventions = {"demeaned": demeaned or like_circuit_tracer, "token_embeddings": like_circuit_tracer,
                   "held": 1 if like_circuit_tracer else 0, "dtype": PRECISIONS.get(precision)}  # fmt: skip
    wanted, conventions["versus"] = _wanted(bundle, token), _wanted(bundle, versus, "--versus")
    changes = list(interventions or ())
    for item in changes:
        if not isinstance(item, HeadChange | KeyKnockout):
            raise UserError(f"A graph keeps a run's changed heads and knocked-out keys in its frozen patterns, but "
                            f"not a patched or edited step ({item.spec().strip()}): the local replacement has no "
                            "place for it.")  # fmt: skip
    try:
        with _threads(bundle.model, threads), watching(progress, cancelled):
            return _build(bundle, inputs, transcoders, position, node_threshold, edge_threshold, prune,
                          max_features, budget, dictionaries, conventions, changes, wanted)  # fmt: skip
    except Cancelled:
        return None


def _wanted(bundle, token: str | int | None, option: str = "--token") -> int | None:
    """The id of a token the graph's logit names (None: none given), checked against the vocabulary."""
    if token is None or isinstance(token, str):
        return None if token is None else read_token(token, bundle.tgt_tokenizer, option)
    size = bundle.tgt_tokenizer.vocab_size
    if not 0 <= int(token) < size:
        raise UserError(f"{option} id:{token}: this vocabulary has ids 0 to {size - 1}.")
    return int(token)


@contextmanager
def _threads(model, threads: int | None):
    """PyTorch on `threads` threads while the graph is built; by default on one for a small model: its passes are
    many small products, and on a busy two-core machine two threads took 0.3 to 4 s for what one thread does in
    0.1 s (en-hi, measured). On a quiet machine two threads build a GPT-2-shaped graph in 0.75 of one's time."""
    if threads is None and sum(p.numel() for p in model.parameters()) < SMALL_MODEL:
        threads = 1
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _build(bundle, inputs, transcoders, position, node_threshold, edge_threshold, prune, max_features, budget,
           dictionaries, conventions, changes, wanted) -> GraphResult:  # fmt: skip
    start = time.perf_counter()
    c = bundle.config
    if not c.has_decoder or bundle.model.generator is None:
        raise UserError(f"{bundle.name} has no decoder and so predicts no token: a graph explains a predicted "
                        "token's logit.")  # fmt: skip
    for name, value in (("--node-threshold", node_threshold), ("--edge-threshold", edge_threshold)):
        if not 0.0 <= value <= 1.0:
            raise UserError(f"{name} is a share of the influence between 0 and 1, not {value}.")
    if max_features < 1:
        raise UserError(f"--max-features must be at least 1, not {max_features}.")
    if inputs.tgt is None or inputs.tgt.shape[0] != 1:
        raise UserError("A graph explains one prediction of one input: give one sentence (no --batch).")
    length = inputs.tgt.shape[1]
    position = default_position(bundle, inputs) if position is None else position
    if position < 0:
        raise UserError(f"--position counts decoder positions from 0, so it cannot be {position}.")
    if position >= length:
        raise UserError(f"--position {position} is past the decoder input, which has positions 0 to {length - 1} "
                        f"({' '.join(inputs.target_tokens[0])}).")  # fmt: skip
    sets = transcoders if isinstance(transcoders, dict) else open_set(bundle, transcoders, dictionaries)
    tgt = inputs.tgt[:, : position + 1]  # (1, P + 1): later positions cannot reach position P
    tokens = {"encoder": list(inputs.source_tokens[0]) if c.has_encoder else [],
              "decoder": list(inputs.target_tokens[0][: position + 1])}  # fmt: skip
    if conventions["token_embeddings"] and c.embed_layer_norm:
        raise UserError(f"{bundle.name} normalises its embeddings (a LayerNorm over token + position), so its "
                        "embedding nodes cannot hold the token's vector alone as circuit-tracer's do.")  # fmt: skip
    with intervene(bundle.model, changes):  # the capture run, and the model's own, make the run's changes
        rep = LocalReplacement(bundle, sets, inputs.src, tgt, **conventions)
        full = rep.full_pass(position)
        if rep.dtype == next(bundle.model.parameters()).dtype:  # its capture run is the model's own forward
            real_logits = full.captured  # (vocab,)
        else:
            real_logits = _real_logits(bundle, inputs.src, tgt, position)  # (vocab,)
    top = int(real_logits.argmax())
    token_id = top if wanted is None else wanted
    names = bundle.tgt_tokenizer.token_strings
    token, against = names([token_id])[0], rep.versus
    if against == token_id:
        raise UserError(f"--versus names the explained token itself, “{token}”: a logit difference needs two.")
    notes = []
    probs = torch.softmax(real_logits, dim=0)  # (vocab,)
    if token_id != top:
        rank = int((real_logits > real_logits[token_id]).sum()) + 1
        notes.append(f"The graph explains the logit of “{token}” (rank {rank} here, probability "
                     f"{float(probs[token_id]):.3g}), not that of the most likely token “{names([top])[0]}” "
                     f"({float(probs[top]):.3g}).")  # fmt: skip
    if against is not None:
        notes.append(f"The graph explains the logit difference “{token}” − “{names([against])[0]}” "
                     f"({float(real_logits[token_id] - real_logits[against]):.4g}; probabilities "
                     f"{float(probs[token_id]):.3g} and {float(probs[against]):.3g}): why the model prefers the one "
                     "to the other.")  # fmt: skip
    if changes:
        notes.append(f"The graph is of the model as this run changes it ({', '.join(c.spec() for c in changes)}): "
                     "the changed heads and knocked-out keys are in its frozen attention patterns.")  # fmt: skip
    if conventions["demeaned"] and against is None:  # a difference's means would cancel
        notes.append("The graph explains the logit minus the mean of every logit at that position (demeaned).")
    if c.final_softcap:
        notes.append(f"{bundle.name} soft-caps its logits (c·tanh(logit/c), c = {c.final_softcap:g}): the graph "
                     "explains the logit before the cap.")  # fmt: skip
    n_active = sum(len(a.pos) for a in rep.active.values())
    if n_active > max_features:
        rep.keep_only(choose_features(rep, position, token_id, max_features))
        full = rep.full_pass(position)  # the same logits; the features not kept are in the errors now
        notes.append(f"{n_active} features are active, more than the cap of {max_features}: the {max_features} "
                     "most influential on the logit are nodes, the others are folded into their layer's error "
                     "nodes.")  # fmt: skip
    n = sum(len(a.pos) for a in rep.active.values()) + sum(e.shape[0] for e in rep.errors.values())
    n += sum(rep.lengths().values()) + 1
    need, budget = 4 * n * n * 8, budget or default_budget()
    if need > budget:
        raise UserError(f"A graph of {n} nodes would need about {size_text(need)}, more than the memory budget of "
                        f"{size_text(budget)}: lower --max-features (the most influential features stay nodes, the "
                        "others join the error nodes) or raise --memory-budget.")  # fmt: skip
    graph = attribute(rep, tokens, position, token_id, token, real_logits, full,
                      versus=None if against is None else names([against])[0])  # fmt: skip
    graph.notes += notes
    made = inf.base(graph)  # Â and the influence, which pruning and the scores both read
    if prune:
        kept = inf.prune(graph, node_threshold, edge_threshold, made)
    else:
        everything = made[1] + inf.logit_weights(graph)  # every node's influence, the logit's own weight included
        kept = inf.Pruned(torch.ones(n, dtype=torch.bool), graph.adjacency != 0, everything, 1.0)
    replacement, completeness = inf.scores(graph, made)
    seconds = time.perf_counter() - start
    return GraphResult(graph, kept, replacement, completeness, seconds, tokens, notes, rep,
                       likely_tokens(bundle, real_logits))  # fmt: skip


def likely_tokens(bundle, logits: torch.Tensor, k: int = ALTERNATIVES) -> list[tuple[int, str, float]]:
    """The k most likely tokens of logits (vocab,): (id, token, probability), most likely first."""
    probs = torch.softmax(logits.double(), dim=0)  # (vocab,)
    top = probs.topk(min(k, len(probs)))
    ids = top.indices.tolist()
    return list(zip(ids, bundle.tgt_tokenizer.token_strings(ids), top.values.tolist()))


def _real_logits(bundle, src, tgt, position: int) -> torch.Tensor:
    """The model's own logits at `position` (vocab,), float64 on the CPU; before a final soft-capping (Gemma 2),
    which the graph does not explain (tanh keeps their order)."""
    from ..transformer.masks import pad_from_ids

    m, c, dev = bundle.model, bundle.config, bundle.device
    src = None if src is None else src.to(dev)
    tgt = tgt.to(dev)
    with torch.no_grad():
        src_pad = pad_from_ids(src, c.pad_id) if src is not None else None
        memory = m.encode(src, src_pad) if c.has_encoder else None  # (1, S, d_model)
        hidden = m.decode(tgt, memory, src_pad, pad_from_ids(tgt, c.pad_id, start=True))  # (1, T, d_model)
        x = hidden[0, position]  # (d_model,)
        if m.generator.scale is not None:
            x = x * m.generator.scale
        return m.generator.logits(x).double().cpu()  # (vocab,)


def choose_features(rep: LocalReplacement, position: int, token_id: int, cap: int) -> dict[str, torch.Tensor]:
    """The `cap` features with the most influence on the logit, found round by round: the incoming edges of the
    logit first, then of the most influential features not yet read (by influence through the rows read so far),
    CHOOSE_BATCH at a time. Returns, per step, a (T, d_sae) bool mask of the chosen features."""
    n_feat = sum(len(a.pos) for a in rep.active.values())
    read = rows(rep, [n_feat], position, token_id)  # (1, n_sources): the logit's row
    chosen: list[int] = []
    while len(chosen) < cap:
        norm = inf.normalise(read)  # (k, n_sources): the logit's row, then the chosen features'
        term = norm[0].clone()
        total = term.clone()
        for _ in range(len(chosen) + 1):  # through the chosen features' rows, as far as they reach
            term = term[chosen] @ norm[1:] if chosen else torch.zeros_like(term)
            if not bool(term.any()):
                break
            total += term
        scores = total[:n_feat].clone()
        scores[chosen] = -1.0
        pick = scores.argsort(descending=True)[: min(CHOOSE_BATCH, cap - len(chosen))]
        pick = [int(i) for i in pick if scores[i] >= 0]
        if not pick:
            break
        chosen += pick
        read = torch.cat([read, rows(rep, pick, position, token_id)])
    keep, offset = {}, 0
    for step, act in rep.active.items():
        mask = torch.zeros_like(rep.all_active[step])
        mine = [i - offset for i in chosen if offset <= i < offset + len(act.pos)]
        mask[act.pos[mine], act.feat[mine]] = True
        keep[step], offset = mask, offset + len(act.pos)
    return keep
