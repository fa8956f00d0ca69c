"""Widgets built ahead of need, one per turn of the event loop, while the window waits.

A pyqtgraph plot takes 15–40 ms to build; a view that shows many maps (Heads: one per head, Masks, the
Overview's mosaics) would build them all at once on its first visit and freeze the window for a few hundred
milliseconds. Instead each view names the widgets it will want (View.prebuild(): functions of nothing, each
building at most one), and this builds them one at a time once the window has been idle for START_MS, usually
while a run is in flight. A function that finds its widget already there does nothing, so asking twice is free.
The user comes first: each step, tab or lesson page they go to postpones what is left by START_MS again
(`postpone`), so a build never lands in the middle of holding Next or turning a page.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

START_MS = 400  # idle time before the first build (a quick run and its first drawing come first)


class Prebuild(QObject):
    """Runs queued builders one per event-loop turn, starting START_MS after the last queue()."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._jobs: deque[Callable[[], object]] = deque()
        self._timer = QTimer(self)
        self._timer.setObjectName("scratchformer-prebuild")
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._next)

    def queue(self, jobs: list[Callable[[], object]]) -> None:
        """Replace what is still to build with `jobs` and start again after START_MS."""
        self._jobs = deque(jobs)
        if self._jobs:
            self._timer.start(START_MS)
        else:
            self._timer.stop()

    def postpone(self) -> None:
        """The user did something: build nothing more until the window has been idle for START_MS again."""
        if self._jobs:
            self._timer.start(START_MS)

    def pending(self) -> int:
        return len(self._jobs)

    def finish(self) -> None:
        """Build everything still queued now (tests, screenshots)."""
        self._timer.stop()
        while self._jobs:
            self._jobs.popleft()()

    def stop(self) -> None:
        self._jobs.clear()
        self._timer.stop()

    def _next(self) -> None:
        if self._jobs:
            self._jobs.popleft()()
        if self._jobs:
            self._timer.start(0)
