"""The job runner (app/work/jobs.py): work runs off the UI thread inside the garbage-collector guard; its result,
progress and one-sentence errors arrive on the UI thread; a cancelled or superseded job's news is dropped; and
shutdown() leaves no thread running."""

from __future__ import annotations

import gc
import os
import sys
import threading

import pytest
from PySide6.QtCore import QThread

from app.work.jobs import BACKGROUND_NICE, JobRunner
from scratchformer.errors import UserError

UI = threading.get_ident()


def _wait_for(event: threading.Event) -> None:
    assert event.wait(10), "the job did not get there"


def test_the_work_runs_off_the_ui_thread_and_its_result_arrives_on_it(qtbot):
    runner = JobRunner("scratchformer-test")
    seen = {}

    def work(job):
        seen["work"] = threading.get_ident()
        seen["name"] = QThread.currentThread().objectName()
        return 42

    runner.start(work, on_result=lambda value: seen.update(result=value, delivered=threading.get_ident()))
    qtbot.waitUntil(lambda: not runner.busy(), timeout=10_000)
    assert seen["result"] == 42
    assert seen["work"] != UI and seen["delivered"] == UI
    assert seen["name"] == "scratchformer-test"


def test_the_garbage_collector_is_off_during_the_work_and_back_on_afterwards(qtbot, automatic):
    assert gc.isenabled()
    runner = JobRunner("scratchformer-test")
    results = []
    runner.start(lambda job: gc.isenabled(), on_result=results.append)
    qtbot.waitUntil(lambda: results != [], timeout=10_000)
    assert results == [False]
    qtbot.waitUntil(gc.isenabled, timeout=5_000)  # switched back on from the UI thread


def test_an_exception_is_one_sentence_for_on_error_and_no_result(qtbot):
    errors, results = [], []
    runner = JobRunner("scratchformer-test", on_error=errors.append)

    def broken(job):
        raise RuntimeError("the stored inputs are gone\nTraceback (most recent call last): ...")

    runner.start(broken, on_result=results.append, doing="Recomputing the attention steps")
    qtbot.waitUntil(lambda: not runner.busy(), timeout=10_000)
    assert errors == ["Recomputing the attention steps failed: the stored inputs are gone"]
    assert results == []


def test_a_user_error_is_its_own_sentence_and_a_jobs_own_on_error_comes_first(qtbot):
    window_errors, own = [], []
    runner = JobRunner("scratchformer-test", on_error=window_errors.append)

    def refused(job):
        raise UserError("This model has no decoder; pick a translation model.")

    runner.start(refused, on_error=own.append)
    qtbot.waitUntil(lambda: not runner.busy(), timeout=10_000)
    assert own == ["This model has no decoder; pick a translation model."]
    assert window_errors == []


def test_progress_reaches_the_ui_thread_in_order_before_the_result(qtbot):
    runner = JobRunner("scratchformer-test")
    events = []

    def work(job):
        for done in range(1, 4):
            job.progress(done, 3)
        return "measured"

    runner.start(work, on_progress=lambda done, total: events.append((done, total, threading.get_ident() == UI)),
                 on_result=events.append)
    qtbot.waitUntil(lambda: not runner.busy(), timeout=10_000)
    assert events == [(1, 3, True), (2, 3, True), (3, 3, True), "measured"]


def test_a_cancelled_job_sees_it_stops_and_delivers_nothing(qtbot):
    runner = JobRunner("scratchformer-test")
    inside, stopped = threading.Event(), threading.Event()
    delivered = []

    def work(job):
        inside.set()
        while not job.cancelled():
            job.progress("still going")
            threading.Event().wait(0.005)
        stopped.set()
        return "too late"

    job = runner.start(work, on_result=delivered.append, on_error=delivered.append, on_progress=delivered.append)
    _wait_for(inside)
    runner.cancel()  # progress already sent but not yet delivered is dropped too
    assert job.cancelled()
    qtbot.waitUntil(lambda: not runner.busy(), timeout=10_000)
    assert stopped.is_set()
    assert delivered == []


def test_with_latest_only_a_superseded_result_is_dropped_and_a_replaced_request_never_runs(qtbot):
    runner = JobRunner("scratchformer-test", latest_only=True)
    inside, release = threading.Event(), threading.Event()
    ran, results = [], []

    def slow(job):
        ran.append("first")
        inside.set()
        _wait_for(release)
        return "first"

    def quick(name):
        def work(job):
            ran.append(name)
            return name
        return work

    first = runner.start(slow, on_result=results.append)
    _wait_for(inside)
    runner.start(quick("second"), on_result=results.append)  # waits for the first, then is replaced
    runner.start(quick("third"), on_result=results.append)
    assert first.cancelled()
    release.set()
    qtbot.waitUntil(lambda: not runner.busy(), timeout=10_000)
    assert ran == ["first", "third"]
    assert results == ["third"]


def test_wait_delivers_the_news_at_once(qtbot):
    runner = JobRunner("scratchformer-test")
    results = []
    runner.start(lambda job: "ready", on_result=results.append)
    assert runner.wait(10_000)
    assert results == ["ready"] and not runner.busy()  # no event loop turn was needed


def test_shutdown_cancels_and_leaves_no_thread_running(qapp):
    runner = JobRunner("scratchformer-test", latest_only=True)
    inside = threading.Event()
    delivered = []

    def until_cancelled(job):
        inside.set()
        while not job.cancelled():
            threading.Event().wait(0.005)
        return "stopped"

    job = runner.start(until_cancelled, on_result=delivered.append)
    waiting = runner.start(lambda job: "never", on_result=delivered.append)
    _wait_for(inside)
    assert runner.shutdown(10_000)
    assert not job.thread_.isRunning() and not waiting.started()
    assert not runner.busy()
    qapp.processEvents()  # the job's end, posted before its thread ended, arrives now: it delivers nothing
    assert delivered == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_the_work_runs_below_the_ui_thread_so_the_window_is_scheduled_first(qtbot):
    """A job's thread (and the threads it starts, PyTorch's) yields the cores to the UI thread when both want one."""
    runner = JobRunner("scratchformer-test")
    ui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    got = []

    def work(_job):
        here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        started = []
        t = threading.Thread(target=lambda: started.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        t.start()
        t.join()
        return here, started[0]

    runner.start(work, on_result=got.append)
    runner.wait()
    assert got and got[0][0] >= max(ui, BACKGROUND_NICE) and got[0][1] == got[0][0]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == ui  # the UI thread keeps its own
