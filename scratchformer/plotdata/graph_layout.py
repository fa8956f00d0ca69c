"""An attribution graph (scratchformer.graph) as a picture: where each node sits, how each edge is drawn, what each
label says. The window's Graph view and its PNG/SVG/PDF export (app/export/graph_render.py) draw this same object,
so what is exported is what is shown; `graph_payload` is the JSON export, `scratchformer graph --json`'s.

    x   the token position, one column each; an encoder-decoder's source columns on the left, a gap, then the
        decoder's (its input tokens) on the right
    y   the layer: the embeddings at 0, feed-forward layer l at l + 1, the explained logit on top (decoder layers + 1)

The nodes that share a (side, layer, position) cell are packed into a small grid inside it, the most influential
first. A node's marker grows with the square root of its influence on the logit; an edge's width with the square
root of |weight| (a share of the strongest edge drawn), its colour says the sign: red pushes its target up, blue
down (the diverging map's convention: RdBu_r). The drawn edges are the pruned graph's, at most `max_edges` of the
strongest, so a graph of thousands of nodes still draws quickly.

A *supernode* is a group of nodes drawn as one, at the mean of its members' places; its edges are the sums of its
members' drawn (kept) edges to and from each other node, and the edges between its own members are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..graph.attribution import target_name
from ..graph.influence import Pruned
from ..graph.report import describe

MAX_EDGES = 20_000  # edges drawn at most (the strongest by |weight|); the rest are counted
GAP = 1.0  # columns between the encoder's panel and the decoder's
MIN_PANEL = 2  # columns a panel spans at least (room for its title when it has one token)
BOTTOM = -0.8  # a panel's lower edge: its title goes under the embeddings' row
CELL_W, CELL_H = 0.8, 0.55  # the share of a column and of a layer's row that a cell's nodes spread over
# An edge's width (pixels on screen, points in a file) and opacity (of 255) by strength bucket: the weak ones (most of
# a large graph's) 1 pixel wide, told apart by opacity, since a wider line costs Qt several times as much to draw
# (20,000 edges: 20 ms a paint, 70 ms with the weak ones 1 to 2 pixels wide).
WIDTHS = (1.0, 1.0, 1.0, 2.0, 3.0, 4.5)
ALPHAS = (55, 95, 140, 170, 205, 235)
POSITIVE, NEGATIVE = (178, 24, 43), (33, 102, 172)  # RdBu_r's ends: red pushes its target up, blue down
NODE_RGB = {"feature": (230, 126, 34), "error": (150, 150, 150), "embedding": (67, 150, 108),
            "logit": (120, 40, 160), "group": (52, 101, 164)}  # fmt: skip
SYMBOLS = {"feature": "o", "error": "d", "embedding": "s", "logit": "p", "group": "h"}  # pyqtgraph's names
CANDIDATES = 8  # labels tried per label shown, at most (the most influential first)
MIN_SIZE, MAX_SIZE, LOGIT_SIZE = 6.0, 22.0, 20.0  # marker diameters (pixels on screen, points in a file)


@dataclass(frozen=True)
class Supernode:
    """Nodes grouped by hand into one, named: `members` are node ids (stable when the graph is pruned again)."""

    name: str
    members: tuple[str, ...]


@dataclass
class Panel:
    """One side's frame: its title (drawn at its lower left, under the embeddings) and the box its columns and rows
    fill (data units)."""

    title: str
    x0: float
    x1: float
    y0: float
    y1: float


@dataclass
class EdgeBatch:
    """Edges of one colour and width: `xy` holds (source, target) point pairs, (2 × edges, 2) — one line item each."""

    rgba: tuple[int, int, int, int]
    width: float
    xy: np.ndarray


@dataclass
class GraphLayout:
    """What the picture draws (see the module's text). Drawn node i stands for graph nodes `members[i]`."""

    ids: list[str]
    kinds: list[str]  # "embedding" | "feature" | "error" | "logit" | "group"
    labels: list[str]  # short: 'L1 F483', 'L0 err', '“है”', a group's name; '' for embeddings (the axis says them)
    members: list[list[int]]  # indices into graph.nodes
    x: np.ndarray  # (m,)
    y: np.ndarray  # (m,)
    size: np.ndarray  # (m,) marker diameter
    influence: np.ndarray  # (m,) on the logit (a group: its members' sum)
    edge_source: np.ndarray  # (e,) int: drawn node indices
    edge_target: np.ndarray  # (e,)
    edge_weight: np.ndarray  # (e,) the direct effect (a group's: the sum of its members')
    edge_bucket: np.ndarray  # (e,) int: index into WIDTHS and ALPHAS
    edges_kept: int  # edges among the drawn nodes before the cap
    panels: list[Panel]
    columns: list[tuple[float, str]]  # (x, token) for the bottom axis
    rows: list[tuple[float, str]]  # (y, 'embeddings' | 'layer l' | 'logit') for the left axis
    title: str
    subtitle: str
    groups: list[Supernode] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def index_of(self, node_id: str) -> int | None:
        """The drawn node with this id (a group's: 'group:NAME'), or None."""
        return self.ids.index(node_id) if node_id in self.ids else None

    def bounds(self) -> tuple[float, float, float, float]:
        """(x0, x1, y0, y1) around every panel."""
        return (min(p.x0 for p in self.panels), max(p.x1 for p in self.panels),
                min(p.y0 for p in self.panels), max(p.y1 for p in self.panels))  # fmt: skip

    def edge_batches(self) -> list[EdgeBatch]:
        """The edges by colour and width, weakest first (so the strong ones are drawn on top)."""
        out = []
        for b in range(len(WIDTHS)):
            for sign, rgb in ((1, POSITIVE), (-1, NEGATIVE)):
                pick = (self.edge_bucket == b) & ((self.edge_weight >= 0) if sign > 0 else (self.edge_weight < 0))
                if not pick.any():
                    continue
                s, t = self.edge_source[pick], self.edge_target[pick]
                xy = np.empty((2 * len(s), 2), dtype=np.float64)  # (2e, 2): source, target, source, target, …
                xy[0::2, 0], xy[0::2, 1] = self.x[s], self.y[s]
                xy[1::2, 0], xy[1::2, 1] = self.x[t], self.y[t]
                out.append(EdgeBatch((*rgb, ALPHAS[b]), WIDTHS[b], xy))
        return out


def _label(node) -> str:
    if node.kind == "feature":
        return f"L{node.layer} F{node.feature}"
    if node.kind == "error":
        return f"L{node.layer} err"
    if node.kind == "logit":
        return target_name(node)
    return ""


def _cell_offsets(k: int) -> list[tuple[float, float]]:
    """Where k nodes of one cell sit around its centre (data units): a row for a few, a small grid for more, the
    first ones on the top row."""
    cols = k if k <= 5 else math.ceil(math.sqrt(2.5 * k))
    rows = math.ceil(k / cols)
    dx, dy = CELL_W / cols, CELL_H / max(rows, 1)
    out = []
    for j in range(k):
        r, c = divmod(j, cols)
        in_row = min(cols, k - r * cols)  # the last row is centred
        out.append(((c - (in_row - 1) / 2) * dx, ((rows - 1) / 2 - r) * dy))
    return out


def _sizes(influence: np.ndarray, kinds: list[str]) -> np.ndarray:
    """Marker diameters: MIN_SIZE … MAX_SIZE by the square root of influence (of the largest but the logit's)."""
    others = np.array([k != "logit" for k in kinds], dtype=bool)
    top = float(influence[others].max()) if others.any() else 0.0
    rel = np.sqrt(np.clip(influence / top, 0.0, 1.0)) if top > 0 else np.zeros_like(influence)
    size = MIN_SIZE + (MAX_SIZE - MIN_SIZE) * rel
    size[~others] = LOGIT_SIZE
    return np.round(size, 1)


def layout_graph(result, kept: Pruned | None = None, groups: list[Supernode] = (), max_edges: int = MAX_EDGES
                 ) -> GraphLayout:  # fmt: skip
    """The picture of `result` (scratchformer.graph.GraphResult) pruned as `kept` says (default: its own pruning),
    with `groups` drawn as supernodes (see the module's text)."""
    g = result.graph
    kept = result.kept if kept is None else kept
    keep = kept.nodes.numpy() if hasattr(kept.nodes, "numpy") else np.asarray(kept.nodes)
    influence = np.asarray(kept.influence, dtype=np.float64)
    tokens = result.tokens
    n_src = len(tokens["encoder"])
    offset = {"encoder": 0.0, "decoder": (max(n_src, MIN_PANEL) + GAP) if n_src else 0.0}
    # every kept node's place, cell by cell
    cells: dict[tuple[str, int, int], list[int]] = {}
    for i in np.flatnonzero(keep).tolist():
        n = g.nodes[i]
        cells.setdefault((n.side, n.layer, n.position), []).append(i)
    place: dict[int, tuple[float, float]] = {}
    for (side, layer, position), members in cells.items():
        members.sort(key=lambda i: (g.nodes[i].kind == "error", -influence[i]))
        cx, cy = offset[side] + position, layer + 1.0
        for i, (dx, dy) in zip(members, _cell_offsets(len(members))):
            place[i] = (cx + dx, cy + dy)
    # the drawn nodes: kept nodes outside every group, then one per group that still has kept members
    index = {n.id: i for i, n in enumerate(g.nodes)}
    grouped: dict[int, int] = {}  # graph node → its group's number among `live`
    live: list[tuple[Supernode, list[int]]] = []
    for grp in groups:
        mine = [index[m] for m in grp.members if m in index and bool(keep[index[m]]) and index[m] not in grouped
                and index[m] != g.logit_index]  # fmt: skip
        if mine:
            for i in mine:
                grouped[i] = len(live)
            live.append((grp, mine))
    ids, kinds, labels, members, xs, ys, infl = [], [], [], [], [], [], []
    drawn_of = np.full(len(g.nodes), -1, dtype=np.int64)
    for i in sorted(place):
        if i in grouped:
            continue
        n = g.nodes[i]
        drawn_of[i] = len(ids)
        ids.append(n.id)
        kinds.append(n.kind)
        labels.append(_label(n))
        members.append([i])
        xs.append(place[i][0])
        ys.append(place[i][1])
        infl.append(influence[i])
    for grp, mine in live:
        drawn_of[mine] = len(ids)
        ids.append(f"group:{grp.name}")
        kinds.append("group")
        labels.append(grp.name)
        members.append(mine)
        xs.append(float(np.mean([place[i][0] for i in mine])))
        ys.append(float(np.mean([place[i][1] for i in mine])))
        infl.append(float(influence[mine].sum()))
    x, y, infl_a = np.array(xs, dtype=np.float64), np.array(ys, dtype=np.float64), np.array(infl, dtype=np.float64)
    # the kept edges between drawn nodes, a group's summed, the strongest max_edges of them
    # edge s → t; PyTorch's nonzero lets other threads run meanwhile (numpy's held the window's 30 ms and more)
    t_idx, s_idx = (x.numpy() for x in torch.as_tensor(kept.edges).nonzero(as_tuple=True))
    w = torch.as_tensor(g.adjacency)[t_idx, s_idx].numpy()
    dt, ds = drawn_of[t_idx], drawn_of[s_idx]
    ok = (dt >= 0) & (ds >= 0) & (dt != ds)
    dt, ds, w = dt[ok], ds[ok], np.asarray(w, dtype=np.float64)[ok]
    m = len(ids)
    if live and len(w):  # sum the edges that now join the same two drawn nodes
        pairs, inverse = np.unique(dt * m + ds, return_inverse=True)
        w = np.bincount(inverse, weights=w, minlength=len(pairs))
        dt, ds = pairs // m, pairs % m
        nonzero = w != 0
        dt, ds, w = dt[nonzero], ds[nonzero], w[nonzero]
    edges_kept = len(w)
    if len(w) > max_edges:
        top = np.argpartition(-np.abs(w), max_edges - 1)[:max_edges]
        dt, ds, w = dt[top], ds[top], w[top]
    strongest = float(np.abs(w).max()) if len(w) else 1.0
    rel = np.sqrt(np.abs(w) / strongest) if strongest > 0 else np.zeros_like(w)
    bucket = np.minimum((rel * len(WIDTHS)).astype(np.int64), len(WIDTHS) - 1)
    # frames, axes, titles
    n_dec_layers = g.nodes[g.logit_index].layer
    n_enc_layers = max((n.layer + 1 for n in g.nodes if n.side == "encoder" and n.layer >= 0), default=0)
    panels, columns = [], []
    if n_src:
        panels.append(Panel("encoder (source)", -0.5, max(n_src, MIN_PANEL) - 0.5, BOTTOM, n_enc_layers + 0.6))
        columns += [(float(p), t) for p, t in enumerate(tokens["encoder"])]
    dec = tokens["decoder"]
    o = offset["decoder"]
    panels.append(Panel("decoder", o - 0.5, o + max(len(dec), MIN_PANEL) - 0.5,
                        BOTTOM, n_dec_layers + 1.8))  # fmt: skip
    columns += [(o + p, t) for p, t in enumerate(dec)]
    names: dict[float, list[str]] = {0.0: ["embeddings"]}
    for layer in range(max(n_enc_layers, n_dec_layers)):
        names.setdefault(layer + 1.0, []).append(f"layer {layer}")
    names.setdefault(n_dec_layers + 1.0, []).append("logit")
    rows = [(yy, " · ".join(v)) for yy, v in sorted(names.items())]
    logit = g.nodes[g.logit_index]
    title = f"Attribution graph of {target_name(logit)} at decoder position {g.position}"
    subtitle = (f"{int(keep.sum())} of {len(g.nodes)} nodes kept, carrying {100 * kept.kept_influence:.1f} % of the "
                f"influence; {edges_kept} edges" + (f" (the {max_edges} strongest drawn)" if edges_kept > max_edges
                                                     else "") +
                f"; replacement score {result.replacement:.3f}, completeness {result.completeness:.3f}; the logit"
                f"{' difference' if logit.versus is not None else ''} {float(g.real[g.logit_index]):.3f} reads "
                f"“{tokens['decoder'][logit.position]}”")  # fmt: skip
    return GraphLayout(ids, kinds, labels, members, x, y, _sizes(infl_a, kinds), infl_a, ds.astype(np.int64),
                       dt.astype(np.int64), w, bucket, edges_kept, panels, columns, rows, title, subtitle,
                       [grp for grp, _ in live])  # fmt: skip


def label_above(layout: GraphLayout, i: int) -> bool:
    """Whether node i's label goes above its marker (the logit's: nothing is drawn above it) rather than under."""
    return layout.kinds[i] == "logit"


def label_box(layout: GraphLayout, i: int, char_w: float, line_h: float, unit_h: float) -> tuple[float, float, float,
                                                                                               float]:  # fmt: skip
    """(x0, x1, y0, y1) of node i's label in data units: centred under its marker (above, label_above), clear of
    it. char_w: a character's width, line_h: a line's height, unit_h: one pixel (or point) of height."""
    half = (len(layout.labels[i]) + 1) * char_w / 2
    clear = (layout.size[i] / 2 + 2) * unit_h
    x, y = layout.x[i], layout.y[i]
    if label_above(layout, i):
        return x - half, x + half, y + clear, y + clear + line_h
    return x - half, x + half, y - clear - line_h, y - clear


def place_labels(layout: GraphLayout, char_w: float, line_h: float, unit_h: float, limit: int = 60,
                 visible: tuple[float, float, float, float] | None = None) -> list[int]:  # fmt: skip
    """The drawn nodes whose labels fit, most influential first (the logit and groups before all), each label where
    label_box puts it and none overlapping another (the sizes as label_box takes them). `visible` (x0, x1, y0, y1)
    skips nodes outside it. At most `limit` labels, out of the CANDIDATES × limit most influential."""
    shown = np.array([bool(t) for t in layout.labels], dtype=bool)
    if visible is not None:
        x0, x1, y0, y1 = visible
        shown &= (layout.x >= x0) & (layout.x <= x1) & (layout.y >= y0) & (layout.y <= y1)
    first = np.array([k in ("logit", "group") for k in layout.kinds], dtype=bool)
    candidates = np.flatnonzero(shown)
    order = candidates[np.lexsort((-layout.influence[candidates], ~first[candidates]))][: CANDIDATES * limit]
    boxes = np.zeros((0, 4))
    chosen = []
    for i in order.tolist():
        if len(chosen) >= limit:
            break
        box = np.array(label_box(layout, i, char_w, line_h, unit_h))
        if len(boxes) and bool(((boxes[:, 0] < box[1]) & (box[0] < boxes[:, 1]) & (boxes[:, 2] < box[3])
                                & (box[2] < boxes[:, 3])).any()):  # fmt: skip
            continue
        boxes = np.vstack([boxes, box])
        chosen.append(i)
    return chosen


def _number(v: float) -> str:
    return f"{v:+.4g}"


def node_text(result, kept: Pruned, layout: GraphLayout, i: int, top: int = 5) -> str:
    """What hovering drawn node `i` says: what it is, its activation and influence, and its strongest incoming
    contributions (for a node without inputs — an embedding, an error — its strongest outgoing ones), each named
    and marked when pruning left it out."""
    g = result.graph
    a = g.adjacency
    edges = kept.edges
    if layout.kinds[i] == "group":
        mine = layout.members[i]
        lines = [f"Supernode “{layout.labels[i]}”: {len(mine)} nodes, influence {layout.influence[i]:.3f} (their sum)"]
        lines += [f"  {describe(g.nodes[j])}" for j in mine[:8]] + ([f"  … and {len(mine) - 8} more"] if len(mine) > 8
                                                                   else [])  # fmt: skip
        into = [(float(layout.edge_weight[e]), int(layout.edge_source[e])) for e in range(len(layout.edge_weight))
                if layout.edge_target[e] == i]  # fmt: skip
        into.sort(key=lambda x: -abs(x[0]))
        if into:
            lines.append("Strongest incoming edges (sums of the members' kept edges):")
            lines += [f"  {_number(wt)}  from {_drawn_name(result, layout, s)}" for wt, s in into[:top]]
        return "\n".join(lines)
    j = layout.members[i][0]
    node = g.nodes[j]
    head = describe(node)
    facts = []
    if node.kind == "feature":
        facts.append(f"activation {node.activation:.4g}")
    if node.kind == "logit":
        facts.append(f"logit {float(g.real[j]):.4g} (bias {float(g.bias[j]):+.4g})")
    elif node.kind == "feature":
        facts.append(f"pre-activation {float(g.real[j]):.4g} (bias {float(g.bias[j]):+.4g})")
    facts.append(f"influence {float(kept.influence[j]):.3f}")
    if node.kind == "logit":
        reads = result.tokens["decoder"][node.position]
        head += f", predicted at decoder position {node.position} (which reads “{reads}”)"
    lines = [head[0].upper() + head[1:], ", ".join(facts)]
    row = a[j]
    if bool((row != 0).any()):
        src = (row != 0).nonzero().flatten().tolist()
        src.sort(key=lambda s: -abs(float(row[s])))
        lines.append(f"Strongest incoming contributions ({len(src)} in all):")
        for s in src[:top]:
            pruned = "" if bool(edges[j, s]) else "  (pruned)"
            lines.append(f"  {_number(float(row[s]))}  from {describe(g.nodes[s])}{pruned}")
    else:
        col = a[:, j]
        out = (col != 0).nonzero().flatten().tolist()
        out.sort(key=lambda t: -abs(float(col[t])))
        if out:
            lines.append(f"No inputs (an {node.kind} is given); strongest outgoing edges ({len(out)} in all):")
            for t in out[:top]:
                pruned = "" if bool(edges[t, j]) else "  (pruned)"
                lines.append(f"  {_number(float(col[t]))}  into {describe(g.nodes[t])}{pruned}")
    return "\n".join(lines)


def _drawn_name(result, layout: GraphLayout, i: int) -> str:
    if layout.kinds[i] == "group":
        return f"supernode “{layout.labels[i]}”"
    return describe(result.graph.nodes[layout.members[i][0]])


def graph_payload(result, kept: Pruned | None = None, groups: list[Supernode] = ()) -> dict:
    """The JSON export: what `scratchformer graph --json` prints for this graph pruned as `kept` says, plus
    `"supernodes": [{"name", "members"}]` when nodes were grouped by hand."""
    from dataclasses import replace

    payload = (replace(result, kept=kept) if kept is not None else result).to_dict()
    if groups:
        payload["supernodes"] = [{"name": grp.name, "members": list(grp.members)} for grp in groups]
    return payload
