"""RMSNorm (Zhang & Sennrich 2019): the norm of T5 and of every Llama-style decoder."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """γ · x / √(mean(x²) + ε) — no mean subtracted, no β (T5's "LayerNorm", Llama's RMSNorm).

    The mean square is taken in at least float32 whatever the input's precision, as the published
    implementations do, so a bfloat16 model's norms match theirs; float32 and float64 inputs are unchanged."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # γ
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.to(torch.promote_types(x.dtype, torch.float32))  # (…, d): bfloat16 widened, float64 kept
        mean_square = wide.pow(2).mean(-1, keepdim=True)  # (…, 1)
        return self.weight * (wide * torch.rsqrt(mean_square + self.eps)).to(x.dtype)  # (…, d)
