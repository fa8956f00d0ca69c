"""Rotary position embeddings, RoPE (Su et al. 2021, "RoFormer"), as Llama-style decoders use them.

The paper's model adds a position vector to each embedding once, at the bottom. RoPE adds nothing there: inside
every attention it turns each pair of query and key dimensions (i, i + d_rot/2) by the angle pos · ω_i, where
ω_i = θ^(−2i/d_rot) (θ = 10 000 unless the model says otherwise):

    rot(x, pos)[i]           = x[i] cos(pos ω_i) − x[i + d_rot/2] sin(pos ω_i)
    rot(x, pos)[i + d_rot/2] = x[i + d_rot/2] cos(pos ω_i) + x[i] sin(pos ω_i)

A rotation by angle a followed by the transpose of one by b is a rotation by a − b, so
rot(q, m) · rot(k, n) = q · rot(k, n − m): the score of query m and key n depends on their distance only.
This module pairs dimension i with i + d_rot/2 ("rotate half", GPT-NeoX's layout, which Llama, Qwen, Mistral,
Gemma, Phi-3 and OLMo checkpoints are stored for). With a rotary fraction below 1 (Pythia) only the first d_rot
dimensions of a head turn; the rest pass through unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import TransformerConfig


def inverse_frequencies(config: TransformerConfig, local: bool = False) -> torch.Tensor:
    """(d_rot / 2,) float32: ω_i = θ^(−2i/d_rot), stretched as config.rope_scaling says. `local`: the table of
    the sliding-window layers of a model that gives them a base of their own (Gemma 3's rope_local_theta), which
    is never stretched."""
    d_rot = config.d_rotary
    theta = config.rope_local_theta if local else config.rope_theta
    omega = 1.0 / (theta ** (torch.arange(0, d_rot, 2, dtype=torch.float32) / d_rot))  # (d_rot/2,)
    if local:
        return omega
    if config.rope_scaling == "linear":  # every position divided by the factor: every angle slower alike
        return omega / config.rope_factor
    if config.rope_scaling == "llama3":
        return _llama3(omega, config)
    return omega


def _llama3(omega: torch.Tensor, c: TransformerConfig) -> torch.Tensor:
    """Llama 3.1's long-context frequencies: wavelengths shorter than original_len / high_freq_factor are kept,
    those longer than original_len / low_freq_factor are slowed by the factor, and the ones between blend the two
    smoothly (Meta's reference code; the figures are the config's)."""
    wavelength = 2 * math.pi / omega  # (d_rot/2,) positions per full turn
    low_limit = c.rope_original_max_len / c.rope_low_freq_factor  # longer than this: slowed
    high_limit = c.rope_original_max_len / c.rope_high_freq_factor  # shorter than this: kept
    slowed = torch.where(wavelength > low_limit, omega / c.rope_factor, omega)
    smooth = (c.rope_original_max_len / wavelength - c.rope_low_freq_factor) / (
        c.rope_high_freq_factor - c.rope_low_freq_factor
    )
    blended = (1 - smooth) * slowed / c.rope_factor + smooth * slowed
    between = (wavelength >= high_limit) & (wavelength <= low_limit)
    return torch.where(between, blended, slowed)


class RotaryEmbedding(nn.Module):
    """The angles of every position: cos and sin of pos · ω_i, each (T, d_rot) with the d_rot/2 frequencies
    written twice (for dimension i and its partner i + d_rot/2)."""

    def __init__(self, config: TransformerConfig, local: bool = False) -> None:
        super().__init__()
        self.d_rot, self.config, self.local = config.d_rotary, config, local
        self.register_buffer("inv_freq", self.frequencies(), persistent=False)  # (d_rot/2,)

    def frequencies(self) -> torch.Tensor:
        """(d_rot/2,) ω_i of this table (see inverse_frequencies)."""
        return inverse_frequencies(self.config, self.local)

    def forward(self, n: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin), each (n, d_rot), for positions offset … offset + n − 1."""
        positions = torch.arange(offset, offset + n, device=self.inv_freq.device, dtype=torch.float32)  # (T,)
        angles = positions[:, None] * self.inv_freq[None, :]  # (T, d_rot/2): pos · ω_i
        angles = torch.cat((angles, angles), dim=-1)  # (T, d_rot)
        return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(…, d_rot) → (…, d_rot): [x_a, x_b] → [−x_b, x_a], the partner of each dimension with the sine's sign."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, h, T, d_head) turned by its positions' angles: x cos + rotate_half(x) sin on the first d_rot
    dimensions (cos, sin: (T, d_rot)), the rest unchanged."""
    d_rot = cos.shape[-1]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if d_rot == x.shape[-1]:
        return x * cos + rotate_half(x) * sin  # (B, h, T, d_head)
    turned, kept = x[..., :d_rot], x[..., d_rot:]  # (B, h, T, d_rot), (B, h, T, d_head − d_rot)
    return torch.cat((turned * cos + rotate_half(turned) * sin, kept), dim=-1)  # (B, h, T, d_head)
