"""The smallest text the window draws: nothing below MIN_POINT_SIZE points at any window size (a narrow window
scrolls or stacks instead of shrinking text). tests/app/test_navigation.py walks the window to hold this."""

from __future__ import annotations

from PySide6.QtGui import QFont

MIN_POINT_SIZE = 8.0


def points(font: QFont, dpi: float) -> float:
    """A font's size in points, also when it was set in pixels (at `dpi` logical dots per inch)."""
    if font.pointSizeF() > 0:
        return font.pointSizeF()
    return font.pixelSize() * 72.0 / dpi


def min_pixels(dpi: float) -> float:
    """MIN_POINT_SIZE in pixels at `dpi` logical dots per inch."""
    return MIN_POINT_SIZE * dpi / 72.0


def scaled(font: QFont, factor: float) -> QFont:
    """The font `factor` times its size, but never below MIN_POINT_SIZE (a copy)."""
    out = QFont(font)
    if out.pointSizeF() > 0:
        out.setPointSizeF(max(MIN_POINT_SIZE, out.pointSizeF() * factor))
    return out
