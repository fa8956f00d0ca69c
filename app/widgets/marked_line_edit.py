"""Underline words in a QLineEdit, like a spell checker, for words the model does not know."""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QInputMethodEvent, QTextCharFormat
from PySide6.QtWidgets import QApplication, QLineEdit

UNKNOWN_COLOUR = QColor(200, 30, 30)


def word_spans(text: str, words: list[str]) -> list[tuple[int, int]]:
    """(start, length) of each whole-word occurrence of `words` in `text`, case-insensitively."""
    spans: list[tuple[int, int]] = []
    for word in dict.fromkeys(w for w in words if w.strip()):
        pattern = rf"(?<!\w){re.escape(word)}(?!\w)"
        spans.extend((m.start(), m.end() - m.start()) for m in re.finditer(pattern, text, re.IGNORECASE))
    return sorted(spans)


class MarkedLineEdit(QLineEdit):
    """A line edit that can draw a red wavy underline under given words (the text itself is unchanged)."""

    def __init__(self, tooltip: str = "") -> None:
        super().__init__()
        self.base_tooltip = tooltip
        self.setToolTip(tooltip)
        self.marked: list[tuple[int, int]] = []
        self.textEdited.connect(lambda _t: self.mark_words([]))  # marks belong to the text that was run

    def mark_words(self, words: list[str]) -> None:
        self.marked = word_spans(self.text(), words)
        fmt = QTextCharFormat()
        fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
        fmt.setUnderlineColor(UNKNOWN_COLOUR)
        fmt.setForeground(UNKNOWN_COLOUR)
        # A line edit shows formatted ranges only through an input-method event (positions relative to the cursor).
        cursor = self.cursorPosition()
        attrs = [
            QInputMethodEvent.Attribute(QInputMethodEvent.AttributeType.TextFormat, start - cursor, length, fmt)
            for start, length in self.marked
        ]
        QApplication.sendEvent(self, QInputMethodEvent("", attrs))
        unknown = f"Not in the model's vocabulary (underlined): {', '.join(words)}." if words else ""
        self.setToolTip("\n".join(t for t in (self.base_tooltip, unknown) if t))
