"""The numbers the experiments report about a softmax row and about two tensors: entropy, largest weight, the
softmax's own gradient, and the largest difference."""

from __future__ import annotations

import torch


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """H(p) = −Σ p log p in nats over the last axis (0 · log 0 counts as 0): (..., n) → (...)."""
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(-1)


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """∂softmax(s)_i / ∂s_j = p_i (δ_ij − p_j) for each row: (..., n) → (..., n, n)."""
    return torch.diag_embed(weights) - weights[..., :, None] * weights[..., None, :]


def row_stats(weights: torch.Tensor) -> dict[str, float]:
    """Mean over rows of the largest weight, of the entropy (nats) and of the mean |∂softmax/∂score|:
    weights (rows, n). A softmax pushed to one-hot has largest weight 1, entropy 0 and no gradient left."""
    return {
        "max_weight": float(weights.max(-1).values.mean()),
        "entropy": float(entropy(weights).mean()),
        "mean_abs_gradient": float(softmax_jacobian(weights).abs().mean(dim=(-2, -1)).mean()),
    }


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a − b| over every element (0.0 for empty tensors)."""
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
