"""The formulas of paper §5: the learning-rate schedule (§5.3) and the label-smoothed loss (§5.4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..running.batching import IGNORE as IGNORE  # label value for padding (lives with collate, re-exported)


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Paper §5.3: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5), times `scale`."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float = 0.1,
                        reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy against (1 − ε)·one-hot + ε/V (paper §5.4, ε_ls = 0.1) over non-padding labels.

    logits: (B, T, V); labels: (B, T) with IGNORE at padding. reduction "mean" averages over the non-padding
    labels, "sum" adds them up (training divides that sum by the token count of the whole — possibly
    distributed — batch). Computed in float32 at least, also under bf16 autocast.
    """
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()  # bf16/fp16 logits: softmax and the sum over the vocabulary in float32
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE, label_smoothing=smoothing, reduction=reduction)
