"""One layer's attention with its residual connection, as Abnar & Zuidema (2020) read it: the matrix that both
attention rollout and attention flow (rollout.py, flow.py) are built from."""

from __future__ import annotations

import torch


def residual_attention(weights: torch.Tensor) -> torch.Tensor:
    """(h, Tq, Tk) attention of one layer → Ã = 0.5·mean_h(A) + 0.5·I with rows renormalised (Tq, Tk). For
    self-attention Tq = Tk; a fully masked row (all zero) keeps only its identity part."""
    a = weights.double().mean(0)  # (h, Tq, Tk) → (Tq, Tk)
    a = 0.5 * a + 0.5 * torch.eye(a.shape[0], a.shape[1], dtype=a.dtype)
    return a / a.sum(-1, keepdim=True)
