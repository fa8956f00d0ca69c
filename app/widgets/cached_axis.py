"""An axis that keeps the drawings of the tick sets it drew last.

pyqtgraph's AxisItem throws its drawing away whenever its ticks, range or size change and makes it again on the next
paint: every label measured and placed in Python, 1–4 ms for a token axis of a 512-token map. Holding Next through
the layers shows the same few axes over and over (tokens, d_model, d_ff, d_head), so this axis keeps the drawings
(QPictures) of the last KEPT tick sets, each under everything that drawing depends on — ticks, range, size and
place, style, pens — and plays a kept one instead of drawing it again. Only for explicit ticks (setTicks) and a
fixed room for the labels (autoExpandTextSpace=False): automatic ticks and growing axes are drawn as pyqtgraph does.
"""

from __future__ import annotations

from collections import OrderedDict

import pyqtgraph as pg
from PySide6.QtCore import QPointF

KEPT = 24  # drawings per axis


def _plain(value):
    """A hashable stand-in for a style value: numbers and text as they are, lists as tuples, objects by identity."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return id(value)


class CachedAxisItem(pg.AxisItem):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pictures: OrderedDict = OrderedDict()

    def picture_key(self) -> tuple:
        """Everything generateDrawSpecs and drawPicture read: two equal keys draw the same picture."""
        view = self.linkedView()
        tick_bounds = None if view is None else view.mapRectToItem(self, view.boundingRect()).getRect()
        device = [self.mapToDevice(QPointF(x, y)) for x, y in ((0.0, 0.0), (1.0, 1.0))]
        return (
            self.orientation,
            tuple(self.range),
            tuple(tuple(level) for level in self._tickLevels),
            self.mapRectFromParent(self.geometry()).getRect(),
            tick_bounds,
            tuple(None if p is None else (p.x(), p.y()) for p in device),
            tuple((k, _plain(v)) for k, v in sorted(self.style.items())),
            id(self._pen), id(self._textPen), id(self._tickPen), _plain(self.grid), self.scale,
            self.autoSIPrefixScale, tuple(self.logMode) if isinstance(self.logMode, list) else self.logMode,
        )

    def paint(self, p, opt, widget) -> None:
        if self.picture is None and self._tickLevels is not None and not self.style["autoExpandTextSpace"]:
            key = self.picture_key()
            kept = self._pictures.get(key)
            if kept is not None:
                self._pictures.move_to_end(key)
                self.picture = kept
            else:
                super().paint(p, opt, widget)  # draws self.picture, then plays it
                if self.picture is not None:
                    self._pictures[key] = self.picture
                    while len(self._pictures) > KEPT:
                        self._pictures.popitem(last=False)
                return
        super().paint(p, opt, widget)
