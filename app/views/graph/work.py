"""The Graph view's work off the UI thread (each function is a job's work, app/work/jobs.py, or cheap enough for the UI
thread where it says so), and what a built graph keeps: the result (scratchformer.graph.GraphResult, with its full
adjacency, so pruning again needs no new attribution), the transcoders it was read through, and its picture."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from scratchformer.errors import UserError
from scratchformer.graph.influence import EDGE_THRESHOLD
from scratchformer.plotdata.graph_layout import GraphLayout, Supernode, layout_graph


@dataclass(frozen=True)
class Choice:
    """Which transcoders a graph is read through: the model's bundled set, the dictionaries attached to the run
    (Run › Attach dictionary…), or a set's folder picked with Transcoders…"""

    kind: str  # "bundled" | "attached" | "folder"
    folders: tuple[str, ...] = ()  # attached: the run's dictionary folders; folder: (the set's folder,)

    def label(self) -> str:
        if self.kind == "bundled":
            return "bundled set"
        if self.kind == "attached":
            return "attached dictionaries"
        return Path(self.folders[0]).name or self.folders[0]


@dataclass(frozen=True)
class Ask:
    """One graph to build: the run it explains, through which transcoders, at which decoder position, pruned at
    which node and edge thresholds."""

    bundle: object = field(compare=False)  # the run's ModelBundle
    inputs: object = field(compare=False)  # and its Inputs (not the run itself, whose trace a new run lets go)
    run_id: int
    choice: Choice
    position: int
    threshold: float
    edge_threshold: float = EDGE_THRESHOLD
    interventions: tuple = ()  # the run's changed heads and knocked-out keys, which the graph's patterns keep
    unread: tuple[str, ...] = ()  # what else the run changes (clamped features, patched steps): not in the graph
    token: int | None = None  # the token whose logit is explained (None: the most likely)
    versus: int | None = None  # a token whose logit it is taken against (a logit difference), or None

    def key(self) -> tuple:
        return (self.run_id, self.choice, self.position, self.token, self.versus)


def graph_changes(result) -> tuple[tuple, tuple[str, ...]]:
    """A run's interventions split into those its graph keeps (changed heads, knocked-out keys: in the frozen
    patterns) and the specs of the rest (clamped dictionary features, patched steps), which the local replacement
    has no place for."""
    from scratchformer.patching.interventions import HeadChange, KeyKnockout, Patch

    items = tuple(result.trace.interventions)
    kept = tuple(i for i in items if isinstance(i, HeadChange | KeyKnockout))
    others = [i for i in items if not isinstance(i, HeadChange | KeyKnockout)]
    clamps = tuple(getattr(result.request, "clamps", ()) or ())
    if clamps:  # a clamp's own step edits are named by the clamp
        others = [i for i in others if isinstance(i, Patch)]
    return kept, (*(c.spec() for c in clamps), *(i.spec().strip() for i in others))


def unread_note(unread: tuple[str, ...]) -> str:
    """What a graph says of a run's changes it does not read."""
    them = "them" if len(unread) > 1 else "it"
    return (f"This run also changes what the graph does not read ({', '.join(unread)}: a clamped feature or a patched "
            f"step has no place in the local replacement); the graph explains the run without {them}, so its "
            "numbers differ from the steps shown.")


@dataclass
class Built:
    """A built graph and the picture of it pruned at `threshold` (nodes) and `edge_threshold`, with `groups` (the
    view keeps the latest)."""

    ask: Ask
    result: object  # scratchformer.graph.GraphResult
    transcoders: dict  # ffn output step → Dictionary
    kept: object  # scratchformer.graph.influence.Pruned at `threshold`
    threshold: float
    layout: GraphLayout
    groups: list[Supernode]
    seconds: float  # building (attribution, pruning, layout)
    edge_threshold: float = EDGE_THRESHOLD
    all_edges: int = 0  # the full graph's non-zero edges (what pruning keeps a share of)


def build(ask: Ask, groups: list[Supernode], job) -> Built | None:
    """Open the transcoders and build the graph of `ask` (the work of a job); None once cancelled. Bad input raises
    UserError with one sentence."""
    from scratchformer.graph import build_graph
    from scratchformer.graph.transcoders import open_set

    t0 = time.perf_counter()
    bundle, inputs = ask.bundle, ask.inputs
    folder = ask.choice.folders[0] if ask.choice.kind == "folder" else None
    attached = list(ask.choice.folders) if ask.choice.kind == "attached" else []
    job.progress("opening the transcoders")
    sets = open_set(bundle, folder, attached)
    if job.cancelled():
        return None
    job.progress("reading the edges")
    result = build_graph(bundle, inputs, sets, ask.position, ask.threshold, ask.edge_threshold,
                         progress=lambda stage, done, total: job.progress(f"{stage}: {done} of {total} targets"),
                         cancelled=job.cancelled, interventions=ask.interventions, token=ask.token,
                         versus=ask.versus)  # fmt: skip
    if result is None or job.cancelled():  # the build stops at its next batch of edges once cancelled
        return None
    notes = [*result.notes, unread_note(ask.unread)] if ask.unread else result.notes
    result = replace(result, replacement_model=None, notes=notes)  # the model's copy, which the view never reruns
    job.progress("laying it out")
    layout = layout_graph(result, result.kept, groups)
    all_edges = int((result.graph.adjacency != 0).sum())  # (n, n) → a count, once here rather than on the UI thread
    return Built(ask, result, sets, result.kept, ask.threshold, layout, list(groups), time.perf_counter() - t0,
                 ask.edge_threshold, all_edges)  # fmt: skip


def relayout(built: Built, threshold: float, edge_threshold: float, groups: list[Supernode], job) -> Built | None:
    """The same graph pruned again at `threshold` (nodes) and `edge_threshold` (the full adjacency is kept: no new
    attribution) and laid out with `groups` (the work of a job: pruning a graph of thousands of nodes takes a
    fraction of a second)."""
    from scratchformer.graph.influence import prune

    t0 = time.perf_counter()
    same = threshold == built.threshold and edge_threshold == built.edge_threshold
    kept = built.kept if same else prune(built.result.graph, threshold, edge_threshold)
    if job.cancelled():
        return None
    layout = layout_graph(built.result, kept, groups)
    return Built(built.ask, built.result, built.transcoders, kept, threshold, layout, list(groups),
                 time.perf_counter() - t0, edge_threshold, built.all_edges)  # fmt: skip


def transcoder_folder(bundle, choice: Choice, step: str) -> str | None:
    """The folder of the transcoder that stands in for feed-forward `step` (cards are kept beside it), or None when
    it cannot be told (reads files: a job's work)."""
    from scratchformer.features.bundled import bundled_transcoders
    from scratchformer.features.folder import CFG, hook_step, load
    from scratchformer.features.points import readable_steps

    if choice.kind in ("bundled", "folder"):
        root = bundled_transcoders(bundle.name) if choice.kind == "bundled" else Path(choice.folders[0])
        if root is None:
            return None
        subs = [Path(root) / step] + sorted(p for p in Path(root).iterdir() if (p / CFG).is_file())
    else:
        subs = [Path(f) for f in choice.folders]
    readable = readable_steps(bundle.model)
    for sub in subs:
        if not (sub / CFG).is_file():
            continue
        d = load(sub)
        if d.transcoder and hook_step(bundle.model, d.info.to, readable) == step:
            return str(sub)
    return None


def cards_of(bundle, built: Built, step: str, corpus: str, job):
    """Every feature's card of the transcoder that stands in for `step`, over `corpus` (the work of a job; kept on
    disk beside the transcoder, so only the first time reads the corpus). None once cancelled."""
    from scratchformer.features.cards import cards_for
    from scratchformer.features.points import ffn_input

    if not corpus:
        raise UserError(f"{bundle.name} has no corpus of its own for the cards: type one in the Features view's "
                        "“Cards over corpus” field (task:NAME, or a text, JSONL or CSV file).")  # fmt: skip
    d = built.transcoders[step]
    folder = transcoder_folder(bundle, built.ask.choice, step)
    return cards_for(bundle, d, ffn_input(bundle.model, step), corpus, folder, progress=job.progress,
                     cancelled=job.cancelled)  # fmt: skip


def feature_step(trace, bundle, step: str, choice: Choice, dictionaries: list[str]) -> str:
    """The trace step to show for a feature of the transcoder that stands in for feed-forward `step`: its features
    step (`<input step>.dict.features`) when the run has that transcoder attached (the graph reads the attached
    dictionaries, or one of the set's folders is attached), else the step it reads (the feed-forward's input), where
    its features are computed from. Reads no file: the UI thread may call it."""
    from scratchformer.features.bundled import bundled_transcoders
    from scratchformer.features.points import ffn_input

    at = ffn_input(bundle.model, step)
    features = f"{at}.dict.features"
    if trace.find(features) is None:
        return at
    if choice.kind == "attached":
        return features
    root = bundled_transcoders(bundle.name) if choice.kind == "bundled" else Path(choice.folders[0])
    if root is not None and any(Path(d).resolve().parent == Path(root).resolve() for d in dictionaries):
        return features
    return at


# --- why attention moved it: a head's score split by the graph's nodes (scratchformer.graph.qk) ----------------------

QK_TOP = 15  # products (and each side's nodes) the QK panel lists; the rest is one row


@dataclass(frozen=True)
class QKAsk:
    """One attention score to split: head `head` of `attention` at query position `query` against key position
    `key`. head None: the head that attends most from the query to the key (with key None too: the head whose
    strongest weight from the query is the largest); key None: the key that head attends to most."""

    attention: str
    head: int | None
    query: int
    key: int | None

    def spec(self, head: int, key: int) -> str:
        """As `scratchformer graph --qk` reads it: 'decoder.1.cross_attn.head0@1,4'."""
        return f"{self.attention}.head{head}@{self.query},{key}"


@dataclass
class QKMade:
    """A split made for the graph `result`, with the replacement model it was read from (the view keeps it for the
    next split of the same graph) and the names of the nodes the split lists."""

    result: object  # the GraphResult split (the view's, or an older one's when a new graph was built meanwhile)
    ask: QKAsk
    replacement: object  # scratchformer.graph.replacement.LocalReplacement
    split: object  # scratchformer.graph.qk.QKSplit
    names: dict[str, str]  # node id → 'decoder layer 1 feature 123 at 2 “सेब”'


def replacement_of(built: Built):
    """The local replacement model the graph was read from, made again (the build lets its copy go to spare the
    memory; this is the capture run and the transcoders again, not the edges): the graph's feature nodes are the only
    features kept, so its nodes are the graph's, in the graph's order, which is checked. A job's work."""
    import torch

    from scratchformer.graph.attribution import make_nodes
    from scratchformer.graph.replacement import LocalReplacement, ffn_side
    from scratchformer.patching.interventions import intervene

    ask, result = built.ask, built.result
    g = result.graph
    keep = {step: torch.zeros(len(result.tokens[ffn_side(step)]), d.W_enc.shape[1], dtype=torch.bool)
            for step, d in built.transcoders.items()}  # step → (T, d_sae) of its side  # fmt: skip
    for node in g.nodes[: g.n_features]:
        keep[node.step][node.position, node.feature] = True
    tgt = ask.inputs.tgt[:, : g.position + 1]  # (1, P + 1): cut after the explained position, as the build cuts it
    with intervene(ask.bundle.model, list(ask.interventions)):  # the run's changed heads, as the build made them
        rep = LocalReplacement(ask.bundle, built.transcoders, ask.inputs.src, tgt, keep=keep)
    again = make_nodes(rep, result.tokens, g.position, g.token)
    if [n.id for n in again] != [n.id for n in g.nodes]:
        raise UserError("The replacement model made again does not have this graph's nodes; press Build to build "
                        "the graph again.")  # fmt: skip
    return rep


def strongest_head(pattern, query: int, key: int | None) -> int:
    """The head that attends most from `query` to `key` (key None: whose largest weight from `query` is the
    largest): pattern (h, Tq, Tk) → a head; 0 when the query is outside the pattern (the split then says so)."""
    if not 0 <= query < pattern.shape[1]:
        return 0
    row = pattern[:, query]  # (h, Tk)
    if key is not None and 0 <= key < row.shape[1]:
        return int(row[:, key].argmax())
    return int(row.max(dim=1).values.argmax())


def qk_split(built: Built, replacement, ask: QKAsk, job) -> QKMade | None:
    """Split the score `ask` names into query-node × key-node products (the work of a job; `replacement`: the one
    kept from an earlier split of this graph, or None to make it again). None once cancelled; a head the core
    refuses (a soft-capped score, QK-norm) raises its UserError sentence."""
    from scratchformer.graph.qk import split_score
    from scratchformer.graph.report import describe

    if replacement is None:
        job.progress("making the replacement model again")
        replacement = replacement_of(built)
    if job.cancelled():
        return None
    job.progress("splitting the score")
    g = built.result.graph
    head = ask.head
    if head is None:
        pattern = replacement.patterns.get(ask.attention)  # (1, h, Tq, Tk), or None (the split names the problem)
        head = strongest_head(pattern[0], ask.query, ask.key) if pattern is not None else 0
    split = split_score(replacement, g, ask.attention, head, ask.query, ask.key, top=QK_TOP)
    ids = {a for a, _, _ in split.pairs} | {b for _, b, _ in split.pairs}
    ids |= {a for a, _ in split.by_query} | {b for _, b in split.by_key}
    names = {n.id: describe(n) for n in g.nodes if n.id in ids}
    return QKMade(built.result, ask, replacement, split, names)
