"""RMSNorm (Zhang & Sennrich 2019): the norm of T5 and of every Llama-style decoder."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """γ · x / √(mean(x²) + ε) — no mean subtracted, no β (T5's "LayerNorm", Llama's RMSNorm).

    The mean square is taken in at least float32 whatever the input's precision, as the published
    implementations do, so a bfloat16 model's norms match theirs; float32 and float64 inputs are unchanged.

    Gemma's (plus_one): (1 + γ) · x / √(mean(x²) + ε), its γ stored as an offset from 1 (0 at initialisation);
    the product is taken in float32 and only then rounded to the input's precision (Llama rounds x̂ first)."""

    def __init__(self, d_model: int, eps: float, plus_one: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d_model) if plus_one else torch.ones(d_model))  # γ
        self.eps, self.plus_one = eps, plus_one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.to(torch.promote_types(x.dtype, torch.float32))  # (…, d): bfloat16 widened, float64 kept
        mean_square = wide.pow(2).mean(-1, keepdim=True)  # (…, 1)
        normed = wide * torch.rsqrt(mean_square + self.eps)  # (…, d) float32: x̂
        if self.plus_one:
            return (normed * (1.0 + self.weight.float())).to(x.dtype)  # (…, d): (1 + γ)·x̂
        return self.weight * normed.to(x.dtype)  # (…, d): γ·x̂
