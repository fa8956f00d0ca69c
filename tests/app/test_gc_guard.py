"""Python's cyclic collector never runs on a worker thread (it would free UI-thread Qt wrappers there)."""

import gc
import threading

from app.gc_guard import no_collection_in_this_thread


def test_collection_is_paused_while_any_worker_runs_and_resumes_after():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()
    seen = []

    def worker():
        with no_collection_in_this_thread():
            inside.set()
            release.wait(10)
            seen.append(gc.isenabled())

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    with no_collection_in_this_thread():  # a second worker overlapping the first
        assert not gc.isenabled()
    assert not gc.isenabled()  # the first is still running
    release.set()
    t.join(10)
    assert seen == [False] and gc.isenabled()


def test_a_failing_worker_still_resumes_collection():
    try:
        with no_collection_in_this_thread():
            raise RuntimeError("the model failed")
    except RuntimeError:
        pass
    assert gc.isenabled()
