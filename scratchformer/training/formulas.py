"""The formulas of paper §5: the learning-rate schedule (§5.3) and the label-smoothed loss (§5.4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE = -100  # label value for padding: F.cross_entropy skips it


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Paper §5.3: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5), times `scale`."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float = 0.1) -> torch.Tensor:
    """Mean cross-entropy against (1 − ε)·one-hot + ε/V (paper §5.4, ε_ls = 0.1) over non-padding labels.

    logits: (B, T, V); labels: (B, T) with IGNORE at padding.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                           ignore_index=IGNORE, label_smoothing=smoothing)
