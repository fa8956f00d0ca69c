"""What the field reports of a dictionary (the figures `features train --json` prints):

    fvu           fraction of variance unexplained, Σ‖y − ŷ‖² / Σ‖y − ȳ‖² over held-out tokens (0 is perfect)
    l0            features active per token, on average
    dead          features that never fired on the held-out tokens
    dense         features that fired on more than a tenth of them
    ce_recovered  (CE_zero − CE_spliced) / (CE_zero − CE_clean): how much of the model's next-token loss survives
                  when the reconstruction replaces the step (1: as good as the model; 0: as bad as zeroing the step)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..patching.interventions import StepEdit, intervene
from ..running.batching import IGNORE
from .activations import Batch, forward
from .attach import read_then_edit
from .dictionary import Dictionary

DENSE = 0.1


@torch.no_grad()
def reconstruction(d: Dictionary, x: torch.Tensor, y: torch.Tensor | None = None) -> dict:
    """fvu, l0, dead and dense of `d` on inputs x (N, d_in) and targets y (None: x)."""
    y = x if y is None else y
    f = d.encode(x)  # (N, d_sae)
    recon = d.decode(f)
    fired = (f > 0).float()
    total = (y - y.mean(0)).pow(2).sum()
    return {
        "fvu": float((y - recon).pow(2).sum() / total) if total > 0 else 0.0,
        "l0": float(fired.sum(-1).mean()),
        "dead": int((fired.sum(0) == 0).sum()),
        "dense": int((fired.mean(0) > DENSE).sum()),
    }


def _ce(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, int]:
    """Summed cross-entropy over labelled positions, and how many."""
    flat = labels.reshape(-1).to(logits.device)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), flat, ignore_index=IGNORE, reduction="sum")
    return float(loss), int((flat != IGNORE).sum())


def splice_edits(d: Dictionary, at: str, to: str, how: str) -> list[StepEdit]:
    """Edits that make the pass carry on with the reconstruction at `to` ("spliced"), or zeros ("zero")."""
    if how == "zero":
        return [StepEdit(to, torch.zeros_like, "zeroed")]
    return read_then_edit(at, to, lambda x, t: d(x.float())[2].to(t.dtype), "reconstructed")


@torch.no_grad()
def ce_recovered(bundle, d: Dictionary, batches: list[Batch]) -> float | None:
    """CE loss recovered over `batches` (None for a model without a decoder, or when zeroing the step costs
    nothing)."""
    if not bundle.config.has_decoder or not batches:
        return None
    at, to = d.info.at, d.info.to
    sums = {"clean": 0.0, "spliced": 0.0, "zero": 0.0}
    for batch in batches:
        for how in sums:
            edits = [] if how == "clean" else splice_edits(d, at, to, how)
            with torch.inference_mode(), intervene(bundle.model, edits):
                logits = forward(bundle, batch)
            sums[how] += _ce(logits, batch.labels)[0]
    gap = sums["zero"] - sums["clean"]
    if abs(gap) < 1e-9:
        return None
    return (sums["zero"] - sums["spliced"]) / gap
