"""The Q·K neuron view: how one query position scores one key position in one head — the query and key
vectors, their elementwise product as bars (its sum is the score), ÷ √d_k, the mask, and where the result lands in
the row's softmax. BertViz draws this for a few BERT-like models; here it works for every attention of every model
that opens (self-, masked self- and cross-attention). Plot data: scratchformer.plotdata.neuron.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from scratchformer.plotdata.neuron import AttentionPick, neuron_heatmaps, neuron_pair, neuron_summary

from ..widgets.heatmap import HeatmapWidget
from .picked_view import PickedView

POSITIVE, NEGATIVE = (33, 102, 172), (178, 24, 43)  # the diverging map's two ends: bars read like the cells


class NeuronView(PickedView):
    title = "Q·K neuron view"
    tooltip = "One query against one key: q, k, their products, the score ÷ √d_k and its place in the softmax"
    explains = "neuron"
    with_key = True
    empty_text = "Run a model with attention to compare a query with a key."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
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
        self.layout_.addWidget(self.body, 1)
        self._show(None)

    @property
    def pair(self):
        return self.value

    def show_pair(self, sublayer: str, head: int, query: int, key: int) -> None:
        """Compare this query and key of this head (the derivation view's button, or any caller)."""
        self.show_pick(sublayer, head, query, key)

    def _choose_key(self, key: int) -> None:
        if self._pick is not None:
            self._key = key
            self.refresh()

    def make(self, trace, pick: AttentionPick, key: int | None):
        """The pair's numbers (off the UI thread); the key the query attends to most when none is chosen yet."""
        if key is None:
            weights = trace[f"{pick.sublayer}.weights"].item(pick.batch)  # (heads, queries, keys)
            key = int(weights[min(pick.head, weights.shape[0] - 1), min(pick.query, weights.shape[1] - 1)].argmax())
        return neuron_pair(trace, pick, key)

    def body_widgets(self) -> list:
        return [self.body]

    def draw(self, pair) -> list:
        maps = neuron_heatmaps(pair)
        vectors, product, scores, weights = maps
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
        return maps

    def headline(self, pair) -> str:
        return (f"{self.where(pair.pick)}: query {pair.pick.query} “{pair.query_label}” against key {pair.key} "
                f"“{pair.key_labels[pair.key]}”")

    def text(self, pair) -> str:
        return neuron_summary(pair)

    def view_title(self) -> str:
        if self.pair is None:
            return self.title
        p = self.pair.pick
        return f"Q·K neuron view: {p.sublayer}, head {p.head + 1}, query {p.query}, key {self.pair.key}"
