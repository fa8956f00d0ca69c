"""Recomputing off the UI thread: before the window shows a step whose sublayer a lazy trace did not keep, a
WarmUp thread reruns that sublayer (scratchformer.trace: `step.item(b)` fills the trace's recompute cache), and
the window draws once it is done. A view that reads many sublayers at once (the Overview) gives its own
preparation, which runs in the same thread. The UI thread then only reads what is ready; it never runs the model.

While the user looks at a step, the window also recomputes the sublayers of the steps next to it
(neighbour_work) in another WarmUp thread, so that Next, held down, finds them ready.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable

from PySide6.QtCore import QObject, QThread, Signal

from scratchformer.trace import Step

from .gc_guard import no_collection_in_this_thread


def step_work(steps: list[Step], batch: int) -> list[Callable[[], object]]:
    """What must run before these steps' batch item `batch` can be shown: one recompute per step not ready."""
    return [lambda s=s: s.item(batch) for s in steps if not s.ready(batch)]


STATS_AHEAD = 6  # the inspector's numbers of this many next steps are made ahead, once their tensors are at hand
STATS_OFF_THREAD = 2**18  # numbers in a step (per batch item) from which its statistics are made off the UI thread


def stats_work(result, steps: list[Step], batch: int) -> list[Callable[[], object]]:
    """The inspector's statistics of these steps (two passes over up to a few million numbers each, 5–10 ms at
    512 tokens), made off the UI thread for steps of STATS_OFF_THREAD numbers or more (smaller ones cost well
    under a millisecond, and are made when drawn): each job reads its step only if its tensor is at hand when it runs (a
    recompute queued before it may have made it so), never recomputing a sublayer for it."""
    if result is None:
        return []
    return [lambda s=s: s.ready(batch) and result.stats_for(s, batch) for s in steps
            if _item_size(s) >= STATS_OFF_THREAD and not result.has_stats(s, batch)]


def _item_size(step: Step) -> int:
    """Numbers in one batch item of the step (the whole step when it has no batch axis)."""
    shape = step.shape[1:] if "batch" in step.dims else step.shape
    return math.prod(shape)


def neighbour_work(steps: list[Step], at: int, batch: int, ahead: int = 12, behind: int = 2,
                   limit: int = 2) -> list[Callable[[], object]]:
    """Prefetch while the user looks at steps[at]: the recomputes that the next `ahead` steps (then the `behind`
    steps before it) will need for batch item `batch`, nearest first, at most `limit` distinct sublayer reruns.
    Steps of one sublayer share one rerun, so holding Next finds a whole sublayer ready."""
    order = steps[at + 1: at + 1 + ahead] + steps[max(0, at - behind): at][::-1]
    work, seen = [], set()
    for s in order:
        if s.ready(batch) or s.sources is None:
            continue
        k = bisect_right(s.offsets, min(max(batch, 0), s.size[0] - 1)) - 1 if "batch" in s.dims else 0
        source = s.sources[k]
        if source.key in seen:
            continue
        seen.add(source.key)
        work.append(source.get)
        if len(work) >= limit:
            break
    return work


class WarmUp(QThread):
    """Runs `work` (functions of nothing) in order; `ready(error)` when done ("" or one sentence)."""

    ready = Signal(str)

    def __init__(self, work: list[Callable[[], object]], what: str, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("scratchformer-recompute")
        self.work, self.what = work, what

    def run(self) -> None:
        error = ""
        with no_collection_in_this_thread():  # see gc_guard: never collect UI-thread objects on this thread
            try:
                for job in self.work:
                    job()
            except Exception as exc:  # noqa: BLE001 - the window says it in one sentence
                error = f"Recomputing {self.what} failed: {exc}"
        self.ready.emit(error)


class ReadyFirst:
    """Recomputes a sublayer's steps off the UI thread (when a lazy trace did not keep them) and makes the
    picture's numbers there too (`compute`: reading a 512 × 512 map as float64 takes tens of milliseconds), then
    calls `then(error, value)` on the UI thread; only the latest request is kept."""

    def __init__(self, owner: QObject) -> None:
        self.owner = owner
        self.job: WarmUp | None = None
        self.pending = None  # (steps, batch, compute, then) asked for while a job runs

    def run(self, steps: list, batch: int, compute, then) -> None:
        self.pending = (steps, batch, compute, then)
        if self.job is None:
            self._start()

    def _start(self) -> None:
        steps, batch, compute, then = self.pending
        self.pending = None
        out: list = []
        job = WarmUp([*step_work(steps, batch), lambda: out.append(compute())], "the attention steps", self.owner)
        job.ready.connect(lambda error: self._done(job, then, error, out))
        self.job = job
        job.start()

    def _done(self, job: WarmUp, then, error: str, out: list) -> None:
        job.wait()
        self.job = None
        if self.pending is not None:
            self._start()
            return
        then(error, out[0] if out else None)

    def busy(self) -> bool:
        return self.job is not None

    def shutdown(self) -> None:
        self.pending = None
        if self.job is not None:
            self.job.wait()
