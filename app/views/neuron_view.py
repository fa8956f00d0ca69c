"""The Q·K neuron view: how one query position scores one key position in one head — the query and key
vectors, their elementwise product as bars (its sum is the score), ÷ √d_k, the mask, and where the result lands in
the row's softmax. BertViz draws this for a few BERT-like models; here it works for every attention of every model
that opens (self-, masked self- and cross-attention). Plot data: scratchformer.plotdata.neuron.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from scratchformer.errors import UserError
from scratchformer.plotdata.neuron import AttentionPick, NeuronPair, neuron_heatmaps, neuron_pair, neuron_summary

from ..warmup import ReadyFirst
from ..widgets.heatmap import HeatmapWidget
from .attention_pick import PickBar, batch_of, default_pick, pick_steps, preparation, sublayer_title
from .base import View, placeholder

POSITIVE, NEGATIVE = (33, 102, 172), (178, 24, 43)  # the diverging map's two ends: bars read like the cells


def _pair_or_error(trace, pick: AttentionPick, key: int | None) -> NeuronPair | UserError:
    """The pair's numbers (off the UI thread); the key the query attends to most when none is chosen yet."""
    try:
        if key is None:
            weights = trace[f"{pick.sublayer}.weights"].item(pick.batch)  # (heads, queries, keys)
            key = int(weights[min(pick.head, weights.shape[0] - 1), min(pick.query, weights.shape[1] - 1)].argmax())
        return neuron_pair(trace, pick, key)
    except UserError as exc:
        return exc


class NeuronView(View):
    title = "Q·K neuron view"
    tooltip = "One query against one key: q, k, their products, the score ÷ √d_k and its place in the softmax"
    explains = "neuron"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.bar = PickBar(with_key=True)
        self.bar.changed.connect(self._picked)
        layout.addWidget(self.bar)
        self.empty = placeholder("Run a model with attention to compare a query with a key.")
        layout.addWidget(self.empty)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        body.addWidget(self.summary)
        self.vectors = HeatmapWidget()
        self.connect_heatmap(self.vectors)
        body.addWidget(self.vectors, 3)
        self.bars_title = QLabel()
        font = self.bars_title.font()
        font.setBold(True)
        self.bars_title.setFont(font)
        body.addWidget(self.bars_title)
        self.bars = pg.PlotWidget(background="w")
        self.bars.setMenuEnabled(False)
        self.bars.hideButtons()
        self.bars.setMouseEnabled(x=False, y=False)
        self.bars.getAxis("bottom").setLabel("dimension e of d_k")
        self.bars.getAxis("left").setLabel("q[e]·k[e]")
        self.bars.addItem(pg.InfiniteLine(0, angle=0, pen=pg.mkPen("#888")))
        self.bar_item = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.bars.addItem(self.bar_item)
        body.addWidget(self.bars, 3)
        self.bars.setMinimumHeight(120)
        rows = QHBoxLayout()
        self.scores = HeatmapWidget()
        self.weights = HeatmapWidget()
        for w in (self.scores, self.weights):
            self.connect_heatmap(w)
            w.clicked.connect(lambda _r, c: self._choose_key(c))
            w.setToolTip("Click a key to compare the query with it")
            rows.addWidget(w, 1)
        body.addLayout(rows, 2)
        layout.addWidget(self.body, 1)
        self.pair: NeuronPair | None = None
        self._maps: list = []
        self._pick: AttentionPick | None = None  # what the user asked for (show_pair or the bar)
        self._key: int | None = None
        self._run = None
        self._ready = ReadyFirst(self)
        self._show(None)

    # --- choosing ----------------------------------------------------------------------------------------------

    def show_pair(self, sublayer: str, head: int, query: int, key: int) -> None:
        """Compare this query and key of this head (the derivation view's button, or any caller)."""
        self._pick = AttentionPick(sublayer, self.main.current_batch(), head, query)
        self._key = key
        self._run = self.main.current_result()
        self.refresh()

    def _picked(self) -> None:
        self._pick, self._key = self.bar.pick(), self.bar.chosen_key()
        self.refresh()

    def _choose_key(self, key: int) -> None:
        if self._pick is not None:
            self._key = key
            self.refresh()

    # --- drawing -----------------------------------------------------------------------------------------------

    def preparation(self, trace, batch: int) -> list:
        return preparation(trace, self._pick or default_pick(self.main, trace), batch)

    def refresh(self) -> None:
        result, trace = self.main.current_result(), self.main.current_trace()
        if trace is None:
            self._show(None)
            return
        if result is not self._run or self._pick is None:  # another run: start from the current step
            self._pick, self._key = default_pick(self.main, trace), None  # the key: the strongest
            self._run = result
        if self._pick is None:
            self._show(None)
            return
        self._pick.batch = batch_of(self.main, trace, self._pick.sublayer)
        pick, key = self._pick, self._key
        self._ready.run(pick_steps(trace, pick.sublayer), pick.batch, lambda: _pair_or_error(trace, pick, key),
                        lambda error, found: self._draw(trace, pick, error, found))

    def _draw(self, trace, pick: AttentionPick, error: str, found) -> None:
        if error or isinstance(found, UserError):
            self.main.show_error(error or str(found))
            self._pick = None if found is not None else self._pick
            return
        if trace is not self.main.current_trace() or pick is not self._pick or found is None:
            return
        self._key = found.key
        self.bar.fill(trace, pick.batch, pick, found.key)
        self._show(found)

    def _show(self, pair: NeuronPair | None) -> None:
        self.pair = pair
        self.empty.setVisible(pair is None)
        self.body.setVisible(pair is not None)
        self.bar.setVisible(pair is not None)
        if pair is None:
            self._maps = []
            return
        self._maps = neuron_heatmaps(pair)
        vectors, product, scores, weights = self._maps
        self.vectors.set_heatmap(vectors)
        self.scores.set_heatmap(scores)
        self.weights.set_heatmap(weights)
        for w in (self.scores, self.weights):
            w.set_highlight([(0, pair.key)])
        prod = pair.product
        self.bar_item.setOpts(x=np.arange(len(prod)), height=prod, width=0.8,
                              brushes=[pg.mkBrush(*(POSITIVE if v >= 0 else NEGATIVE)) for v in prod], pen=None)
        self.bars.getPlotItem().enableAutoRange()
        self.bars_title.setText(product.title)
        p = pair.pick
        head = f"{sublayer_title(p.sublayer)}, head {p.head + 1}: query {p.query} “{pair.query_label}” against key " \
               f"{pair.key} “{pair.key_labels[pair.key]}”"  # fmt: skip
        lines = "<br>".join(html.escape(line) for line in neuron_summary(pair).splitlines())
        self.summary.setText(f"<b>{html.escape(head)}</b><br>{lines}")
        self.main.refresh_explanation()

    def is_busy(self) -> bool:
        return self._ready.busy()

    def shutdown(self) -> None:
        self._ready.shutdown()

    def explain_facts(self) -> dict:
        return {"neuron": neuron_summary(self.pair)} if self.pair is not None else {}

    def current_heatmaps(self) -> list:
        return list(self._maps)

    def view_title(self) -> str:
        if self.pair is None:
            return self.title
        p = self.pair.pick
        return f"Q·K neuron view: {p.sublayer}, head {p.head + 1}, query {p.query}, key {self.pair.key}"
