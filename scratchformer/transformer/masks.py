"""Attention masks as boolean tensors (True = may attend), and their additive form for the heatmaps.

Paper §3.2.3: in the decoder "we need to prevent leftward information flow ... by masking out (setting to −∞)
all values in the input of the softmax which correspond to illegal connections".
"""

from __future__ import annotations

import torch


def causal_mask(n_queries: int, n_keys: int | None = None, offset: int = 0, device=None) -> torch.Tensor:
    """(n_queries, n_keys) bool: query i (at absolute position offset+i) sees keys 0 … offset+i."""
    n_keys = n_queries + offset if n_keys is None else n_keys
    q = torch.arange(n_queries, device=device)[:, None] + offset  # (Tq, 1)
    k = torch.arange(n_keys, device=device)[None, :]  # (1, Tk)
    return k <= q  # (Tq, Tk)


def padding_mask(is_pad: torch.Tensor) -> torch.Tensor:
    """(batch, n_keys) bool, True at padding → (batch, 1, n_keys) bool, True where a key may be attended."""
    return ~is_pad[:, None, :]  # (B, 1, Tk)


def encoder_self_mask(src_pad: torch.Tensor | None, batch: int, n_src: int, device=None) -> torch.Tensor | None:
    """(B, S, S) for encoder self-attention: every query sees every non-padding source position."""
    if src_pad is None:
        return None
    return padding_mask(src_pad).expand(batch, n_src, n_src)  # (B, S, S)


def sliding_window_mask(n_queries: int, window: int, offset: int = 0, device=None) -> torch.Tensor:
    """(n_queries, offset + n_queries) bool: the causal mask cut to a window (Mistral's sliding-window attention):
    query i (at offset + i) sees itself and the window − 1 keys before it, no earlier ones."""
    q = torch.arange(n_queries, device=device)[:, None] + offset  # (Tq, 1)
    k = torch.arange(n_queries + offset, device=device)[None, :]  # (1, Tk)
    return (k <= q) & (k > q - window)  # (Tq, Tk)


def decoder_self_mask(
    tgt_pad: torch.Tensor | None, batch: int, n_tgt: int, offset: int = 0, device=None, window: int = 0
) -> torch.Tensor:
    """(B, T, offset+T) for masked decoder self-attention: causal (within the sliding window when `window` > 0),
    and never a padding key."""
    one = sliding_window_mask(n_tgt, window, offset, device) if window else causal_mask(n_tgt, offset=offset,
                                                                                         device=device)
    mask = one[None].expand(batch, -1, -1)  # (B, T, T')
    if tgt_pad is not None:
        mask = mask & padding_mask(tgt_pad)
    return mask


def cross_mask(src_pad: torch.Tensor | None, batch: int, n_tgt: int, n_src: int, device=None) -> torch.Tensor | None:
    """(B, T, S) for cross-attention: each target position sees every non-padding source position."""
    if src_pad is None:
        return None
    return padding_mask(src_pad).expand(batch, n_tgt, n_src)  # (B, T, S)


def additive(mask: torch.Tensor | None, shape: tuple[int, ...] | None = None,
             device: torch.device | str | None = None) -> torch.Tensor:
    """bool mask → float mask of 0 (allowed) and −∞ (masked), the M in softmax(QKᵀ/√d_k + M). No mask: zeros of
    `shape` on `device` (the model's: the trace moves them to the CPU with the rest)."""
    if mask is None:
        return torch.zeros(shape or (), device=device)
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    return out.masked_fill(~mask, float("-inf"))


def pad_from_ids(ids: torch.Tensor | None, pad_id: int | None, start: bool = False) -> torch.Tensor | None:
    """(batch, len) ids → (batch, len) bool True at padding, or None if nothing is padding.

    With `start`, column 0 is the decoder's start token and never padding, even where the start token is the
    pad token (MarianMT starts decoding from <pad>).
    """
    if ids is None or pad_id is None:
        return None
    pad = ids == pad_id
    if start:
        pad[:, 0] = False
    return pad if bool(pad.any()) else None
