"""Display reduction: one value per block of cells when a map has more cells than the screen has pixels."""

from __future__ import annotations

import numpy as np

from .heatmap import DIVERGING

# A 512 × 2048 feed-forward map in a 570-pixel-wide plot has ~3.6 cells per pixel; drawing it whole costs colour
# mapping and scaling of 1 M cells per step, and the scaler then drops cells arbitrarily. Instead the screen gets
# one value per block of cells, chosen so that no stand-out cell can vanish: the block's maximum for sequential
# maps (a single bright attention weight stays bright), the value farthest from 0 for diverging maps (a strongly
# negative activation stays dark blue; a plain maximum would hide it). A mean would dilute exactly the cells one
# looks for. The hover read-out and the exporters keep reading Heatmap.values at full resolution.

MAX, EXTREME = "max", "extreme"


def display_reduction(colormap: str) -> str:
    """How blocks of cells are reduced for a colour map: EXTREME for diverging maps, MAX otherwise."""
    return EXTREME if colormap == DIVERGING else MAX


def display_blocks(shape: tuple[int, int], pixels: tuple[float, float]) -> tuple[int, int]:
    """Rows and columns of cells per displayed value so that a (rows, cols) grid needs at most `pixels`
    (height, width) values: ceil(cells / pixels), at least 1. Rounding up never leaves fewer pixels than values."""
    rows, cols = shape
    height, width = (max(float(p), 1.0) for p in pixels)
    return max(1, int(np.ceil(rows / height - 1e-9))), max(1, int(np.ceil(cols / width - 1e-9)))


def block_reduce(values: np.ndarray, block: tuple[int, int], mode: str = MAX) -> np.ndarray:
    """(rows, cols) → (ceil(rows / br), ceil(cols / bc)) float32, one value per block of br × bc cells (the last
    blocks may be partial). MAX: the largest value, ignoring NaN. EXTREME: the finite value farthest from 0 (its
    sign kept). Either way a block is −∞ only when it holds no finite value and some −∞ (masked) cell, and NaN
    only when every cell is NaN."""
    br, bc = block
    v = np.asarray(values, dtype=np.float32)
    if br <= 1 and bc <= 1:
        return np.ascontiguousarray(v)
    rows, cols = v.shape
    pr, pc = (-rows) % br, (-cols) % bc
    if pr or pc:
        v = np.pad(v, ((0, pr), (0, pc)), constant_values=np.nan)
    if mode == MAX:
        return _reduce_strided(v, br, bc, np.fmax)  # fmax skips NaN; −∞ loses to any finite value
    if mode != EXTREME:
        raise ValueError(f"unknown block reduction {mode!r}")
    neg_inf = np.isneginf(v)
    any_masked = _reduce_strided(neg_inf, br, bc, np.logical_or) if neg_inf.any() else None
    finite = np.where(neg_inf, np.float32(np.nan), v) if any_masked is not None else v
    hi = _reduce_strided(finite, br, bc, np.fmax)  # (R, C)
    lo = _reduce_strided(finite, br, bc, np.fmin)
    out = np.where(np.abs(lo) > np.abs(hi), lo, hi)  # NaN compares False: hi (NaN too when the block is)
    if any_masked is not None:
        out[np.isnan(out) & any_masked] = -np.inf
    return np.ascontiguousarray(out, dtype=np.float32)


def _reduce_strided(v: np.ndarray, br: int, bc: int, op: np.ufunc) -> np.ndarray:
    """Combine every br-th row and bc-th column with a binary ufunc: one pass per offset inside a block (numpy's
    reduce over a short inner axis of a 4-D view is several times slower)."""
    out = v[:, 0::bc].copy()  # (rows, C)
    for k in range(1, bc):
        op(out, v[:, k::bc], out=out)
    rows_out = out[0::br].copy()  # (R, C)
    for k in range(1, br):
        op(rows_out, out[k::br], out=rows_out)
    return rows_out
