"""Python's cyclic collector never runs on a worker thread (it would free UI-thread Qt wrappers there): it is off
while any worker runs, and the UI thread switches it back on afterwards. Once a window exists it never runs inside
a Qt call either: automatic collection is off and a timer on the UI thread collects between events."""

import gc
import threading

from app.work import gc_guard
from app.work.gc_guard import no_collection_in_this_thread


def test_collection_is_paused_while_any_worker_runs_and_resumed_by_the_ui_thread(qtbot, automatic):
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()
    seen = []

    def worker():
        with no_collection_in_this_thread():
            inside.set()
            release.wait(10)
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())  # still off in the worker after it finished: the UI thread turns it on

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    with no_collection_in_this_thread():  # a second worker overlapping the first
        assert not gc.isenabled()
    qtbot.wait(50)
    assert not gc.isenabled()  # the first is still running
    release.set()
    t.join(10)
    assert seen == [False, False]
    qtbot.waitUntil(gc.isenabled, timeout=5_000)  # the queued resume, delivered on this (the UI) thread


def test_a_failing_worker_still_resumes_collection(qtbot, automatic):
    try:
        with no_collection_in_this_thread():
            raise RuntimeError("the model failed")
    except RuntimeError:
        pass
    qtbot.waitUntil(gc.isenabled, timeout=5_000)


def test_a_worker_starting_before_the_last_resume_arrives_still_ends_with_collection_on(qtbot, automatic):
    """Worker A ends (its resume is queued), worker B starts before the UI thread delivers it: when B ends too,
    collection must come back on — B must not take the paused state for the user's own setting."""
    assert gc.isenabled()

    def work():
        with no_collection_in_this_thread():
            pass

    for _ in range(2):  # A, then B, both ended before this (the UI) thread runs its event loop
        t = threading.Thread(target=work)
        t.start()
        t.join(10)
    assert not gc.isenabled()  # neither resume has been delivered yet
    qtbot.waitUntil(gc.isenabled, timeout=5_000)


def test_the_libraries_and_the_window_are_left_out_of_later_collections(qtbot, make_window):
    make_window()  # the first window of the process freezes what exists (later ones leave it be)
    # A full collection scans only what is not frozen: torch, transformers, Qt's wrappers and the window are not
    # scanned again, so a collection on the UI thread costs a fraction of what it would.
    assert gc.get_freeze_count() > len(gc.get_objects())


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_window_collects_between_events_only(qtbot, make_window):
    make_window()
    assert gc_guard.collecting_at_safe_points() and not gc.isenabled()  # no collection inside a Qt call
    import weakref

    gone = weakref.ref(_Cycle())  # garbage that only the collector can free
    more = [weakref.ref(_Cycle()) for _ in range(gc.get_threshold()[0] + 1)]  # enough to start a collection
    assert gone() is not None and all(r() is not None for r in more)  # none ran where they were made
    qtbot.waitUntil(lambda: gone() is None, timeout=5 * gc_guard.SAFE_POINT_MS + 2_000)  # the timer's collection


def test_the_collection_due_follows_pythons_own_thresholds(automatic):
    gc.collect()
    gc.disable()
    try:
        assert gc_guard.collect_due() == 0 or gc.get_count()[0] <= gc.get_threshold()[0]
        keep = [_Cycle() for _ in range(gc.get_threshold()[0] + 10)]  # count 0 now over its threshold
        del keep
        assert gc.get_count()[0] > gc.get_threshold()[0]
        assert gc_guard.collect_due() >= gc.get_threshold()[0]  # the cycles were freed
        assert gc.get_count()[0] <= gc.get_threshold()[0]
    finally:
        gc.enable()
