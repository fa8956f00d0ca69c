"""Which interventions the forward pass now running applies: one context variable, like the tracer's.

It sits below everything that consults it (trace, attention, model) and above nothing of the model, so the
modules that read it and scratchformer.interventions, which builds what it holds from those very modules, import
no cycle. The value is an `Interventions` (scratchformer.interventions) or None; nothing here needs its type.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("scratchformer_interventions", default=None)


def active_interventions():
    """The interventions of the forward pass now running, or None (the normal case: nothing changes)."""
    return _ACTIVE.get()


@contextmanager
def applying(active) -> Iterator[None]:
    """Make `active` the current interventions (a lazy trace's rerun uses this to redo what its pass did)."""
    token = _ACTIVE.set(active)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
