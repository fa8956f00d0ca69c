"""Positional encoding: curves of chosen dimensions over position, the position × dimension heatmap, the
position × position similarity PE·PEᵀ and the wavelength of every dimension."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..recording.trace import Trace
from .heatmap import SEQUENTIAL, Heatmap, levels_for, step_heatmap


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


SINUSOIDAL = ("sinusoidal", "sinusoidal_halves")


def pe_similarity(
    pe: np.ndarray, positional: str = "sinusoidal", labels: Sequence[str] | None = None, pos_dim: str = "position"
) -> Heatmap:
    """PE·PEᵀ: the dot product of every two positions' encodings, a (positions × positions) map.

    For the paper's sinusoids PE(p)·PE(q) = Σ_i cos((p − q)·ω_i) depends only on the distance p − q: it peaks on
    the diagonal (d_model/2, a position with itself) and falls off as positions move apart, so nearby positions
    look alike and far ones less so — the model can read relative position from a dot product, which is what
    attention computes. Learned position vectors (BERT) show whatever similarity training gave them.
    """
    pe = np.asarray(pe, dtype=np.float64)  # (positions, d_model); float64 so the diagonal is exact
    n, d_model = pe.shape
    values = np.ascontiguousarray(pe @ pe.T, dtype=np.float32)  # (positions, positions)
    levels, cmap = levels_for(values, "similarity")
    row_labels = list(labels[:n]) if labels is not None else [str(i) for i in range(n)]
    row_labels += [str(i) for i in range(len(row_labels), n)]
    if positional in SINUSOIDAL:
        title = ("PE·PEᵀ: dot product of every two positions' encodings — largest on the diagonal, "
                 "falling off with distance")
        formula = "PE(p)·PE(q) = Σ_i cos((p − q)·ω_i),  ω_i = 1/10000^(2i/d_model): depends only on p − q"
    else:
        title = "PE·PEᵀ: dot product of every two learned position vectors"
        formula = "P[p]·P[q]"
    return Heatmap(
        values=values, row_labels=row_labels, col_labels=list(row_labels), row_dim=pos_dim, col_dim=pos_dim,
        levels=levels, colormap=cmap, title=title,
        subtitle=f"{n} positions × {n} positions, d_model {d_model}; diagonal = |PE(p)|²",
        formula=formula, extra={"kind": "pe_similarity"},
    )


def pe_wavelengths(d_model: int, positional: str = "sinusoidal") -> np.ndarray:
    """Wavelength (in positions) of every dimension of the sinusoidal encoding: 2π·10000^(2i/d_model) for the
    pair i that dimension belongs to, from 2π (dimensions 0 and 1) up to nearly 2π·10000. Interleaved (the
    paper): dimensions 2i and 2i+1; "halves" (Marian): dimension i and ⌈d/2⌉ + i. Empty for learned positions
    and for none: they have no wavelength."""
    if positional not in SINUSOIDAL or d_model < 1:
        return np.zeros(0, dtype=np.float64)
    dims = np.arange(d_model)
    if positional == "sinusoidal":
        two_i = dims - dims % 2
    else:
        n_sin = d_model - d_model // 2
        two_i = 2 * np.where(dims < n_sin, dims, dims - n_sin)
    return 2 * np.pi * np.power(10000.0, two_i / d_model)  # (d_model,)


def pe_wavelength_heatmap(d_model: int, positional: str = "sinusoidal") -> Heatmap | None:
    """The wavelengths as a one-row map (dimension across) for the exporters: log₁₀ of the wavelength, so the
    colours follow the plot's log axis; the wavelengths themselves are in extra["wavelengths"]."""
    wl = pe_wavelengths(d_model, positional)
    if wl.size == 0:
        return None
    values = np.ascontiguousarray(np.log10(wl)[None, :], dtype=np.float32)  # (1, d_model)
    layout = "sin/cos interleaved" if positional == "sinusoidal" else "sines first, then cosines"
    return Heatmap(
        values=values, row_labels=["log₁₀ λ"], col_labels=[str(i) for i in range(d_model)],
        row_dim="row", col_dim="d_model", levels=(float(values.min()), float(values.max())), colormap=SEQUENTIAL,
        title="Wavelength of every dimension of the positional encoding (log₁₀ of positions)",
        subtitle=f"d_model {d_model}, {layout}; from 2π ≈ 6.3 to {wl.max():,.0f} positions",
        formula="λ_i = 2π·10000^(2i/d_model)", extra={"kind": "pe_wavelengths", "wavelengths": wl},
    )
