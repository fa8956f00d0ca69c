"""Large maps are drawn a few per turn of the event loop, never all at once, their numbers made off the UI thread.

Drawing one 512 × 512 map (fitting the plot, reducing and colouring the image, ticks, colour bar) takes 10–40 ms
of the UI thread; a view that shows eight of them in one refresh (Heads, Masks, LayerNorm) held the window for a
quarter of a second. HeatmapWidget.set_heatmap hands large maps to this queue instead. The queue first makes what
the waiting maps need that is only numbers — their cells' classes and display images (reduced to the plot's pixels
and coloured), 2–10 ms a map — in one job off the UI thread (app/work/jobs.py), then draws them in slices of at most
SLICE_S, maps on screen first, returning to the event loop between slices so the window keeps answering and paints
what is ready. A widget offers that work by `draw_preparation()` (a function of nothing, or None when it needs
none); one that offers none is drawn at its turn.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from PySide6.QtCore import QObject, QTimer

from ..work.jobs import JobRunner

SLICE_S = 0.012  # drawing per turn of the event loop; one map may overrun it, never two (its paint follows)


class DrawQueue(QObject):
    def __init__(self) -> None:
        super().__init__()
        self._widgets: OrderedDict[int, object] = OrderedDict()  # id → widget with draw_pending(), oldest first
        self._timer = QTimer(self)
        self._timer.setObjectName("scratchformer-draw-queue")
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._run)
        self._jobs = JobRunner("scratchformer-draw-prepare")
        self._ready: set[int] = set()  # ids of queued widgets with nothing (more) to make: drawn at their turn

    def put(self, widget) -> None:
        """Draw `widget`'s pending map on a coming turn (once, however often it is put)."""
        self._widgets.setdefault(id(widget), widget)
        self._ready.discard(id(widget))  # a new map: its numbers are made first
        if not self._timer.isActive():
            self._timer.start()

    def discard(self, widget) -> None:
        self._widgets.pop(id(widget), None)
        self._ready.discard(id(widget))

    def pending(self) -> int:
        return len(self._widgets)

    def finish(self) -> None:
        """Draw everything still queued now (what the running job makes is taken first)."""
        self._jobs.wait()
        self._timer.stop()
        self._ready.clear()
        while self._widgets:
            self._draw(self._widgets.popitem(last=False)[1])

    def wait(self) -> None:
        """Wait for the job that makes maps' numbers, if one runs (a window that closes leaves no thread)."""
        self._jobs.wait()

    def wait_prepared(self) -> None:
        """Make the numbers of every waiting map now (start the job if none runs, and wait for it): tests."""
        self._prepare()
        self._jobs.wait()

    def _run(self) -> None:
        self._prepare()
        deadline = time.perf_counter() + SLICE_S
        while True:  # at least one map per turn, more while the slice lasts
            ready = [(k, w) for k, w in self._widgets.items() if k in self._ready]
            if not ready:
                break
            key = next((k for k, w in ready if _on_screen(w)), ready[0][0])
            self._ready.discard(key)
            self._draw(self._widgets.pop(key))
            if time.perf_counter() >= deadline:
                break
        if any(k in self._ready for k in self._widgets):
            self._timer.start()

    def _prepare(self) -> None:
        """Start one job that makes the numbers of every waiting map that offers some; the others are ready to draw.
        While a job runs, maps queued since wait for its end."""
        if self._jobs.busy():
            return
        widgets, makers = [], []
        for key, widget in self._widgets.items():
            if key in self._ready:
                continue
            make = _preparation(widget)
            if make is None:
                self._ready.add(key)
            else:
                widgets.append(widget)
                makers.append(make)
        if makers:
            self._jobs.start(lambda job: [None if job.cancelled() else make() for make in makers],
                             on_result=lambda made: self._prepared(widgets, made),
                             on_error=lambda _error: self._prepared(widgets, [None] * len(widgets)),
                             doing="Drawing the maps")

    def _prepared(self, widgets: list, made: list) -> None:
        """(UI thread) Hand each widget what was made for it (a widget whose map changed meanwhile drops it; after
        a failure each makes its own numbers as it draws), then draw on coming turns."""
        for widget, numbers in zip(widgets, made):
            try:
                taken = numbers is not None and widget.take_prepared(numbers)
            except RuntimeError:  # its window was closed and the widget deleted meanwhile
                continue
            if id(widget) in self._widgets and (taken or numbers is None):
                self._ready.add(id(widget))  # else it waits for a map set meanwhile: the next job makes that one
        if self._widgets and not self._timer.isActive():
            self._timer.start()

    @staticmethod
    def _draw(widget) -> None:
        try:
            widget.draw_pending()
        except RuntimeError:  # its window was closed and the widget deleted before its turn: nothing to draw
            pass


def _preparation(widget):
    """The widget's draw_preparation() (None for a widget that offers none, or is gone)."""
    prepare = getattr(widget, "draw_preparation", None)
    try:
        return prepare() if prepare is not None else None
    except RuntimeError:
        return None


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
