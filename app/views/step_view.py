"""The current step's tensor as a heatmap, with batch item and head selectors for rank-3 and rank-4 tensors."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout

from scratchformer.plotdata import Heatmap

from ..widgets.heatmap import HeatmapWidget
from .base import View


class StepView(View):
    title = "Step"
    tooltip = "The tensor of the current step, one batch item and head at a time"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.batch_label = QLabel("Batch item")
        self.batch_spin = QSpinBox()
        self.batch_spin.setToolTip("Which sentence (window) of the batch to show")
        self.head_label = QLabel("Head")
        self.head_spin = QSpinBox()
        self.head_spin.setToolTip("Which attention head to show")
        self.shape_label = QLabel()
        self.shape_label.setStyleSheet("color: #555;")
        for w in (self.batch_label, self.batch_spin, self.head_label, self.head_spin):
            bar.addWidget(w)
        bar.addSpacing(12)
        bar.addWidget(self.shape_label, 1)
        layout.addLayout(bar)
        self.heatmap = HeatmapWidget()
        self.connect_heatmap(self.heatmap)
        layout.addWidget(self.heatmap, 1)
        self.batch_spin.valueChanged.connect(lambda v: self.main.set_batch(v - 1))
        self.head_spin.valueChanged.connect(lambda v: self.main.set_head(v - 1))
        self._shown: Heatmap | None = None

    def refresh(self) -> None:
        step = self.main.current_step()
        if step is None:
            self.heatmap.set_heatmap(None)
            self.shape_label.setText("")
            return
        batch, head = self.main.current_batch(), self.main.current_head()
        has_batch = "batch" in step.dims
        has_head = "head" in step.dims
        n_batch = step.shape[step.dims.index("batch")] if has_batch else 1
        n_head = step.shape[step.dims.index("head")] if has_head else 1
        for label, spin, on, n, value in (
            (self.batch_label, self.batch_spin, has_batch and n_batch > 1, n_batch, batch),
            (self.head_label, self.head_spin, has_head, n_head, head),
        ):
            spin.blockSignals(True)
            spin.setRange(1, max(1, n))
            spin.setValue(min(value, n - 1) + 1)
            spin.blockSignals(False)
            spin.setVisible(on)
            label.setVisible(on)
        self.shape_label.setText(step.shape_text())
        previous = self._shown
        self._shown = self.main.heatmap_for(step, batch, head)
        same_place = previous is not None and previous.shape == self._shown.shape
        self.heatmap.set_heatmap(self._shown, reset_view=not same_place)

    def current_heatmaps(self) -> list[Heatmap]:
        return [self._shown] if self._shown is not None else []

    def view_title(self) -> str:
        return self._shown.title if self._shown is not None else "Step"
