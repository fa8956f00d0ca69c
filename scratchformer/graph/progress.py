"""How far a graph's build has got, and stopping it: a caller (the window's job) wraps build_graph in `watching`,
and the long loops (the edges, batch by batch; the features chosen round by round) call `tick`, which reports the
stage and raises Cancelled once the caller no longer wants the graph. Nothing is passed down the calls: the watch
lives in a context variable, so it holds for the thread that set it only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_WATCH: ContextVar = ContextVar("scratchformer_graph_watch", default=None)


class Cancelled(Exception):
    """The caller's cancelled() turned true while the graph was being built."""


@contextmanager
def watching(progress: Callable[[str, int, int], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> Iterator[None]:  # fmt: skip
    """Within the block, tick(stage, done, total) calls progress(stage, done, total) and raises Cancelled when
    cancelled() is true."""
    token = _WATCH.set((progress, cancelled))
    try:
        yield
    finally:
        _WATCH.reset(token)


def tick(stage: str, done: int, total: int) -> None:
    watch = _WATCH.get()
    if watch is None:
        return
    progress, cancelled = watch
    if cancelled is not None and cancelled():
        raise Cancelled
    if progress is not None:
        progress(stage, done, total)
