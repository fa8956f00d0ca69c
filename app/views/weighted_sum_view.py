"""The weighted sum: one query's output row of one head drawn as what it is made of — every key's value vector,
scaled by the query's weight on that key, summed: head_i = Σ_j a_ij v_j (the self-attention tutorials'
"contextual embedding"). A click on a key opens the Q·K neuron view for that query and key, which shows where its
weight came from. Plot data: scratchformer.plotdata.neuron.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout

from scratchformer.errors import UserError
from scratchformer.plotdata.neuron import (
    AttentionPick,
    WeightedSum,
    weighted_sum,
    weighted_sum_heatmaps,
    weighted_sum_summary,
)

from ..warmup import ReadyFirst
from ..widgets.heatmap import HeatmapWidget
from .attention_pick import PickBar, batch_of, default_pick, pick_steps, preparation, sublayer_title
from .base import View, placeholder


def _sum_or_error(trace, pick: AttentionPick) -> WeightedSum | UserError:
    """The weighted sum's numbers (off the UI thread)."""
    try:
        return weighted_sum(trace, pick)
    except UserError as exc:
        return exc


class WeightedSumView(View):
    title = "Weighted sum"
    tooltip = "A query's output as every key's value vector, scaled by its weight, summed"
    explains = "weighted_sum"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.bar = PickBar(with_key=False)
        self.bar.changed.connect(self._picked)
        layout.addWidget(self.bar)
        self.empty = placeholder("Run a model with attention to see a query's output as a weighted sum.")
        layout.addWidget(self.empty)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.summary)
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
        layout.addWidget(self.splitter, 1)
        self.ws: WeightedSum | None = None
        self._maps: list = []
        self._pick: AttentionPick | None = None
        self._run = None
        self._ready = ReadyFirst(self)
        self._show(None)

    def show_query(self, sublayer: str, head: int, query: int) -> None:
        """Show this query's output row of this head (the derivation view's button, or any caller)."""
        self._pick = AttentionPick(sublayer, self.main.current_batch(), head, query)
        self._run = self.main.current_result()
        self.refresh()

    def _picked(self) -> None:
        self._pick = self.bar.pick()
        self.refresh()

    def _open_pair(self, key: int) -> None:
        view = next((v for v in self.main.views if v.title == "Q·K neuron view"), None)
        if view is None or self.ws is None or key >= len(self.ws.weights):
            return
        p = self.ws.pick
        self.main.tabs.setCurrentWidget(view)
        view.show_pair(p.sublayer, p.head, p.query, key)

    def preparation(self, trace, batch: int) -> list:
        return preparation(trace, self._pick or default_pick(self.main, trace), batch)

    def refresh(self) -> None:
        result, trace = self.main.current_result(), self.main.current_trace()
        if trace is None:
            self._show(None)
            return
        if result is not self._run or self._pick is None:
            self._pick, self._run = default_pick(self.main, trace), result
        if self._pick is None:
            self._show(None)
            return
        self._pick.batch = batch_of(self.main, trace, self._pick.sublayer)
        pick = self._pick
        self._ready.run(pick_steps(trace, pick.sublayer), pick.batch, lambda: _sum_or_error(trace, pick),
                        lambda error, found: self._draw(trace, pick, error, found))

    def _draw(self, trace, pick: AttentionPick, error: str, found) -> None:
        if error or isinstance(found, UserError):
            self.main.show_error(error or str(found))
            self._pick = None if found is not None else self._pick
            return
        if trace is not self.main.current_trace() or pick is not self._pick or found is None:
            return
        self.bar.fill(trace, pick.batch, pick, None)
        self._show(found)

    def _show(self, ws: WeightedSum | None) -> None:
        self.ws = ws
        self.empty.setVisible(ws is None)
        self.splitter.setVisible(ws is not None)
        self.bar.setVisible(ws is not None)
        self.summary.setVisible(ws is not None)
        if ws is None:
            self._maps = []
            return
        self._maps = weighted_sum_heatmaps(ws)
        for w, m in zip((self.values, self.weights, self.summed), self._maps):
            w.set_heatmap(m)
        self.summed.set_highlight([(len(ws.weights), c) for c in range(ws.values.shape[1])])
        p = ws.pick
        head = f"{sublayer_title(p.sublayer)}, head {p.head + 1}: the output of query {p.query} “{ws.query_label}”"
        lines = "<br>".join(html.escape(line) for line in weighted_sum_summary(ws).splitlines())
        self.summary.setText(f"<b>{html.escape(head)}</b><br>{lines}")
        self.main.refresh_explanation()

    def is_busy(self) -> bool:
        return self._ready.busy()

    def shutdown(self) -> None:
        self._ready.shutdown()

    def explain_facts(self) -> dict:
        return {"weighted_sum": weighted_sum_summary(self.ws)} if self.ws is not None else {}

    def current_heatmaps(self) -> list:
        return list(self._maps)

    def view_title(self) -> str:
        if self.ws is None:
            return self.title
        p = self.ws.pick
        return f"Weighted sum: {p.sublayer}, head {p.head + 1}, query {p.query}"
