"""Charts that are not heatmaps (token paths, curves over training) as PNG, SVG or PDF: the pyqtgraph widget
shown, painted by Qt onto an image, an SVG generator or a PDF writer — what is on screen, in all three formats.

pyqtgraph's own SVG exporter fails with this PySide6 (see render.py), so the widget is painted with QWidget.render
instead, through render.encode (the figures' writer): in SVG and PDF its lines, dots and labels stay vectors. A
title line goes above the chart.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRectF, QSizeF, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QWidget

from scratchformer.exporting.files import atomic_write_bytes

from .render import INK, _font, encode

TITLE_H = 26.0  # points above the chart for its title
PNG_SCALE = 2.0


def _paint(painter: QPainter, widget: QWidget, title: str) -> None:
    painter.fillRect(QRectF(0, 0, widget.width(), widget.height() + TITLE_H), Qt.GlobalColor.white)
    painter.setFont(_font(13, bold=True))
    painter.setPen(INK)
    painter.drawText(QRectF(8, 0, widget.width() - 16, TITLE_H), Qt.AlignmentFlag.AlignVCenter, title)
    painter.translate(0, TITLE_H)
    QWidget.render(widget, painter, QPoint(0, 0))  # a QGraphicsView's own render() draws its scene only


def plot_bytes(widget: QWidget, fmt: str, title: str = "") -> bytes:
    """The widget as it is drawn now, under `title`, as the contents of a .png, .svg or .pdf file (render.encode,
    the writer the figures use too)."""
    size = QSizeF(max(1, widget.width()), max(1, widget.height()) + TITLE_H)
    return encode(size, lambda painter, _vector: _paint(painter, widget, title), fmt, PNG_SCALE, title)


def save_plot(widget: QWidget, path: str | Path, title: str = "") -> Path:
    """Write the widget to `path`; the extension (.png, .svg, .pdf) says the format."""
    path = Path(path)
    atomic_write_bytes(path, plot_bytes(widget, path.suffix, title), overwrite=True)
    return path


def plot_image(widget: QWidget, title: str = "") -> QImage:
    """The widget under its title as an image (for the clipboard)."""
    img = QImage()
    img.loadFromData(plot_bytes(widget, "png", title), "PNG")
    return img
