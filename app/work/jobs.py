"""The window's one way to run work off the UI thread (napari's `_qt/qthreading.py` is the model).

A job is a plain function `work(job)` run on a thread of its own. It may call `job.progress(*args)` and poll
`job.cancelled()`; what it returns, or the one sentence its exception becomes, comes back to the UI thread by a
queued signal and is handed to `on_result` or `on_error` there. All of the job's Python work runs inside the
garbage-collector guard (gc_guard). A cancelled job's news is dropped, whatever it still sends.

A JobRunner starts and keeps the jobs of one owner (a view, a panel, the window) so that it can say whether any is
still busy and, when the owner closes, cancel them and wait for their threads: shutdown() leaves none running. With
`latest_only`, it runs one job at a time and only the latest request counts: a new one cancels the one running and
replaces the one waiting, which starts when the running one ends.

This module imports only Qt and light modules: the launch window loads PyTorch with it (app/startup/launch.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from scratchformer.errors import UserError

from .gc_guard import no_collection_in_this_thread


def friendly_error(exc: BaseException, doing: str = "The run") -> str:
    """One sentence for the status bar: a UserError as it is, anything else named plainly as `doing` failing."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return "The model ran out of memory; try a shorter text, a smaller model or the CPU."
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{doing} failed: {text}"


BACKGROUND_NICE = 10  # Linux: the nice value of threads that work for the window (the UI thread keeps its own)


def yield_to_the_ui_thread() -> None:
    """(Called on a worker thread.) Let the scheduler run the UI thread first whenever both want a core: on a
    2-core machine a recompute's PyTorch threads otherwise took the cores from the UI thread while Next was held,
    and each step took a third longer to draw. On Linux the nice value is a per-thread attribute, and the threads
    this one starts (PyTorch's) inherit it; elsewhere QThread's low priority. The work still gets every core the
    UI thread leaves idle."""
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < BACKGROUND_NICE:
                os.setpriority(os.PRIO_PROCESS, tid, BACKGROUND_NICE)
        except OSError:  # not allowed here (a sandbox): the thread keeps its priority
            pass
    else:
        QThread.currentThread().setPriority(QThread.Priority.LowPriority)


class _Worker(QObject):
    """Moved onto the job's thread, where its run() is called when the thread starts."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job

    @Slot()
    def run(self) -> None:
        job = self.job
        yield_to_the_ui_thread()
        with no_collection_in_this_thread():  # see gc_guard: never collect UI-thread objects on this thread
            try:
                job.result = job.work(job)
            except Exception as exc:  # noqa: BLE001 - every failure becomes one sentence for the user
                job.error = friendly_error(exc, job.doing)
            finally:
                self.thread().quit()  # the thread ends as soon as this returns
                job.ended.emit()


_LIVE: set[Job] = set()  # every started job until its end is delivered: a dropped runner never frees a running thread


class Job(QObject):
    """One run of `work` on its own QThread. Lives on the UI thread, where its progress and end are delivered."""

    progressed = Signal(object)  # the arguments of one progress() call
    ended = Signal()  # emitted by the job's thread once `result` or `error` is set

    def __init__(self, runner: JobRunner, work: Callable[[Job], object], on_result, on_error, on_progress,
                 doing: str, name: str) -> None:
        super().__init__()
        self.runner, self.work, self.doing = runner, work, doing
        self.on_result, self.on_error, self.on_progress = on_result, on_error, on_progress
        self.result: object = None
        self.error: str | None = None
        self._cancel = threading.Event()  # read by the job's thread
        self._delivered = False
        self.thread_ = QThread()
        self.thread_.setObjectName(name)
        self._worker = _Worker(self)
        self._worker.moveToThread(self.thread_)
        self.thread_.started.connect(self._worker.run)
        # queued: the job's thread emits, this object's (the UI) thread delivers
        self.progressed.connect(self._deliver_progress, Qt.ConnectionType.QueuedConnection)
        self.ended.connect(self._deliver_end, Qt.ConnectionType.QueuedConnection)

    @property
    def name(self) -> str:
        return self.thread_.objectName()

    # --- called by the work function, on the job's thread ----------------------------------------------------

    def progress(self, *args) -> None:
        """Send news of the work so far; on_progress(*args) receives it on the UI thread."""
        self.progressed.emit(args)

    def cancelled(self) -> bool:
        """Whether the owner no longer wants this job: the work may stop early (what it returns is dropped)."""
        return self._cancel.is_set()

    # --- the UI thread's side --------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Ask the work to stop and drop whatever it still sends."""
        self._cancel.set()

    def start(self) -> None:
        _LIVE.add(self)
        self.thread_.start()

    def started(self) -> bool:
        return self.thread_.isRunning() or self.thread_.isFinished()

    def wait(self, timeout_ms: int) -> bool:
        """Wait for the thread to end, then deliver the result or the error now (it is delivered once)."""
        if self.started() and not self.thread_.wait(max(0, timeout_ms)):
            return False
        self._deliver_end()
        return True

    @Slot(object)
    def _deliver_progress(self, args: tuple) -> None:
        if self.on_progress is not None and not self._delivered and not self.cancelled():
            self.on_progress(*args)

    @Slot()
    def _deliver_end(self) -> None:
        if self._delivered:
            return  # wait() delivered it already; this is the queued signal arriving late
        self._delivered = True
        self.thread_.wait()  # it has quit, or is about to: after this no thread of this job runs
        _LIVE.discard(self)
        self.runner._ended(self)  # before the callbacks, which may start the next job
        on_result, on_error, result, error = self.on_result, self.on_error, self.result, self.error
        # what the work and its callbacks hold (a model, a trace) is let go as soon as the job has ended
        self.work = self.on_result = self.on_error = self.on_progress = self.result = self._worker.job = None
        if self.cancelled():
            return
        if error is None:
            if on_result is not None:
                on_result(result)
        elif on_error is not None:
            on_error(error)


class JobRunner:
    """Starts an owner's jobs and keeps them until their news is delivered; see the module's docstring."""

    def __init__(self, name: str, on_error: Callable[[str], object] | None = None, latest_only: bool = False) -> None:
        self.name = name  # the jobs' thread name ("scratchformer-…"); start() may give another
        self.on_error = on_error  # for jobs started without their own (the window's status bar)
        self.latest_only = latest_only
        self._running: list[Job] = []
        self._waiting: Job | None = None  # latest_only: the request that starts when the running job ends

    def start(self, work: Callable[[Job], object], on_result: Callable[[object], object] | None = None,
              on_error: Callable[[str], object] | None = None, on_progress: Callable[..., object] | None = None,
              doing: str = "The run", name: str | None = None) -> Job:
        """Run `work(job)` off the UI thread; on_result(value) or on_error(sentence) then runs on the UI thread.
        `doing` names the work in the error sentence ("Deriving x failed: …")."""
        job = Job(self, work, on_result, on_error or self.on_error, on_progress, doing, name or self.name)
        if self.latest_only and self._running:
            for older in self._running:
                older.cancel()
            if self._waiting is not None:
                self._waiting.cancel()
            self._waiting = job
            return job
        self._running.append(job)
        job.start()
        return job

    def busy(self) -> bool:
        """Whether a job is running, waiting its turn, or has ended without its news delivered yet."""
        return bool(self._running) or self._waiting is not None

    def cancel(self) -> None:
        """Cancel every job, running or waiting: none of their callbacks will be called."""
        for job in self._running:
            job.cancel()
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def wait(self, timeout_ms: int = 60_000) -> bool:
        """Block until no job runs, delivering each one's news now (a waiting job that starts meanwhile is waited
        for too). False if some thread still runs after `timeout_ms`."""
        deadline = time.monotonic() + timeout_ms / 1000
        while self._running:
            left = int((deadline - time.monotonic()) * 1000)
            if not self._running[0].wait(left):
                return False
        return True

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel everything and wait for the threads to end (the owner is closing)."""
        self.cancel()
        return self.wait(timeout_ms)

    def _ended(self, job: Job) -> None:
        if job in self._running:
            self._running.remove(job)
        if self._waiting is not None and not self._running:
            job, self._waiting = self._waiting, None
            self._running.append(job)
            job.start()
