"""Every head of an attention sublayer side by side (shared colour levels); click one to enlarge it."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from scratchformer.plotdata import Heatmap, heads_grid

from ..widgets.heatmap import HeatmapWidget
from .base import View, placeholder


def heads_step(trace, step):
    """The step whose heads to show: the current one if it has heads, else its sublayer's attention weights,
    else the nearest attention weights before it (or the first in the model)."""
    if step is None:
        return None
    if "head" in step.dims:
        return step
    if step.attention_type:
        found = trace.find(f"{step.sublayer}.weights")
        if found is not None:
            return found
    weights = trace.attention_steps()
    before = [s for s in weights if s.index <= step.index]
    return before[-1] if before else (weights[0] if weights else None)


class HeadsView(View):
    title = "Heads"
    tooltip = "All heads of the attention sublayer; click a head to enlarge it"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.empty = placeholder("Run a model with attention to see its heads.")
        layout.addWidget(self.empty)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(4)
        self.splitter.addWidget(self.grid_host)
        self.large = HeatmapWidget()
        self.connect_heatmap(self.large)
        self.splitter.addWidget(self.large)
        self.splitter.setSizes([480, 520])
        layout.addWidget(self.splitter, 1)
        self.thumbs: list[HeatmapWidget] = []
        self._maps: list[Heatmap] = []
        self._step = None

    def _ensure_thumbs(self, n: int) -> None:
        if len(self.thumbs) == n:
            return
        for t in self.thumbs:
            self.grid.removeWidget(t)
            t.deleteLater()
        self.thumbs = []
        cols = max(1, math.ceil(math.sqrt(n)))
        for h in range(n):
            w = HeatmapWidget(compact=True, ticks=False, colorbar=False, square=True)
            w.setToolTip(f"Head {h + 1}: click to enlarge")
            w.clicked.connect(lambda _r, _c, h=h: self.main.set_head(h))
            w.hovered.connect(self.main.show_hover)
            w.export_requested.connect(self.main.request_export)
            self.grid.addWidget(w, h // cols, h % cols)
            self.thumbs.append(w)

    def refresh(self) -> None:
        trace = self.main.current_trace()
        step = heads_step(trace, self.main.current_step()) if trace is not None else None
        self.empty.setVisible(step is None)
        self.splitter.setVisible(step is not None)
        if step is None:
            self.caption.setText("")
            self._maps = []
            return
        batch, head = self.main.current_batch(), self.main.current_head()
        if step is not self._step or not self._maps or self._batch != batch:
            self._maps = heads_grid(trace, step, batch)
            self._step, self._batch = step, batch
            self._ensure_thumbs(len(self._maps))
            for w, m in zip(self.thumbs, self._maps):
                w.set_heatmap(m)
        head = min(head, len(self._maps) - 1)
        for h, w in enumerate(self.thumbs):
            w.setStyleSheet("border: 2px solid #d62728;" if h == head else "")
            w.title_label.setStyleSheet("color: #d62728;" if h == head else "")
        large = self.main.heatmap_for(step, batch, head)
        large.levels = self._maps[head].levels  # the same scale as the thumbnails
        self.large.set_heatmap(large)
        note = "" if step is self.main.current_step() else "  (nearest attention step to the current one)"
        self.caption.setText(f"{step.title} — {step.name}, {len(self._maps)} heads, shared colour scale{note}")

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._maps)

    def view_title(self) -> str:
        return f"All heads: {self._step.name}" if self._step is not None else "Heads"
