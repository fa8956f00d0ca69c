"""Charts that are not heatmaps (token paths, curves over training) as PNG, SVG or PDF: the pyqtgraph widget
shown, painted by Qt onto an image, an SVG generator or a PDF writer — what is on screen, in all three formats.

pyqtgraph's own SVG exporter fails with this PySide6 (see render.py), so the widget is painted with QWidget.render
instead: in SVG and PDF its lines, dots and labels stay vectors. A title line goes above the chart.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QPoint, QRectF, QSizeF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPageSize, QPainter, QPdfWriter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget

from scratchformer.exporting.files import atomic_write_bytes

from .render import encode_png, ensure_gui_app

FORMATS = ("png", "svg", "pdf")
TITLE_H = 26.0  # points above the chart for its title
PNG_SCALE = 2.0


def _paint(painter: QPainter, widget: QWidget, title: str) -> None:
    painter.fillRect(QRectF(0, 0, widget.width(), widget.height() + TITLE_H), Qt.GlobalColor.white)
    font = QFont()
    font.setPixelSize(13)
    font.setBold(True)
    painter.setFont(font)
    painter.setPen(QColor(20, 20, 20))
    painter.drawText(QRectF(8, 0, widget.width() - 16, TITLE_H), Qt.AlignmentFlag.AlignVCenter, title)
    painter.translate(0, TITLE_H)
    QWidget.render(widget, painter, QPoint(0, 0))  # a QGraphicsView's own render() draws its scene only


def plot_bytes(widget: QWidget, fmt: str, title: str = "") -> bytes:
    """The widget as it is drawn now, under `title`, as the contents of a .png, .svg or .pdf file."""
    ensure_gui_app()
    fmt = fmt.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"not an image format: {fmt!r}")
    size = QSizeF(max(1, widget.width()), max(1, widget.height()) + TITLE_H)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if fmt == "png":
        img = QImage(int(size.width() * PNG_SCALE), int(size.height() * PNG_SCALE), QImage.Format.Format_RGB32)
        img.fill(Qt.GlobalColor.white)
        painter = QPainter(img)
        try:
            painter.scale(PNG_SCALE, PNG_SCALE)
            _paint(painter, widget, title)
        finally:
            painter.end()
        return encode_png(img)
    if fmt == "svg":
        device = QSvgGenerator()
        device.setOutputDevice(buf)
        device.setSize(size.toSize())
        device.setViewBox(QRectF(0, 0, size.width(), size.height()))
        device.setResolution(72)
        device.setTitle(title)
        painter = QPainter(device)
        try:
            _paint(painter, widget, title)
        finally:
            painter.end()
    else:
        device = QPdfWriter(buf)
        device.setResolution(300)
        device.setPageSize(QPageSize(size, QPageSize.Unit.Point, title[:60] or "chart"))
        device.setPageMargins(QMarginsF(0, 0, 0, 0))
        device.setTitle(title)
        device.setCreator("scratchformer")
        painter = QPainter(device)
        try:
            painter.scale(300 / 72.0, 300 / 72.0)
            _paint(painter, widget, title)
        finally:
            painter.end()
    buf.close()
    return bytes(data.data())


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
