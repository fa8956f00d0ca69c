"""Token ids as the walkthrough prints them: one row per position, a token and an id column per batch item.

A `tokens` step is a list of integers; coloured by value it says nothing (id 30243 is not "more" than id 354),
so the step view shows this table instead. The chosen batch item's columns are highlighted; hover reads a cell
out like a heatmap does, and the right-click menu offers the same exports (the step's heatmap, ids written in
its cells).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontDatabase
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableWidget, QTableWidgetItem

from scratchformer.plotdata.heatmap import TokenColumn, abbreviate

from .heatmap import EXPORT_ACTIONS

TOKEN_CHARS = 24  # longer tokens are cut with "…" (the tooltip has the whole token)
CHOSEN_BRUSH = QBrush(QColor("#eef4fb"))


def shown_token(token: str) -> str:
    """The token with its edge spaces visible ('␣learning'), cut to TOKEN_CHARS."""
    shown = abbreviate(token, TOKEN_CHARS)
    return shown[:-1] + "␣" if shown.endswith(" ") else shown


class TokenTable(QTableWidget):
    """position · token · id, one token/id column pair per batch item. Emits hovered(text) like a heatmap."""

    hovered = Signal(str)
    export_requested = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
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
        self.cellEntered.connect(self._entered)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._show_menu)
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.pos_dim = "pos"
        self.columns: list[TokenColumn] = []

    def set_columns(self, pos_dim: str, columns: list[TokenColumn], chosen: int = 0) -> None:
        """Show these batch items' tokens and ids; highlight batch item `chosen`."""
        self.pos_dim, self.columns = pos_dim, columns
        n = max((len(c.ids) for c in columns), default=0)
        many = len(columns) > 1
        headers = ["position"]
        for c in columns:
            headers += [f"token (item {c.batch + 1})", "id"] if many else ["token", "id"]
        self.clear()
        self.setColumnCount(len(headers))
        self.setRowCount(n)
        self.setHorizontalHeaderLabels(headers)
        bold = QFont(self.font())
        bold.setBold(True)
        for i in range(n):
            self.setItem(i, 0, self._item(str(i), Qt.AlignmentFlag.AlignRight, self._mono))
        for k, c in enumerate(columns):
            here = c.batch == chosen and many
            for i, (token, token_id) in enumerate(zip(c.tokens, c.ids)):
                tok = self._item(shown_token(token), Qt.AlignmentFlag.AlignLeft, bold if here else None)
                tok.setToolTip(f"{token!r} ({pos_dim} {i}) = id {token_id}")
                num = self._item(str(token_id), Qt.AlignmentFlag.AlignRight, self._mono)
                for item in (tok, num):
                    if here:
                        item.setBackground(CHOSEN_BRUSH)
                self.setItem(i, 1 + 2 * k, tok)
                self.setItem(i, 2 + 2 * k, num)
        self.resizeColumnsToContents()
        header = self.horizontalHeader()
        for j in range(self.columnCount()):  # a little air around the numbers
            header.resizeSection(j, header.sectionSize(j) + 16)

    @staticmethod
    def _item(text: str, align, font: QFont | None) -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        item.setTextAlignment(align | Qt.AlignmentFlag.AlignVCenter)
        if font is not None:
            item.setFont(font)
        return item

    def ids(self, batch: int = 0) -> list[int]:
        """The ids shown for a batch item, top to bottom (what a reader copies from the table)."""
        for k, c in enumerate(self.columns):
            if c.batch == batch:
                return [int(self.item(i, 2 + 2 * k).text()) for i in range(len(c.ids))]
        return []

    def tokens(self, batch: int = 0) -> list[str]:
        for k, c in enumerate(self.columns):
            if c.batch == batch:
                return [self.item(i, 1 + 2 * k).text() for i in range(len(c.tokens))]
        return []

    def _entered(self, row: int, col: int) -> None:
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
