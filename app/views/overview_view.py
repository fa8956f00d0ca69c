"""All layers × heads of each attention type as thumbnail mosaics; a click goes to that layer's step and head.

Each type is one image (plotdata.overview_mosaic), not one plot per head: the paper model's 3 × 6 × 8 = 144
maps at 512 tokens draw as three block-averaged images.
"""

from __future__ import annotations

from PySide6.QtWidgets import QBoxLayout, QLabel, QVBoxLayout

from scratchformer.plotdata import Heatmap, attention_types, overview_cell, overview_mosaic, overview_tick_positions

from ..widgets.heatmap import HeatmapWidget
from .base import View, placeholder

TILE = 48  # cells per thumbnail side at most (longer sequences are block-averaged)


class OverviewView(View):
    title = "Overview"
    tooltip = "Every layer and head at a glance; click a thumbnail to go there"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        hint = QLabel("Rows are layers, columns are heads; each thumbnail is one head's attention weights "
                      "(queries down, keys across). Click one to step there.")
        hint.setWordWrap(True)
        layout.addWidget(hint)
        self.empty = placeholder("Run a model with attention to see the overview.")
        layout.addWidget(self.empty)
        self.row = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        layout.addLayout(self.row, 1)
        self.widgets: dict[str, HeatmapWidget] = {}
        self._maps: dict[str, Heatmap] = {}
        self._key = None

    def _widget(self, kind: str) -> HeatmapWidget:
        w = self.widgets.get(kind)
        if w is None:
            w = HeatmapWidget(compact=True, square=True)
            w.clicked.connect(lambda r, c, k=kind: self._clicked(k, r, c))
            w.hovered.connect(self.main.show_hover)
            w.export_requested.connect(self.main.request_export)
            w.describe = lambda r, c, k=kind: self._describe(k, r, c)
            self.row.addWidget(w, 1)
            self.widgets[kind] = w
        return w

    def _describe(self, kind: str, row: int, col: int) -> str:
        mosaic = self._maps.get(kind)
        cell = overview_cell(mosaic, row, col) if mosaic is not None else None
        if cell is None:
            return ""
        li, head = cell
        return f"{mosaic.title.split(':')[0]}, layer {mosaic.extra['layers'][li] + 1}, head {head + 1}: click to open"

    def _clicked(self, kind: str, row: int, col: int) -> None:
        mosaic = self._maps.get(kind)
        cell = overview_cell(mosaic, row, col) if mosaic is not None and row >= 0 else None
        if cell is not None:
            li, head = cell
            self.main.go_to_step(mosaic.extra["steps"][li], head=head)

    def refresh(self) -> None:
        trace = self.main.current_trace()
        batch = self.main.current_batch()
        kinds = attention_types(trace) if trace is not None else []
        self.empty.setVisible(not kinds)
        key = (id(trace), batch)
        if key != self._key:
            self._key = key
            self._maps = {}
            for kind in kinds:
                mosaic = overview_mosaic(trace, kind, batch, TILE)
                if mosaic is not None:
                    self._maps[kind] = mosaic
            # Few layers and many heads make wide mosaics: stack them so each gets the full width.
            wide = any(m.shape[1] > 1.5 * m.shape[0] for m in self._maps.values())
            self.row.setDirection(QBoxLayout.Direction.TopToBottom if wide else QBoxLayout.Direction.LeftToRight)
            for kind, w in self.widgets.items():
                w.setVisible(kind in self._maps)
            for kind, mosaic in self._maps.items():
                w = self._widget(kind)
                w.setVisible(True)
                rows, cols = overview_tick_positions(mosaic)
                w.custom_ticks = (list(zip(rows, mosaic.row_labels)), [(c, f"H{i + 1}") for i, c in enumerate(cols)])
                w.set_heatmap(mosaic)
        step = self.main.current_step()
        for kind, w in self.widgets.items():
            here = step is not None and step.attention_type == kind
            w.title_label.setStyleSheet("color: #d62728;" if here else "")

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._maps.values())

    def view_title(self) -> str:
        return "Attention overview: layers × heads"
