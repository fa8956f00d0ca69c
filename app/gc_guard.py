"""Keep Python's cyclic garbage collector off the worker threads.

The collector runs in whichever thread happens to allocate when a threshold is crossed. If that is a worker
thread, it may free the last reference to a Qt wrapper that belongs to the UI thread (a closed window, a widget of
an earlier run) and Qt deletes the C++ object from the wrong thread: a segmentation fault, seen when a worker
parsed GPT-2's 50 257-entry tokenizer.json. While any worker runs, automatic collection is paused; it resumes
(and so happens on the UI thread, the only one left allocating) when the last worker finishes.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_running = 0
_was_enabled = True


@contextmanager
def no_collection_in_this_thread() -> Iterator[None]:
    global _running, _was_enabled
    with _lock:
        if _running == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _was_enabled:
                gc.enable()
