"""The weighted sum: one query's output row of one head drawn as what it is made of — every key's value vector,
scaled by the query's weight on that key, summed: head_i = Σ_j a_ij v_j (the self-attention tutorials'
"contextual embedding"). A click on a key opens the Q·K neuron view for that query and key, which shows where its
weight came from. Plot data: scratchformer.plotdata.neuron.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter

from scratchformer.plotdata.neuron import weighted_sum, weighted_sum_heatmaps, weighted_sum_summary

from ..widgets.heatmap import HeatmapWidget
from .picked_view import PickedView


class WeightedSumView(PickedView):
    title = "Weighted sum"
    tooltip = "A query's output as every key's value vector, scaled by its weight, summed"
    explains = "weighted_sum"
    empty_text = "Run a model with attention to see a query's output as a weighted sum."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.values = HeatmapWidget()
        self.weights = HeatmapWidget(colorbar=False)
        self.summed = HeatmapWidget()
        for w in (self.weights, self.values, self.summed):  # the weights first: they say how much of each row
            self.connect_heatmap(w)
            self.splitter.addWidget(w)
        for w in (self.values, self.weights):
            w.clicked.connect(lambda r, _c: self._open_pair(r))
            w.setToolTip("Click a key to see in the Q·K neuron view how its weight was made")
        self.splitter.setSizes([130, 380, 420])
        self.layout_.addWidget(self.splitter, 1)
        self._show(None)

    @property
    def ws(self):
        return self.value

    def show_query(self, sublayer: str, head: int, query: int) -> None:
        """Show this query's output row of this head (the derivation view's button, or any caller)."""
        self.show_pick(sublayer, head, query)

    def _open_pair(self, key: int) -> None:
        view = next((v for v in self.main.views if v.title == "Q·K neuron view"), None)
        if view is None or self.ws is None or key >= len(self.ws.weights):
            return
        p = self.ws.pick
        self.main.tabs.setCurrentWidget(view)
        view.show_pair(p.sublayer, p.head, p.query, key)

    def make(self, trace, pick, key):
        return weighted_sum(trace, pick)

    def body_widgets(self) -> list:
        return [self.splitter]

    def draw(self, ws) -> list:
        maps = weighted_sum_heatmaps(ws)  # values, weights, the scaled rows with their sum
        for w, m in zip((self.values, self.weights, self.summed), maps):
            w.set_heatmap(m)
        self.summed.set_highlight([(len(ws.weights), c) for c in range(ws.values.shape[1])])
        return maps

    def headline(self, ws) -> str:
        return f"{self.where(ws.pick)}: the output of query {ws.pick.query} “{ws.query_label}”"

    def text(self, ws) -> str:
        return weighted_sum_summary(ws)

    def view_title(self) -> str:
        if self.ws is None:
            return self.title
        p = self.ws.pick
        return f"Weighted sum: {p.sublayer}, head {p.head + 1}, query {p.query}"
