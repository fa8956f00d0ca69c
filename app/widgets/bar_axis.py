"""The colour bar's value axis, drawn straight onto the painter.

Every step has a new range, so pyqtgraph's AxisItem lays the bar's axis out afresh each time: about 150 lines of
Python in generateDrawSpecs (each label measured on a QPicture's painter), then the drawing recorded into a QPicture
and played back — 0.5–0.6 ms of every step while Next is held (benchmarks/bench_stalls.py). The bar shows a few
explicit round ticks (bar_ticks.py) on its right side and is linked to no view, so the drawing is a line, a tick
and a label per value. BarAxisItem draws exactly that, with pyqtgraph's own geometry (AxisItem.generateDrawSpecs
and drawPicture for a right-hand axis: the line one pixel inside the left edge, ticks `tickLength` long, labels
`tickTextOffset` beyond them, centred on their tick and dropped where they would leave the axis), so the bar looks
as it did. Anything else (automatic ticks, a grid, other sides) is drawn by pyqtgraph as before.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPen, QPicture

_TEXT_FLAGS = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextDontClip)
_MEASURING = QPicture()  # pyqtgraph measures labels on a QPicture's painter: the same device gives the same sizes


def _alpha(style_alpha) -> int:
    """The ticks' opacity (0–255) as AxisItem reads its tickAlpha style for the first tick level."""
    if style_alpha is None:
        return 255
    if isinstance(style_alpha, float):
        return min(255, max(0, int(round(style_alpha * 255))))
    return int(style_alpha)


class BarAxisItem(pg.AxisItem):
    lean = True  # False: pyqtgraph draws it (the tests compare the two)

    def _drawn_here(self) -> bool:
        levels = self._tickLevels
        return (self.lean and self.orientation == "right" and levels is not None and len(levels) == 1
                and self.grid is False and self.linkedView() is None and bool(self.style["showValues"])
                and not any(self.style["stopAxisAtTick"]))

    def paint(self, p, opt, widget) -> None:
        if not self._drawn_here():
            super().paint(p, opt, widget)
            return
        bounds = self.mapRectFromParent(self.geometry())
        height = bounds.height()
        if height <= 0 or None in (self.mapToDevice(bounds.topLeft()), self.mapToDevice(bounds.bottomLeft())):
            return
        lo, hi = self.range
        span = hi - lo
        # value v sits at y = v * scale - offset in item coordinates: hi at the top, lo at the bottom
        scale, offset = ((-height / span), lo * (-height / span) - height) if span else (1.0, 0.0)
        y_ends = (lo * scale - offset, hi * scale - offset)
        y_min, y_max = min(y_ends), max(y_ends)
        left = bounds.left()
        font = self.style["tickFont"] or QFont()
        metrics = QFontMetricsF(font, _MEASURING)
        room = self.boundingRect()
        text_x = left + max(0, self.style["tickLength"]) + self.style["tickTextOffset"][0]
        ticks: list[float] = []
        labels: list[tuple[QRectF, str]] = []
        widest = 0.0
        for value, text in self._tickLevels[0]:
            y = value * scale - offset
            if y < y_min or y > y_max:
                continue
            ticks.append(y)
            box = metrics.boundingRect(QRectF(0, 0, 100, 100), int(Qt.AlignmentFlag.AlignCenter), text)
            w, h = box.width(), box.height() * 0.8  # pyqtgraph's own allowance: the box is a little too tall
            widest = max(widest, w)
            rect = QRectF(text_x, y - h / 2, w, h)
            if (room & rect) == rect:  # a label that would stick out of the axis is left out
                labels.append((rect, text))
        self._updateMaxTextSize(widest)

        tick_pen = QPen(self.tickPen())
        if tick_pen.brush().style() == Qt.BrushStyle.SolidPattern:
            colour = QColor(tick_pen.color())
            colour.setAlpha(_alpha(self.style["tickAlpha"]))
            tick_pen.setColor(colour)
        p.save()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        p.setPen(self.pen())
        p.drawLine(QPointF(left + 1.0, bounds.top() - 1.0), QPointF(left + 1.0, bounds.bottom() + 1.0))
        p.setPen(tick_pen)
        length = self.style["tickLength"]
        for y in ticks:
            p.drawLine(QPointF(left, y), QPointF(left + length, y))
        p.setFont(font)
        p.setPen(self.textPen())
        p.setClipRect(room.toAlignedRect())
        for rect, text in labels:
            p.drawText(rect, _TEXT_FLAGS, text)
        p.restore()


def use_bar_axis(bar: pg.ColorBarItem) -> BarAxisItem:
    """Give a vertical ColorBarItem a BarAxisItem for its value axis, set up as ColorBarItem sets up its own."""
    old = bar.axis
    axis = BarAxisItem("right")
    bar.setAxisItems({"right": axis})
    axis.setZValue(old.zValue())
    axis.setWidth(45)
    axis.setStyle(showValues=True)
    axis.enableAutoSIPrefix(False)
    axis.unlinkFromView()
    axis.setRange(*bar.levels())
    bar.axis = axis
    return axis
