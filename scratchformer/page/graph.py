"""The attribution graph a page carries (scratchformer.graph): the picture the window's Graph view draws
(plotdata.graph_layout), with every drawn node's hover text, and which nodes and edges each position of the page's
threshold slider keeps — so a student who receives the file can hover the graph and prune it without the model.

The layout is made once, at the widest threshold the slider offers, so nodes keep their places as the slider
moves; each threshold's pruning is the core's own (graph.influence.prune) at that node threshold and the graph's
edge threshold (the Graph view's, 0.98 by default), written as lists of drawn indices.
"""

from __future__ import annotations

from ..graph.influence import EDGE_THRESHOLD, prune
from ..plotdata.graph_layout import ALPHAS, NEGATIVE, NODE_RGB, POSITIVE, WIDTHS, layout_graph, node_text

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # the slider's node thresholds (shares of the influence)
MAX_NODES = 400  # drawn nodes a page carries at most (the most influential at the widest threshold)


def _r(v: float, digits: int = 3) -> float:
    return round(float(v), digits)


def page_graph(result, default: float = 0.8, edge_threshold: float = EDGE_THRESHOLD) -> dict:
    """The index's "graph" entry for a GraphResult (scratchformer.graph.build_graph): nodes (x, y, size, kind,
    label, hover text), edges (source, target, weight, width bucket), the axes and panels, and per threshold the
    drawn nodes and edges it keeps; the page opens at the slider's threshold nearest `default`, and every level
    keeps the edges that carry `edge_threshold` of the influence (the Graph view's Edges slider)."""
    g = result.graph
    widest = prune(g, max(THRESHOLDS), edge_threshold)
    notes = []
    kept = widest.nodes.clone()
    if int(kept.sum()) > MAX_NODES:  # the most influential, the logit and every embedding stay
        order = widest.influence.argsort(descending=True).tolist()
        always = {i for i, n in enumerate(g.nodes) if n.kind in ("logit", "embedding")}
        chosen = set(always) | set([i for i in order if bool(kept[i]) and i not in always][: MAX_NODES - len(always)])
        kept[:] = False
        kept[list(chosen)] = True
        notes.append(f"The page carries the {MAX_NODES} most influential of the {int(widest.nodes.sum())} nodes "
                     f"kept at {max(THRESHOLDS):.0%}.")  # fmt: skip
    widest.nodes, widest.edges = kept, widest.edges & kept[:, None] & kept[None, :]
    layout = layout_graph(result, widest)
    drawn = [m[0] for m in layout.members]  # drawn index → graph node
    where = {j: i for i, j in enumerate(drawn)}
    edges = list(zip(layout.edge_source.tolist(), layout.edge_target.tolist()))
    levels = []
    for t in THRESHOLDS:
        p = prune(g, t, edge_threshold)
        nodes = [i for i, j in enumerate(drawn) if bool(p.nodes[j])]
        mine = [k for k, (s, d) in enumerate(edges) if bool(p.edges[drawn[d], drawn[s]])]
        levels.append({"threshold": t, "nodes": nodes, "edges": mine, "kept_influence": _r(p.kept_influence)})
    logit = next(i for i, n in enumerate(g.nodes) if n.kind == "logit")
    return {
        "title": layout.title, "subtitle": layout.subtitle,
        "nodes": [{"id": g.nodes[drawn[i]].id, "x": _r(layout.x[i]), "y": _r(layout.y[i]),
                   "size": _r(layout.size[i], 1), "kind": layout.kinds[i], "label": layout.labels[i],
                   "influence": _r(layout.influence[i], 4), "text": node_text(result, widest, layout, i)}
                  for i in range(len(drawn))],
        "edges": [[s, d, _r(w, 4), int(b)] for (s, d), w, b in zip(edges, layout.edge_weight.tolist(),
                                                                   layout.edge_bucket.tolist())],
        "levels": levels, "edge_threshold": _r(edge_threshold),
        "default": min(range(len(THRESHOLDS)), key=lambda k: abs(THRESHOLDS[k] - default)),
        "logit": where[logit], "total": len(g.nodes),
        "columns": [[_r(x), t] for x, t in layout.columns], "rows": [[_r(y), t] for y, t in layout.rows],
        "panels": [{"title": p.title, "x0": _r(p.x0), "x1": _r(p.x1), "y0": _r(p.y0), "y1": _r(p.y1)}
                   for p in layout.panels],
        "scores": {"replacement": _r(result.replacement, 4), "completeness": _r(result.completeness, 4)},
        "style": {"nodes": {k: list(v) for k, v in NODE_RGB.items()}, "positive": list(POSITIVE),
                  "negative": list(NEGATIVE), "widths": list(WIDTHS), "alphas": list(ALPHAS)},
        "notes": notes + list(result.notes),
    }  # fmt: skip
