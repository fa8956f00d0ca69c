"""Token ids as the walkthrough prints them: one row per position, a token and an id column per batch item.

A `tokens` step is a list of integers; coloured by value it says nothing (id 30243 is not "more" than id 354),
so the step view shows this table instead. The chosen batch item's columns are highlighted; hover reads a cell
out like a heatmap does, and the right-click menu offers the same exports (the step's heatmap, ids written in
its cells).
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontDatabase, QFontMetrics
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableView

from scratchformer.plotdata.heatmap import TokenColumn, abbreviate

from .heatmap import EXPORT_ACTIONS

TOKEN_CHARS = 24  # longer tokens are cut with "…" (the tooltip has the whole token)
CHOSEN_BRUSH = QBrush(QColor("#eef4fb"))


def shown_token(token: str) -> str:
    """The token with its edge spaces visible ('␣learning'), cut to TOKEN_CHARS."""
    shown = abbreviate(token, TOKEN_CHARS)
    return shown[:-1] + "␣" if shown.endswith(" ") else shown


class _Cell:
    """What `TokenTable.item(row, col)` returns: the text shown in that cell (QTableWidgetItem's reading API)."""

    def __init__(self, text: str) -> None:
        self._text = text

    def text(self) -> str:
        return self._text


class TokenModel(QAbstractTableModel):
    """The table's cells, produced when Qt asks for them: a batch of 8 windows of 512 tokens is 8 192 cells, and
    building them all up front (QTableWidgetItem) stalled the window for a fifth of a second."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.columns: list[TokenColumn] = []
        self.chosen = 0
        self.pos_dim = "pos"
        self.n_rows = 0
        self.mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.bold = QFont()
        self.bold.setBold(True)

    def reset(self, pos_dim: str, columns: list[TokenColumn], chosen: int) -> None:
        self.beginResetModel()
        self.pos_dim, self.columns, self.chosen = pos_dim, columns, chosen
        self.n_rows = max((len(c.ids) for c in columns), default=0)
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802 (Qt name)
        return 0 if parent is not None and parent.isValid() else self.n_rows

    def columnCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802
        if parent is not None and parent.isValid():
            return 0
        return 1 + 2 * len(self.columns) if self.columns else 0

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal or role != Qt.ItemDataRole.DisplayRole:
            return None
        if section == 0:
            return "position"
        c = self.columns[(section - 1) // 2]
        if section % 2 == 0:
            return "id"
        return f"token (item {c.batch + 1})" if len(self.columns) > 1 else "token"

    def text(self, row: int, col: int) -> str:
        if col == 0:
            return str(row)
        c = self.columns[(col - 1) // 2]
        if row >= len(c.ids):
            return ""
        return shown_token(c.tokens[row]) if col % 2 == 1 else str(c.ids[row])

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        row, col = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(row, col)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            side = Qt.AlignmentFlag.AlignLeft if col % 2 == 1 else Qt.AlignmentFlag.AlignRight
            return side | Qt.AlignmentFlag.AlignVCenter
        here = col > 0 and len(self.columns) > 1 and self.columns[(col - 1) // 2].batch == self.chosen
        if role == Qt.ItemDataRole.FontRole:
            return self.bold if here and col % 2 == 1 else (self.mono if col % 2 == 0 or col == 0 else None)
        if role == Qt.ItemDataRole.BackgroundRole and here:
            return CHOSEN_BRUSH
        if role == Qt.ItemDataRole.ToolTipRole and col > 0:
            c = self.columns[(col - 1) // 2]
            if row < len(c.ids):
                return f"{c.tokens[row]!r} ({self.pos_dim} {row}) = id {c.ids[row]}"
        return None


class TokenTable(QTableView):
    """position · token · id, one token/id column pair per batch item. Emits hovered(text) like a heatmap."""

    hovered = Signal(str)
    export_requested = Signal(str)
    cell_clicked = Signal(int, int)  # (batch item, position) of a clicked token or id

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.model_ = TokenModel(self)
        self.setModel(self.model_)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ContiguousSelection)  # copy ids with Ctrl+C
        self.setAlternatingRowColors(False)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        self.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)  # as wide as its columns
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setStretchLastSection(False)
        self.setMouseTracking(True)
        self.entered.connect(self._entered)
        self.clicked.connect(self._clicked)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._show_menu)

    @property
    def columns(self) -> list[TokenColumn]:
        return self.model_.columns

    @property
    def pos_dim(self) -> str:
        return self.model_.pos_dim

    def set_columns(self, pos_dim: str, columns: list[TokenColumn], chosen: int = 0) -> None:
        """Show these batch items' tokens and ids; highlight batch item `chosen`."""
        self.model_.reset(pos_dim, columns, chosen)
        header = self.horizontalHeader()
        bold = QFontMetrics(self.model_.bold)
        mono = QFontMetrics(self.model_.mono)
        plain = QFontMetrics(self.font())
        for j in range(self.model_.columnCount()):  # widths from the longest text, not by visiting every cell
            title = plain.horizontalAdvance(str(self.model_.headerData(j, Qt.Orientation.Horizontal)))
            if j == 0:
                body = mono.horizontalAdvance(str(max(self.model_.n_rows - 1, 0)))
            else:
                c = columns[(j - 1) // 2]
                raw = c.tokens if j % 2 == 1 else c.ids
                metrics = mono if j % 2 == 0 else bold if c.batch == chosen else plain
                shown = shown_token if j % 2 == 1 else str
                if len(raw) <= 64:
                    body = max((metrics.horizontalAdvance(shown(t)) for t in raw), default=0)
                else:  # a long window: the longest text with some air, not every one of 512 measured
                    longest = max(raw, key=lambda t: len(str(t)), default="")
                    body = metrics.horizontalAdvance(shown(longest) + "M")
            header.resizeSection(j, max(title, body) + 28)  # a little air around the numbers

    def columnCount(self) -> int:  # noqa: N802 (as QTableWidget's)
        return self.model_.columnCount()

    def item(self, row: int, col: int) -> _Cell:
        """The text of a cell (what a reader sees and copies)."""
        return _Cell(self.model_.text(row, col))

    def ids(self, batch: int = 0) -> list[int]:
        """The ids shown for a batch item, top to bottom (what a reader copies from the table)."""
        for k, c in enumerate(self.columns):
            if c.batch == batch:
                return [int(self.model_.text(i, 2 + 2 * k)) for i in range(len(c.ids))]
        return []

    def tokens(self, batch: int = 0) -> list[str]:
        for k, c in enumerate(self.columns):
            if c.batch == batch:
                return [self.model_.text(i, 1 + 2 * k) for i in range(len(c.tokens))]
        return []

    def _batch_column(self, col: int):
        """The batch item's column pair a table column belongs to (the position column: the chosen item's)."""
        if not self.columns:
            return None
        if col == 0:
            return next((c for c in self.columns if c.batch == self.model_.chosen), self.columns[0])
        return self.columns[(col - 1) // 2]

    def _clicked(self, index: QModelIndex) -> None:
        c = self._batch_column(index.column())
        if c is not None and index.row() < len(c.ids):
            self.cell_clicked.emit(c.batch, index.row())

    def highlight(self, cells: list[tuple[int, int]]) -> None:
        """Select the token and id of these (batch item, position) cells (a derivation's inputs)."""
        selection = self.selectionModel()
        selection.clearSelection()
        for batch, pos in cells:
            for k, c in enumerate(self.columns):
                if c.batch == batch and pos < len(c.ids):
                    for col in (1 + 2 * k, 2 + 2 * k):
                        selection.select(self.model_.index(pos, col), selection.SelectionFlag.Select)
        if cells:
            self.scrollTo(self.model_.index(cells[0][1], 0))

    def _entered(self, index: QModelIndex) -> None:
        row, col = index.row(), index.column()
        if col == 0 or not self.columns:
            return
        c = self.columns[(col - 1) // 2]
        if row < len(c.ids):
            item = f", batch item {c.batch + 1}" if len(self.columns) > 1 else ""
            self.hovered.emit(f"{self.pos_dim} {row}{item}: {c.tokens[row]!r} = id {c.ids[row]}")

    def _show_menu(self, pos) -> None:
        menu = QMenu(self)
        for text, kind in EXPORT_ACTIONS:
            menu.addAction(text, lambda k=kind: self.export_requested.emit(k))
        menu.exec(self.viewport().mapToGlobal(pos))
