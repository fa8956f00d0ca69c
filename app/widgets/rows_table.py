"""A read-only table of many rows that costs the UI thread nothing per cell.

QTableWidget makes one QTableWidgetItem per cell on the UI thread, and sizing its columns to their contents
measures every cell: 512 positions × 7 columns took about half a second. Here the rows are plain tuples (made
off the UI thread if the caller likes), the view asks only for the cells it paints, and columns are sized from
the first rows alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

SIZED_ROWS = 64  # columns fit the text of this many rows (Qt would otherwise measure up to 1000)


@dataclass(frozen=True)
class Cell:
    text: str
    tooltip: str = ""
    background: tuple[int, int, int] | None = None  # RGB


class RowsModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.headers: list[str] = []
        self.rows: list[list[Cell]] = []

    def set_rows(self, headers: list[str], rows: list[list[Cell]]) -> None:
        self.beginResetModel()
        self.headers, self.rows = list(headers), rows
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802, B008 (Qt names and signature)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.headers)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        if index.column() >= len(row):
            return None
        cell = row[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return cell.text
        if role == Qt.ItemDataRole.ToolTipRole:
            return cell.tooltip or cell.text
        if role == Qt.ItemDataRole.BackgroundRole and cell.background is not None:
            return QColor(*cell.background)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.headers[section] if 0 <= section < len(self.headers) else None
        return None


class RowsTable(QTableView):
    """`cell_clicked(row, column)` like QTableWidget's cellClicked; `text(row, col)` and `tooltip(row, col)` read
    what a cell shows."""

    cell_clicked = Signal(int, int)

    def __init__(self) -> None:
        super().__init__()
        self.rows_model = RowsModel()
        self.setModel(self.rows_model)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        # Columns sized from the text of the first rows by font metrics: Qt's ResizeToContents would ask the model
        # for every role of every measured cell (thousands of calls into Python per refresh).
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setStretchLastSection(False)
        self.clicked.connect(lambda index: self.cell_clicked.emit(index.row(), index.column()))

    def set_rows(self, headers: list[str], rows: list[list[Cell]]) -> None:
        self.rows_model.set_rows(headers, rows)
        metrics, header_metrics = self.fontMetrics(), self.horizontalHeader().fontMetrics()
        padding = 2 * self.style().pixelMetric(self.style().PixelMetric.PM_FocusFrameHMargin) + 14
        for col, title in enumerate(headers):
            texts = {row[col].text for row in rows[:SIZED_ROWS] if col < len(row)}
            widest = max((metrics.horizontalAdvance(t) for t in texts), default=0)
            self.setColumnWidth(col, max(widest, header_metrics.horizontalAdvance(title) + 12) + padding)

    def rowCount(self) -> int:  # noqa: N802 (QTableWidget's name, kept for readers of either table)
        return self.rows_model.rowCount()

    def columnCount(self) -> int:  # noqa: N802
        return self.rows_model.columnCount()

    def text(self, row: int, col: int) -> str:
        return self.rows_model.rows[row][col].text

    def tooltip(self, row: int, col: int) -> str:
        cell = self.rows_model.rows[row][col]
        return cell.tooltip or cell.text
