"""Which interventions the forward pass now running applies: one context variable, like the tracer's.

A context variable, not state on the model: each thread (and each asyncio task) sees only the interventions of
the run it is making, so a patched pass (Integrated Gradients' path points) and an unchanged pass of the same
model in another thread (the window recomputing a step) never see each other's changes.

It sits below everything that consults it (trace, attention, model) and above nothing of the model, so the
modules that read it and scratchformer.patching.interventions, which builds what it holds from those very modules,
import no cycle. The value is an `Interventions` (scratchformer.patching.interventions) or None; nothing here needs
its type.
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


def patched(step: str, tensor):
    """The value the forward pass carries on from the named point `step`: a patch's values when the run now going
    on patches that step (scratchformer.patching.interventions.Patch), else `tensor` itself. The modules call it where
    they record the step, so the point that records a step is the point that replaces it."""
    active = _ACTIVE.get()
    return tensor if active is None else active.patched(step, tensor)


def head_name(attention: str, layer: int, head: int) -> str:
    """'decoder.1.cross_attn.head0': how --ablate names a head of an attention type ("decoder.cross_attn"), layers
    and heads counted from 0 as in step names. Here, with nothing above it, so that what only names a head (the
    evaluation's report) need not import the interventions themselves."""
    stack, kind = attention.split(".")
    return f"{stack}.{layer}.{kind}.head{head}"
