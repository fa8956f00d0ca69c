"""Large maps are drawn a few per turn of the event loop, never all at once.

Drawing one 512 × 512 map (fitting the plot, reducing and colouring the image, ticks, colour bar) takes 10–40 ms
of the UI thread; a view that shows eight of them in one refresh (Heads, Masks, LayerNorm) held the window for a
quarter of a second. HeatmapWidget.set_heatmap hands large maps to this queue instead, which draws them in slices
of at most SLICE_S, maps on screen first, returning to the event loop between slices so the window keeps
answering and paints what is ready.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from PySide6.QtCore import QObject, QTimer

SLICE_S = 0.025  # drawing per turn of the event loop; one map may overrun it, never two


class DrawQueue(QObject):
    def __init__(self) -> None:
        super().__init__()
        self._widgets: OrderedDict[int, object] = OrderedDict()  # id → widget with draw_pending(), oldest first
        self._timer = QTimer(self)
        self._timer.setObjectName("scratchformer-draw-queue")
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._run)

    def put(self, widget) -> None:
        """Draw `widget`'s pending map on a coming turn (once, however often it is put)."""
        self._widgets.setdefault(id(widget), widget)
        if not self._timer.isActive():
            self._timer.start()

    def discard(self, widget) -> None:
        self._widgets.pop(id(widget), None)

    def pending(self) -> int:
        return len(self._widgets)

    def finish(self) -> None:
        """Draw everything still queued now."""
        self._timer.stop()
        while self._widgets:
            self._draw(self._widgets.popitem(last=False)[1])

    def _run(self) -> None:
        deadline = time.perf_counter() + SLICE_S
        while self._widgets:  # at least one map per turn, more while the slice lasts
            key = next((k for k, w in self._widgets.items() if _on_screen(w)), next(iter(self._widgets)))
            self._draw(self._widgets.pop(key))
            if time.perf_counter() >= deadline:
                break
        if self._widgets:
            self._timer.start()

    @staticmethod
    def _draw(widget) -> None:
        try:
            widget.draw_pending()
        except RuntimeError:  # its window was closed and the widget deleted before its turn: nothing to draw
            pass


def _on_screen(widget) -> bool:
    try:
        return widget.isVisible()
    except RuntimeError:
        return False


_QUEUE: DrawQueue | None = None


def draw_queue() -> DrawQueue:
    """The application's one queue (made on first use, on the UI thread)."""
    global _QUEUE
    if _QUEUE is None:
        _QUEUE = DrawQueue()
    return _QUEUE
