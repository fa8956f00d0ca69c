"""An attribution graph's picture (scratchformer.plotdata.graph_layout.GraphLayout) painted with QPainter into PNG,
SVG and PDF through render.encode, the writer of every image export: the same layout the Graph view draws — the
same places, marker sizes, edge widths and colours, labels chosen the same way — so the file is the picture shown.

Layout, in points: the title and the subtitle on top; the panels (source | decoder input) with the layers' names
on the left and the tokens under their columns; the edges under the nodes; a legend line at the bottom.
"""

from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QLineF, QPointF, QRectF, QSizeF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPainterPath, QPen

from scratchformer.exporting.files import atomic_write_bytes
from scratchformer.plotdata import abbreviate
from scratchformer.plotdata.graph_layout import NEGATIVE, NODE_RGB, POSITIVE, GraphLayout, label_box, place_labels

from ..startup.qt_application import application
from .render import INK, MUTED, _font, encode

COLUMN_PT, ROW_PT = 70.0, 84.0  # a token's column and a layer's row
LEFT_PT, RIGHT_PT = 86.0, 20.0
TOP_PAD, BOTTOM_PT, LEGEND_PT = 14.0, 34.0, 26.0
PANEL_FILL, PANEL_EDGE = QColor(246, 247, 250), QColor(214, 218, 226)
MAX_FILE_LABELS = 400
LABEL_BACK = QColor(255, 255, 255, 200)


def _header_height(layout: GraphLayout, width: float) -> float:
    fm = QFontMetricsF(_font(11))
    sub = fm.boundingRect(QRectF(0, 0, width - 2 * TOP_PAD, 10_000), int(Qt.TextFlag.TextWordWrap), layout.subtitle)
    return TOP_PAD + 22 + sub.height() + 10


def graph_size(layout: GraphLayout) -> QSizeF:
    """The picture's size in points."""
    x0, x1, y0, y1 = layout.bounds()
    width = max(LEFT_PT + (x1 - x0) * COLUMN_PT + RIGHT_PT, legend_width() + 2 * TOP_PAD)
    return QSizeF(width, _header_height(layout, width) + (y1 - y0) * ROW_PT + BOTTOM_PT + LEGEND_PT)


def marker_path(kind: str, x: float, y: float, size: float) -> QPainterPath:
    """The marker of a node of this kind, `size` across, centred on (x, y) (pyqtgraph's symbols: o d s p h)."""
    r = size / 2
    path = QPainterPath()
    if kind == "feature":
        path.addEllipse(QPointF(x, y), r, r)
        return path
    if kind == "embedding":
        path.addRect(QRectF(x - r * 0.85, y - r * 0.85, 1.7 * r, 1.7 * r))
        return path
    corners = {"error": 4, "logit": 5, "group": 6}.get(kind, 4)
    start = -math.pi / 2
    points = [QPointF(x + r * math.cos(start + 2 * math.pi * k / corners),
                      y + r * math.sin(start + 2 * math.pi * k / corners)) for k in range(corners)]  # fmt: skip
    path.moveTo(points[0])
    for p in points[1:]:
        path.lineTo(p)
    path.closeSubpath()
    return path


def paint_graph(painter: QPainter, layout: GraphLayout, selected: set[int] = frozenset()) -> None:
    """Paint the picture from (0, 0), graph_size(layout) large."""
    size = graph_size(layout)
    painter.fillRect(QRectF(0, 0, size.width(), size.height()), Qt.GlobalColor.white)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(INK)
    painter.setFont(_font(15, bold=True))
    inner = size.width() - 2 * TOP_PAD
    painter.drawText(QRectF(TOP_PAD, TOP_PAD, inner, 22), Qt.AlignmentFlag.AlignVCenter, layout.title)
    painter.setFont(_font(11))
    painter.setPen(MUTED)
    top = _header_height(layout, size.width())
    painter.drawText(QRectF(TOP_PAD, TOP_PAD + 22, inner, top - TOP_PAD - 22), int(Qt.TextFlag.TextWordWrap),
                     layout.subtitle)  # fmt: skip
    x0, x1, y0, y1 = layout.bounds()

    def at(x: float, y: float) -> QPointF:  # data → points (y up)
        return QPointF(LEFT_PT + (x - x0) * COLUMN_PT, top + (y1 - y) * ROW_PT)

    # panels, their titles, the rows' names and the tokens
    for p in layout.panels:
        box = QRectF(at(p.x0, p.y1), at(p.x1, p.y0))
        painter.setPen(QPen(PANEL_EDGE, 1.0))
        painter.setBrush(QBrush(PANEL_FILL))
        painter.drawRoundedRect(box, 6, 6)
        painter.setPen(MUTED)
        painter.setFont(_font(11, bold=True))
        painter.drawText(box.adjusted(8, 0, -8, -4), Qt.AlignmentFlag.AlignBottom | Qt.AlignmentFlag.AlignLeft,
                         p.title)  # fmt: skip
    painter.setFont(_font(10))
    painter.setPen(MUTED)
    for y, name in layout.rows:
        pt = at(x0, y)
        painter.drawText(QRectF(4, pt.y() - 8, LEFT_PT - 10, 16),
                         Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, name)  # fmt: skip
    painter.setFont(_font(11))
    painter.setPen(INK)
    for x, token in layout.columns:
        pt = at(x, y0)
        painter.drawText(QRectF(pt.x() - COLUMN_PT / 2, pt.y() + 4, COLUMN_PT, 18), Qt.AlignmentFlag.AlignHCenter,
                         abbreviate(token, 10))  # fmt: skip
    # edges, weakest first
    painter.setBrush(Qt.BrushStyle.NoBrush)
    for batch in layout.edge_batches():
        pen = QPen(QColor(*batch.rgba), batch.width)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        xy = batch.xy
        painter.drawLines([QLineF(at(*xy[k]), at(*xy[k + 1])) for k in range(0, len(xy), 2)])
    # nodes, then labels
    for i in range(len(layout)):
        kind = layout.kinds[i]
        pt = at(layout.x[i], layout.y[i])
        painter.setBrush(QBrush(QColor(*NODE_RGB[kind])))
        painter.setPen(QPen(QColor(30, 30, 30) if i in selected else QColor(255, 255, 255), 2.0 if i in selected
                            else 0.8))  # fmt: skip
        painter.drawPath(marker_path(kind, pt.x(), pt.y(), float(layout.size[i])))
    font = _font(10)
    fm = QFontMetricsF(font)
    painter.setFont(font)
    painter.setPen(INK)
    char_w, line_h, unit_h = fm.averageCharWidth() / COLUMN_PT, fm.height() / ROW_PT, 1 / ROW_PT
    for i in place_labels(layout, char_w, line_h, unit_h, MAX_FILE_LABELS):
        bx0, bx1, by0, by1 = label_box(layout, i, char_w, line_h, unit_h)
        box = QRectF(at(bx0, by1), at(bx1, by0))
        painter.fillRect(box, LABEL_BACK)  # edges pass under the text, not through it
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, layout.labels[i])
    _paint_legend(painter, QRectF(TOP_PAD, size.height() - LEGEND_PT, inner, LEGEND_PT))


LEGEND = (("feature", "feature"), ("error", "error node"), ("embedding", "embedding"), ("logit", "logit"),
          ("group", "supernode"))
SIGNS = ((POSITIVE, "pushes its target up"), (NEGATIVE, "pushes it down"))


def legend_width() -> float:
    """The legend line's width in points."""
    fm = QFontMetricsF(_font(10))
    return (sum(22 + fm.horizontalAdvance(t) + 14 for _, t in SIGNS)
            + sum(15 + fm.horizontalAdvance(t) + 12 for _, t in LEGEND))  # fmt: skip


def _paint_legend(painter: QPainter, box: QRectF) -> None:
    font = _font(10)
    fm = QFontMetricsF(font)
    painter.setFont(font)
    x, y = box.left(), box.top() + box.height() / 2
    for rgba, text in SIGNS:
        painter.setPen(QPen(QColor(*rgba), 3.0))
        painter.drawLine(QLineF(x, y, x + 18, y))
        painter.setPen(MUTED)
        painter.drawText(QPointF(x + 22, y + fm.ascent() / 2 - 1), text)
        x += 22 + fm.horizontalAdvance(text) + 14
    for kind, text in LEGEND:
        painter.setBrush(QBrush(QColor(*NODE_RGB[kind])))
        painter.setPen(QPen(QColor(255, 255, 255), 0.8))
        painter.drawPath(marker_path(kind, x + 6, y, 11))
        painter.setPen(MUTED)
        painter.drawText(QPointF(x + 15, y + fm.ascent() / 2 - 1), text)
        x += 15 + fm.horizontalAdvance(text) + 12


def graph_bytes(layout: GraphLayout, fmt: str, scale: float = 2.0) -> bytes:
    """The picture as the contents of a .png, .svg or .pdf file."""
    application()  # measuring its text needs the process's Qt application
    return encode(graph_size(layout), lambda painter, _vector: paint_graph(painter, layout), fmt, scale,
                  layout.title, layout.subtitle)  # fmt: skip


def save_graph(layout: GraphLayout, path: str | Path, scale: float = 2.0) -> Path:
    """Write the picture to `path`; its extension (.png, .svg, .pdf) says the format."""
    path = Path(path)
    atomic_write_bytes(path, graph_bytes(layout, path.suffix, scale), overwrite=True)
    return path
