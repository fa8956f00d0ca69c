"""The comparison bar's Parameters…: a small table of the state_dict entries in which models A and B differ — by
value (the largest |A − B| and the relative difference), by shape, or present in one model only — largest first,
with how many are equal bit for bit. Rows: scratchformer.plotdata.diff.parameter_rows; the same entries close the
bar's Save CSV….
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from scratchformer.plotdata.diff import parameter_rows

COLUMNS = ("parameter", "shape A", "shape B", "max |A − B|", "relative", "")


def parameter_summary(diff) -> str:
    """'3 of 40 parameters differ' (or 'all 40 parameters are equal')."""
    n, equal = len(diff.parameters), diff.equal_parameters
    if not n:
        return f"all {equal} parameters are equal"
    return f"{n} of {n + equal} parameters differ"


def _number(x: float | None) -> QTableWidgetItem:
    item = QTableWidgetItem("" if x is None else f"{x:.4g}")
    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if x is not None:
        item.setData(Qt.ItemDataRole.UserRole, float(x))
    return item


class ParameterDiffDialog(QDialog):
    def __init__(self, parent, diff) -> None:
        super().__init__(parent)
        self.setObjectName("parameterDiffDialog")
        self.setWindowTitle(f"Parameters: {diff.model_a} vs {diff.model_b}")
        layout = QVBoxLayout(self)
        self.rows = parameter_rows(diff)
        note = QLabel(f"A = {html.escape(diff.model_a)}, B = {html.escape(diff.model_b)}: "
                      f"{parameter_summary(diff)} (matched by state_dict name; equal means bit for bit). "
                      "Largest difference first; the relative one is max |A − B| over the larger of the two "
                      "tensors' largest magnitudes.")  # fmt: skip
        note.setWordWrap(True)
        layout.addWidget(note)
        self.table = QTableWidget(len(self.rows), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        for r, row in enumerate(self.rows):
            for c, item in enumerate((QTableWidgetItem(row.name), QTableWidgetItem(row.shape_a),
                                      QTableWidgetItem(row.shape_b), _number(row.max_abs_diff),
                                      _number(row.relative_diff), QTableWidgetItem(row.what))):  # fmt: skip
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(720, 420)
