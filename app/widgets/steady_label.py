"""A line of text that changes often (a map's title, its read-out, a step's shape) without re-laying out the window.

QLabel.setText always asks its parent's layout to be done again, and each layout done asks its own parent's, up
to the main window: the tab widgets on the way repaint themselves and everything in them, so every step held the
UI thread for the layout of the whole window. SteadyLabel holds its QLabel in a container without a layout, which
ends that chain; the container keeps a fixed height and asks for a new layout only when a new text needs another
height (a title that wraps onto a second line), so what the user sees is the same as with a plain QLabel.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class SteadyLabel(QWidget):
    def __init__(self, text: str = "", parent=None, word_wrap: bool = False,
                 text_format: Qt.TextFormat = Qt.TextFormat.PlainText) -> None:
        super().__init__(parent)
        self.label = QLabel(self)
        self.label.setTextFormat(text_format)
        self.label.setWordWrap(word_wrap)
        self.label.setText(text)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self._fit()

    # --- what callers use of a QLabel ------------------------------------------------------------------------

    def text(self) -> str:
        return self.label.text()

    def setText(self, text: str) -> None:  # noqa: N802 (Qt name)
        if text != self.label.text():
            self.label.setText(text)
            self._fit()

    def setAlignment(self, alignment) -> None:  # noqa: N802 (Qt name)
        self.label.setAlignment(alignment)

    def wordWrap(self) -> bool:  # noqa: N802 (Qt name)
        return self.label.wordWrap()

    # --- layout ----------------------------------------------------------------------------------------------

    def _needed_height(self) -> int:
        if self.label.wordWrap() and self.width() > 0:
            return max(self.label.heightForWidth(self.width()), self.label.fontMetrics().height())
        return self.label.sizeHint().height()

    def _fit(self) -> None:
        """Keep the fixed height the text needs; only a change of it re-lays out the parent."""
        height = self._needed_height()
        if height != self.minimumHeight() or height != self.maximumHeight():
            self.setFixedHeight(height)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        return QSize(self.label.sizeHint().width(), self._needed_height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        return QSize(0, self._needed_height())

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self.label.setGeometry(self.rect())
        if self.label.wordWrap():
            self._fit()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().changeEvent(event)
        if event.type() in (event.Type.FontChange, event.Type.StyleChange):
            self._fit()
