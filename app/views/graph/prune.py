"""The Graph view's part that prunes and groups the graph built: the Nodes and Edges sliders prune the same graph
again (the full adjacency is kept, so only the pruning is redone, in a job, a moment after a slider stops) and
supernodes are laid out with it. A mixin of GraphView (app/views/graph/view.py): its methods read the view's
`built`, `groups`, `selected`, sliders, prune timer and jobs."""

from __future__ import annotations

from scratchformer.plotdata.graph_layout import Supernode

from .work import Built, relayout


class GraphPruning:
    """The pruning thresholds, pruning again off the UI thread, grouping and ungrouping."""

    def graph_of(self, result) -> tuple | None:
        """(GraphResult, the Nodes slider's threshold, the Edges slider's) of the graph this view built for the run
        `result`, or None: what File › Export › Interactive page… puts into the page."""
        built = self.built
        if built is None or built.ask.run_id != id(result):
            return None
        return built.result, built.threshold, self.edge_threshold()

    def threshold(self) -> float:
        return self.slider.value() / 100

    def set_threshold(self, value: float) -> None:
        """Move the Nodes slider to `value` (0.5 … 1); the graph is pruned again shortly after."""
        self.slider.setValue(round(value * 100))

    def edge_threshold(self) -> float:
        return self.edge_slider.value() / 100

    def set_edge_threshold(self, value: float) -> None:
        """Move the Edges slider to `value` (0.5 … 1); the graph is pruned again shortly after."""
        self.edge_slider.setValue(round(value * 100))

    def _slider_moved(self, value: int) -> None:
        self.threshold_label.setText(f"{value} %")
        if self.built is not None and not self._closing:
            self._prune_timer.start()

    def _edge_slider_moved(self, value: int) -> None:
        self.edge_label.setText(f"{value} %")
        if self.built is not None and not self._closing:
            self._prune_timer.start()  # the same wait: moving both sliders prunes once

    def _prune_now(self) -> None:
        self._relayout(f"Pruning again: the nodes that carry {self.threshold():.0%} of the influence, the edges "
                       f"{self.edge_threshold():.0%}…")  # fmt: skip

    def _relayout(self, text: str) -> None:
        built = self.built
        if built is None or self._closing:
            return
        threshold, edge_threshold, groups = self.threshold(), self.edge_threshold(), list(self.groups)
        self._layout_jobs.start(lambda job: relayout(built, threshold, edge_threshold, groups, job),
                                on_result=self._laid_out, on_error=self._failed,
                                doing="Laying the graph out")  # fmt: skip
        self._working(text)

    def _laid_out(self, built: Built | None) -> None:
        self._idle()
        if built is None or self._closing or self.built is None or built.ask.key() != self.built.ask.key():
            return
        self.built = built
        self._draw(keep_range=True)

    def group_selected(self, name: str) -> bool:
        """Draw the selected nodes as one supernode called `name` (a selected supernode's members join it); False,
        and one sentence, when it cannot be."""
        lay = self.built.layout if self.built is not None else None
        name = name.strip()
        if lay is None:
            return False
        members: list[str] = []
        merged = []
        for nid in sorted(self.selected):
            i = lay.index_of(nid)
            if i is None or lay.kinds[i] == "logit":
                continue
            if lay.kinds[i] == "group":
                merged.append(nid.removeprefix("group:"))
            members += [self.built.result.graph.nodes[j].id for j in lay.members[i]]
        if len(members) < 2:
            self._say("Select two nodes or more first (Ctrl-click them, or Shift-drag a box around them); the logit "
                      "stays on its own.", error=True)  # fmt: skip
            return False
        if not name:
            self._say("A supernode needs a name.", error=True)
            return False
        if any(g.name == name for g in self.groups if g.name not in merged):
            self._say(f"There is a supernode called “{name}” already; give this one another name.", error=True)
            return False
        self.groups = [g for g in self.groups if g.name not in merged] + [Supernode(name, tuple(members))]
        self.selected = {f"group:{name}"}
        self._relayout(f"Grouping {len(members)} nodes into “{name}”…")
        return True

    def ungroup_selected(self) -> None:
        """Draw the selected supernodes' members again (every supernode when none is selected)."""
        names = {nid.removeprefix("group:") for nid in self.selected if nid.startswith("group:")}
        if not self.groups:
            self._say("There is no supernode to ungroup.")
            return
        names = names or {g.name for g in self.groups}
        self.groups = [g for g in self.groups if g.name not in names]
        self.selected -= {f"group:{n}" for n in names}
        self._relayout(f"Ungrouping {', '.join(sorted(names))}…")
