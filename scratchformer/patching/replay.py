"""One cell of a sweep as a whole patched run: the inputs and the single Patch intervention that make it, and its
metric read back from that run's logits — so that a number on a sweep's map can be checked against the full,
traced run it stands for (the window's Compare view shows that run beside the corrupted one).

    inputs = corrupted_inputs(bundle, clean, corrupt)       what the corrupted run reads (Pair's rule)
    patch = cell_patch(pair, cell)                          corrupted values, the cell's from the clean run
    m = metric_from_logits(pair.metric, trace[logits_step(trace)].tensor[0, -1])   m of the traced run
    effect = pair.effect(torch.tensor([m]))                  (m − m_corrupt) / (m_clean − m_corrupt)

A cell is what scratchformer.plotdata.sweep puts in a map's extra["cells"]: the Component's fields ("step", "head",
"position", …; head None for a whole step ((B, T, d): a residual point, a feed-forward output), position None for
every position) and its label. Its patch is the sweep's own (batched.patch_of), the one its tests check.
"""

from __future__ import annotations

from dataclasses import fields, replace

import torch

from .batched import patch_of
from .components import Component
from .interventions import Patch
from .pair import Pair


def corrupted_inputs(bundle, clean, corrupt):
    """The corrupted run's inputs as a sweep runs them (scratchformer.loading.model_bundle.Inputs): an encoder-decoder
    reads the corrupted source with the clean run's decoder input, so that only the source differs; a decoder-only
    model reads the corrupted text itself."""
    if not bundle.config.has_encoder:
        return corrupt
    return replace(clean, src=corrupt.src, source_tokens=corrupt.source_tokens, notes=list(corrupt.notes),
                   unknown_words=corrupt.unknown_words, lost=corrupt.lost)  # fmt: skip


def component_of(cell: dict) -> Component:
    """The Component a map's cell patched (its fields, as plotdata.sweep stored them)."""
    return Component(**{f.name: cell[f.name] for f in fields(Component)})


def cell_patch(pair: Pair, cell: dict, origin: str | None = None,
               source: dict[str, torch.Tensor] | None = None) -> Patch:
    """The Patch intervention that makes one cell's patched run: the corrupted run's step with the cell's values
    taken from `source` (default: the clean run) — the sweep's own patch (batched.patch_of); a Patch replaces the
    step's tensor wholesale, so only the cell's own values change."""
    head, position = cell.get("head"), cell.get("position")
    if origin is None:
        where = "every position" if position is None else f"position {position + 1}"
        origin = "the clean run (" + (f"head {head + 1}, " if head is not None else "") + f"{where})"
    return replace(patch_of(pair, component_of(cell), source), origin=origin)


def logits_step(trace) -> str:
    """The trace's step holding the logits the model outputs: `generator.capped` where it soft-caps them."""
    return "generator.capped" if trace.find("generator.capped") is not None else "generator.logits"


def metric_from_logits(metric, logits: torch.Tensor) -> float:
    """m of a run from its logits at the last decoder position (vocab,), as the model outputs them (soft-capped
    where it caps): logit[answer] − logit[wrong], or log P(answer)."""
    logits = logits.double()
    if metric.kind == "logprob":
        return float(logits.log_softmax(-1)[metric.answer])
    return float(logits[metric.answer] - logits[metric.wrong])
