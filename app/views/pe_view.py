"""The positional encoding actually added (position × dimension) and chosen dimensions' curves over position."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QSplitter, QVBoxLayout, QWidget

from scratchformer.plotdata import Heatmap, default_pe_dims, pe_curves, positional_heatmap

from ..widgets.heatmap import HeatmapWidget
from .base import View, placeholder

CURVE_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


def parse_dims(text: str, d_model: int) -> list[int]:
    """'0, 1, 8-11' → [0, 1, 8, 9, 10, 11], keeping only dimensions that exist (at most 8 curves)."""
    dims: list[int] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            continue
        dims.extend(d for d in range(a, b + 1) if 0 <= d < d_model and d not in dims)
    return dims[:8]


class PositionalView(View):
    title = "Positional encoding"
    tooltip = "The sinusoidal position signal added to the embeddings"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Sequence"))
        self.side = QComboBox()
        self.side.addItem("Source (encoder)", "src_embed")
        self.side.addItem("Target (decoder)", "tgt_embed")
        self.side.setToolTip("Whose positional encoding to show")
        bar.addWidget(self.side)
        bar.addSpacing(16)
        bar.addWidget(QLabel("Dimensions"))
        self.dims_edit = QLineEdit()
        self.dims_edit.setPlaceholderText("e.g. 0, 1, 4-7")
        self.dims_edit.setToolTip("Dimensions to plot over position: numbers and ranges, at most 8")
        self.dims_edit.setMaximumWidth(220)
        bar.addWidget(self.dims_edit)
        bar.addStretch(1)
        layout.addLayout(bar)
        self.empty = placeholder("This model adds no positional encoding that can be shown.")
        layout.addWidget(self.empty)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.heatmap = HeatmapWidget()
        self.connect_heatmap(self.heatmap)
        self.splitter.addWidget(self.heatmap)
        curves_host = QWidget()
        cl = QVBoxLayout(curves_host)
        cl.setContentsMargins(0, 0, 0, 0)
        self.curves_title = QLabel()
        font = self.curves_title.font()
        font.setBold(True)
        self.curves_title.setFont(font)
        cl.addWidget(self.curves_title)
        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setLabel("bottom", "position")
        self.plot.setLabel("left", "PE value")
        self.legend = self.plot.addLegend(offset=(-10, 10))
        cl.addWidget(self.plot, 1)
        self.splitter.addWidget(curves_host)
        self.splitter.setSizes([500, 350])
        layout.addWidget(self.splitter, 1)
        self.side.currentIndexChanged.connect(lambda _i: self._user_changed())
        self.dims_edit.editingFinished.connect(self._user_changed)
        self._map: Heatmap | None = None
        self._user_side = False
        self._d_model = 0

    def _user_changed(self) -> None:
        self._user_side = True
        self.refresh()

    def refresh(self) -> None:
        trace = self.main.current_trace()
        result = self.main.current_result()
        if trace is None:
            return
        step = self.main.current_step()
        if not self._user_side and step is not None and step.stack in ("tgt_embed", "decoder", "generator"):
            self.side.blockSignals(True)
            self.side.setCurrentIndex(1)
            self.side.blockSignals(False)
        stack = self.side.currentData()
        if trace.find(f"{stack}.positional_encoding") is None:
            other = "tgt_embed" if stack == "src_embed" else "src_embed"
            stack = other if trace.find(f"{other}.positional_encoding") is not None else stack
        hm = positional_heatmap(trace, stack)
        self.empty.setVisible(hm is None)
        self.splitter.setVisible(hm is not None)
        self._map = hm
        if hm is None:
            return
        self.heatmap.set_heatmap(hm)
        config = result.bundle.config
        pe = trace[f"{stack}.positional_encoding"].tensor.numpy()
        if config.d_model != self._d_model:
            self._d_model = config.d_model
            self.dims_edit.setText(", ".join(map(str, default_pe_dims(config.d_model))))
        dims = parse_dims(self.dims_edit.text(), pe.shape[1]) or default_pe_dims(pe.shape[1])
        self.plot.clear()
        self.legend.clear()
        for i, c in enumerate(pe_curves(pe, dims, config.positional)):
            colour = CURVE_COLOURS[i % len(CURVE_COLOURS)]
            self.plot.plot(c.x, c.y, pen=pg.mkPen(colour, width=2), name=c.label)
            self.plot.plot(c.x_points, c.y_points, pen=None, symbol="o", symbolSize=6, symbolBrush=colour,
                           symbolPen=None)
        self.curves_title.setText(
            f"Chosen dimensions over position (lines: the formula; dots: the {pe.shape[0]} values added)"
        )

    def current_heatmaps(self) -> list[Heatmap]:
        return [self._map] if self._map is not None else []

    def view_title(self) -> str:
        return self._map.title if self._map is not None else "Positional encoding"
