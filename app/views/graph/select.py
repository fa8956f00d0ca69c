"""The Graph view's part that draws the layout built and answers the mouse: the status sentence of what is drawn,
hover texts, the selection of drawn nodes (click, Ctrl-click, a band) and of one edge (a click on it). A mixin of
GraphView (app/views/graph/view.py): its methods read the view's `built`, `selected`, `edge`, plot and details."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QToolTip

from scratchformer.graph.attribution import target_name
from scratchformer.plotdata.graph_layout import node_text

HINT = ("Hover a node for its numbers; click a feature for its card and its step; Ctrl-click or Shift-drag to select "
        "nodes, then Group… makes them one supernode.")  # fmt: skip


class GraphSelection:
    """Drawing the layout, hovering and selecting its nodes."""

    def _draw(self, keep_range: bool) -> None:
        built = self.built
        lay = built.layout
        self._hover = -1
        self.plot.draw(lay, keep_range)
        self.plot.select({i for i, nid in enumerate(lay.ids) if nid in self.selected})
        self.selected = {lay.ids[i] for i in self.plot.selected}
        k = self._edge_index()  # the edge picked, if pruning kept it
        self.edge = self.edge if k >= 0 else None
        self.plot.pick_edge(k)
        g = built.result.graph
        kept = int(built.kept.nodes.sum())
        n_feat = sum(1 for k in lay.kinds if k == "feature")
        capped = f" (the {len(lay.edge_weight)} strongest drawn)" if lay.edges_kept > len(lay.edge_weight) else ""
        groups = f"; {len(lay.groups)} supernode{'s' if len(lay.groups) != 1 else ''}" if lay.groups else ""
        notes = " ".join(f"Note: {n}" for n in built.result.notes)
        logit = g.nodes[g.logit_index]
        what = f"The logit of “{g.token}”" if logit.versus is None else f"The logit difference {target_name(logit)}"
        self._say(f"{what} at decoder position {g.position}: {kept} of {len(g.nodes)} nodes kept "
                  f"({n_feat} features drawn) carrying {100 * built.kept.kept_influence:.1f} % of the influence, "
                  f"{lay.edges_kept} of {built.all_edges} edges kept{capped}{groups}; replacement score "
                  f"{built.result.replacement:.3f}, completeness {built.result.completeness:.3f}; built in "
                  f"{built.result.seconds:.2f} s. "
                  f"{notes}".strip())  # fmt: skip
        self._show_details()
        self._set_enabled()
        self.main.refresh_explanation()

    def describe(self, i: int) -> str:
        """What hovering drawn node i says (scratchformer.plotdata.graph_layout.node_text)."""
        b = self.built
        return node_text(b.result, b.kept, b.layout, i)

    def _hovered(self, i: int) -> None:
        """A node's text in a tooltip by the mouse, its first line in the inspector's hover line."""
        if self.built is None or i == self._hover:
            return
        self._hover = i
        if i < 0:
            QToolTip.hideText()
            return
        self.hover_text = self.describe(i)
        QToolTip.showText(QCursor.pos(), self.hover_text, self.plot)
        self.main.show_hover(self.hover_text.splitlines()[0])

    def _show_details(self) -> None:
        """The selected edge's text, or the selected node's (one selected), or how many are selected, or the hint."""
        k = self._edge_index()
        if k >= 0:
            self.details.setText(self._edge_text(k))
            return
        lay = self.built.layout if self.built is not None else None
        chosen = [lay.index_of(nid) for nid in sorted(self.selected)] if lay is not None else []
        chosen = [i for i in chosen if i is not None]
        if len(chosen) == 1:
            self.details.setText(self.describe(chosen[0]))
        elif chosen:
            self.details.setText(f"{len(chosen)} nodes selected: Group… draws them as one supernode.")
        else:
            self.details.setText(HINT)

    def select(self, nodes: list[int], add: bool = False, toggle: bool = False) -> None:
        """Select drawn nodes (layout indices): instead of the selection, or added to it, or toggled in it."""
        lay = self.built.layout if self.built is not None else None
        if lay is None:
            return
        ids = {lay.ids[i] for i in nodes if 0 <= i < len(lay)}
        self.selected = (self.selected ^ ids) if toggle else (self.selected | ids) if add else ids
        self.edge = None
        self.plot.pick_edge(-1)
        self.plot.select({i for i, nid in enumerate(lay.ids) if nid in self.selected})
        self._show_details()
        self._set_enabled()

    def _clicked(self, i: int, ctrl: bool) -> None:
        if self.built is None:
            return
        if i < 0:
            if not ctrl:
                self.select([])
            return
        self.select([i], toggle=ctrl)

    def _banded(self, nodes: list[int], add: bool) -> None:
        if self.built is not None:
            self.select(nodes, add=add)

    def selected_node(self):
        """The one graph node selected (scratchformer.graph.attribution.Node), or None."""
        lay = self.built.layout if self.built is not None else None
        if lay is None or len(self.selected) != 1:
            return None
        i = lay.index_of(next(iter(self.selected)))
        if i is None or lay.kinds[i] == "group":
            return None
        return self.built.result.graph.nodes[lay.members[i][0]]

    # --- one edge -----------------------------------------------------------------------------------------------------

    def _edge_clicked(self, k: int) -> None:
        """Edge k of the layout picked (a click on it, beside every node): the node selection goes."""
        lay = self.built.layout if self.built is not None else None
        if lay is None or not 0 <= k < len(lay.edge_source):
            return
        self.selected = set()
        self.plot.select(set())
        self.edge = (lay.ids[int(lay.edge_source[k])], lay.ids[int(lay.edge_target[k])])
        self.plot.pick_edge(k)
        self._show_details()
        self._set_enabled()

    def _edge_index(self) -> int:
        """The drawn edge between the ends of `edge` (ids of drawn nodes), or -1."""
        lay = self.built.layout if self.built is not None else None
        if lay is None or self.edge is None:
            return -1
        s, t = lay.index_of(self.edge[0]), lay.index_of(self.edge[1])
        if s is None or t is None:
            return -1
        hit = np.flatnonzero((lay.edge_source == s) & (lay.edge_target == t))
        return int(hit[0]) if len(hit) else -1

    def selected_edge_nodes(self):
        """(source, target) graph nodes of the edge picked when both its ends are single nodes, else None."""
        lay = self.built.layout if self.built is not None else None
        if lay is None or self._edge_index() < 0:
            return None
        ends = [lay.index_of(nid) for nid in self.edge]
        if any(lay.kinds[i] == "group" for i in ends):
            return None
        nodes = self.built.result.graph.nodes
        return nodes[lay.members[ends[0]][0]], nodes[lay.members[ends[1]][0]]

    def _edge_text(self, k: int) -> str:
        lay = self.built.layout
        s, t = int(lay.edge_source[k]), int(lay.edge_target[k])
        first = lambda i: self.describe(i).splitlines()[0]  # noqa: E731
        text = f"Edge {first(s)} → {first(t)}: weight {float(lay.edge_weight[k]):+.4g}, its direct effect."
        ends = self.selected_edge_nodes()
        if ends is not None and (ends[0].side, ends[0].position) != (ends[1].side, ends[1].position):
            text += " It crosses positions, so attention carried it: Why attention? splits a head's score there."
        elif ends is not None:
            text += " It stays at one position: the residual stream carried it, not attention."
        return text
