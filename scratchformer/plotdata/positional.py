"""Positional encoding: curves of chosen dimensions over position, and the position × dimension heatmap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..trace import Trace
from .heatmap import Heatmap, step_heatmap


@dataclass
class Curve:
    """One dimension of the positional encoding over position: a smooth line and the values actually added."""

    dim: int
    label: str  # "dim 4 (sin)"
    x: np.ndarray  # fine positions for the line
    y: np.ndarray
    x_points: np.ndarray  # integer positions 0 … n-1
    y_points: np.ndarray  # the encoding the model added there


def default_pe_dims(d_model: int) -> list[int]:
    """Two fast and two slower dimensions: 0, 1 and the sin/cos pair a quarter of the way in."""
    k = (d_model // 4) * 2
    return sorted({d for d in (0, 1, k, k + 1) if d < d_model})


def pe_curves(
    pe: np.ndarray, dims: Sequence[int], positional: str = "sinusoidal", samples: int = 8
) -> list[Curve]:
    """Curves of chosen dimensions of a (positions, d_model) encoding.

    For the paper's sinusoids the line is the formula at fractional positions (so short inputs still show the
    wave) and the points are the values the model added; for learned positions the line joins the points.
    """
    pe = np.asarray(pe, dtype=np.float32)
    n, d_model = pe.shape
    x_points = np.arange(n, dtype=np.float32)
    x_fine = np.linspace(0.0, max(n - 1, 1), max(2, (n - 1) * samples + 1), dtype=np.float64)
    curves = []
    for dim in dims:
        if not 0 <= dim < d_model:
            continue
        if positional in ("sinusoidal", "sinusoidal_halves"):
            n_sin = d_model - d_model // 2
            if positional == "sinusoidal":
                i2, is_sin = dim - dim % 2, dim % 2 == 0
            else:
                is_sin = dim < n_sin
                i2 = 2 * (dim if is_sin else dim - n_sin)
            angle = x_fine / np.power(10000.0, i2 / d_model)
            y = np.sin(angle) if is_sin else np.cos(angle)
            period = 2 * np.pi * 10000.0 ** (i2 / d_model)
            label = f"dim {dim} ({'sin' if is_sin else 'cos'}, period {period:.3g})"
            x = x_fine
        else:
            x, y, label = x_points.astype(np.float64), pe[:, dim].astype(np.float64), f"dim {dim}"
        xs, ys = x.astype(np.float32), y.astype(np.float32)
        curves.append(Curve(dim, label, xs, ys, x_points, pe[:, dim].copy()))
    return curves


def positional_heatmap(trace: Trace, stack: str = "src_embed") -> Heatmap | None:
    """position × dimension heatmap of the encoding that `stack` ("src_embed" or "tgt_embed") added."""
    step = trace.find(f"{stack}.positional_encoding")
    if step is None:
        return None
    hm = step_heatmap(trace, step)
    side = "source" if stack == "src_embed" else "target"
    n_pos, d_model = step.shape
    hm.title = f"Positional encoding added to the {side} ({n_pos} positions × {d_model} dimensions)"
    return hm
