"""Recomputing off the UI thread: before the window shows a step whose sublayer a lazy trace did not keep, a
recompute job (app/work/jobs.py) reruns that sublayer (scratchformer.recording.trace: `step.item(b)` fills the trace's
recompute cache), and the window draws once it is done. A view that reads many sublayers at once (the Overview)
gives its own preparation, which runs in the same job. The UI thread then only reads what is ready; it never runs
the model.

While the user looks at a step, the window also recomputes the sublayers of the steps next to it
(neighbour_work) in another job, so that Next, held down, finds them ready.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable

from scratchformer.recording.trace import Step

from .jobs import JobRunner


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


def run_all(work: list[Callable[[], object]], cancelled: Callable[[], bool] = lambda: False) -> None:
    """Run these functions of nothing in order (the work of one recompute job, app/work/jobs.py), stopping between two
    of them once `cancelled()`: a sublayer's rerun cannot be interrupted, but a closing window need not wait for
    the next one."""
    for job in work:
        if cancelled():
            return
        job()


class ReadyFirst:
    """Recomputes a sublayer's steps off the UI thread (when a lazy trace did not keep them) and makes the
    picture's numbers there too (`compute`: reading a 512 × 512 map as float64 takes tens of milliseconds), then
    calls `then(error, value)` on the UI thread; only the latest request is kept."""

    def __init__(self) -> None:
        self.jobs = JobRunner("scratchformer-recompute", latest_only=True)

    def run(self, steps: list, batch: int, compute, then) -> None:
        def work(job) -> object:
            run_all(step_work(steps, batch), job.cancelled)  # what is not ready when the job starts
            return compute()

        self.jobs.start(work, on_result=lambda value: then("", value), on_error=lambda error: then(error, None),
                        doing="Recomputing the attention steps")

    def busy(self) -> bool:
        return self.jobs.busy()

    def shutdown(self) -> None:
        self.jobs.shutdown()
