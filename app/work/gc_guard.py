"""Keep Python's cyclic garbage collector off the worker threads.

The collector runs in whichever thread happens to allocate when a threshold is crossed. On a worker thread it may
free the last reference to a Qt wrapper that belongs to the UI thread (a closed window, a widget of an earlier run),
and Qt then deletes the C++ object from the wrong thread: a crash or a deadlock, both seen here. So while any worker
runs, automatic collection is off; when the last one finishes, collection is switched back on *from the UI thread*
(by a queued signal), so the pending collection happens there. Switching it on in the worker itself would make
the worker's very next allocation run that collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QObject, Signal

_lock = threading.Lock()
_running = 0
_was_enabled = True
_frozen = False  # freeze_startup_objects has run
_paused = False  # collection is off because of the workers (running, or their resume not delivered yet)


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
                if _was_enabled:
                    gc.enable()


_resumer = _Resumer()


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
