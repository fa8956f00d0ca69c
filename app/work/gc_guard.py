"""Where Python's cyclic garbage collector may run: on the UI thread, at the top of its event loop, and nowhere else.

The collector runs wherever an allocation crosses a threshold, and frees whatever garbage it finds there, Qt
widgets of a closed window included. Two places proved fatal:
- A worker thread: it may free the last reference to a Qt wrapper that belongs to the UI thread, and Qt then
  deletes the C++ object from the wrong thread (a crash or a deadlock, both seen here). So while any worker runs,
  automatic collection is off (`no_collection_in_this_thread`), switched back on from the UI thread by a queued
  signal.
- Inside a Qt call that holds one of Qt's signal-slot locks: a disconnect that deletes a Python slot lets Python
  code run with the receiver's lock held; an allocation there started a collection, and a garbage widget's
  destructor asked for the same lock (Qt shares 131 mutexes among all objects). The UI thread waited on itself
  forever, building a window (native stacks: tests/conftest.py's hang dump; QObject::disconnect →
  gc_collect_main → ~QAbstractItemView → QBasicMutex::lockInternal).
So once a window exists, automatic collection is off for good (`collect_at_safe_points`): a timer on the UI thread
does what it would have done (Python's own thresholds, `collect_due`) every SAFE_POINT_MS, between events, where
no Qt lock is held.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QObject, QTimer, Signal

_lock = threading.Lock()
_running = 0
_was_enabled = True
_frozen = False  # freeze_startup_objects has run
_paused = False  # collection is off because of the workers (running, or their resume not delivered yet)
_safe_points: _SafePoints | None = None  # collections happen on this timer only (collect_at_safe_points)
SAFE_POINT_MS = 250
SAFE_POINT_TIMER = "scratchformer-gc-safe-points"  # its object name: a timer meant to run as long as the process


class _Resumer(QObject):
    """Lives in the UI thread (created at import, which happens there); resume() arrives queued from workers."""

    resume = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.resume.connect(self._resume)

    def _resume(self) -> None:
        global _paused
        with _lock:
            if _running == 0 and _paused:
                _paused = False
                if _was_enabled and _safe_points is None:
                    gc.enable()


_resumer = _Resumer()


class _SafePoints(QObject):
    """Lives in the UI thread; its timer collects what is due between events."""

    def __init__(self) -> None:
        super().__init__()
        self.timer = QTimer(self)
        self.timer.setObjectName(SAFE_POINT_TIMER)
        self.timer.setInterval(SAFE_POINT_MS)
        self.timer.timeout.connect(collect_due)
        self.timer.start()


def collect_at_safe_points(on: bool = True) -> None:
    """(UI thread.) Turn automatic collection off for good and collect on a timer between events instead (see the
    module's docstring); the window does this before it builds anything. `on=False` goes back to automatic
    collection (tests of the worker guard)."""
    global _safe_points
    with _lock:
        if on and _safe_points is None:
            _safe_points = _SafePoints()
            gc.disable()
        elif not on and _safe_points is not None:
            _safe_points.timer.stop()
            _safe_points.deleteLater()
            _safe_points = None
            if _running == 0 and not _paused:
                gc.enable()


def collecting_at_safe_points() -> bool:
    return _safe_points is not None


def collect_due() -> int:
    """The collection automatic collection would have made by now, by Python's own thresholds: the oldest
    generation whose count is over its threshold, once the youngest's is. Returns what it freed."""
    if gc.isenabled():
        return 0  # automatic collection is on (the guard is off): nothing is left for us to do
    (t0, t1, t2), (c0, c1, c2) = gc.get_threshold(), gc.get_count()
    if c0 <= t0:
        return 0
    generation = 2 if c1 > t1 and c2 > t2 else 1 if c1 > t1 else 0
    return gc.collect(generation)


def freeze_startup_objects() -> None:
    """Leave what exists now (the imported libraries, the window's widgets: several hundred thousand objects that
    live as long as the process) out of every later collection (gc.freeze). A full collection scans every tracked
    object while holding the GIL, so without this each one costs the UI thread 80–150 ms at the paper preset's
    size; with it, only what later runs made is scanned. Objects made from here on are collected as usual."""
    global _frozen
    if _frozen:  # once per process: later windows (tests make hundreds) are not worth a full collection each
        return
    _frozen = True
    gc.collect()  # what is garbage already goes first: frozen objects are never freed by the collector
    gc.freeze()


@contextmanager
def no_collection_in_this_thread() -> Iterator[None]:
    """Wrap all the Python work of a worker thread in this."""
    global _running, _was_enabled, _paused
    with _lock:
        if _running == 0 and not _paused:  # with a resume still on its way, collection is off because of us:
            _was_enabled = gc.isenabled()  # what it was before the first worker stays what to go back to
            gc.disable()
            _paused = True
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            last = _running == 0
        if last:
            _resumer.resume.emit()  # queued to the UI thread, which switches collection back on
