"""The model's output: the top-k next tokens and their probabilities at every target position."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout

from scratchformer.plotdata import Heatmap, abbreviate, top_k_table

from .base import View, placeholder


class OutputView(View):
    title = "Output"
    tooltip = "Top-k next-token probabilities for each target position"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        bar.addWidget(self.caption, 1)
        bar.addWidget(QLabel("k"))
        self.k_spin = QSpinBox()
        self.k_spin.setRange(1, 20)
        self.k_spin.setValue(5)
        self.k_spin.setToolTip("How many candidates to list per position")
        self.k_spin.valueChanged.connect(lambda _v: self.refresh())
        bar.addWidget(self.k_spin)
        layout.addLayout(bar)
        self.empty = placeholder("This model has no decoder, so it predicts no next tokens.")
        layout.addWidget(self.empty)
        self.table = QTableWidget()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(False)
        layout.addWidget(self.table, 1)
        self._map: Heatmap | None = None

    def refresh(self) -> None:
        trace, result = self.main.current_trace(), self.main.current_result()
        step = trace.find("generator.probs") if trace is not None else None
        self.empty.setVisible(step is None)
        self.table.setVisible(step is not None)
        if step is None:
            self._map = None
            self.caption.setText("")
            return
        batch, k = self.main.current_batch(), self.k_spin.value()
        rows = top_k_table(trace, k, batch, result.vocab_labels)
        self._map = self.main.heatmap_for(step, batch, 0)
        self.caption.setText(
            "Row t: having read the decoder input up to and including token t, the model's most likely next "
            "tokens (bar = probability). Presets have random weights, so their guesses are near uniform."
        )
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(2 + k)
        self.table.setHorizontalHeaderLabels(["pos", "after input token"] + [f"#{i + 1}" for i in range(k)])
        top = max((p for r in rows for p in r.probs), default=1.0) or 1.0
        for i, r in enumerate(rows):
            self.table.setItem(i, 0, _item(str(r.position)))
            self.table.setItem(i, 1, _item(abbreviate(r.input_token, 24), r.input_token))
            for j, (tok, tid, p) in enumerate(zip(r.tokens, r.ids, r.probs)):
                item = _item(f"{abbreviate(tok, 14)}   {p:.3g}", f"{tok!r} (id {tid}): p = {p:.6g}")
                shade = int(255 - 120 * (p / top))
                item.setBackground(QColor(shade, 255 - int(60 * (p / top)), 255))
                self.table.setItem(i, 2 + j, item)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def current_heatmaps(self) -> list[Heatmap]:
        return [self._map] if self._map is not None else []

    def view_title(self) -> str:
        return "Output: top-k next tokens"


def _item(text: str, tooltip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setToolTip(tooltip or text)
    item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    return item
