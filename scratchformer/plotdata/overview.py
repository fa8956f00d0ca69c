"""The layers × heads overview: every head's attention weights of one type as one mosaic image."""

from __future__ import annotations

import numpy as np
import torch

from ..recording.trace import Trace
from .heatmap import SEQUENTIAL, Heatmap, head_count
from .masks import ATTENTION_TITLES


def _shrink(m: np.ndarray, tile: int) -> np.ndarray:
    """Block-mean a matrix down to at most tile × tile cells (small matrices are kept as they are). A block
    holding a NaN weight is NaN: a broken head must not look like a healthy one."""
    rows, cols = m.shape
    fr, fc = -(-rows // tile), -(-cols // tile)  # ceil
    if fr == 1 and fc == 1:
        return m
    pr, pc = (-rows) % fr, (-cols) % fc
    padded = np.pad(m, ((0, pr), (0, pc)), constant_values=np.nan)  # the padding is left out of the means
    blocks = padded.reshape(padded.shape[0] // fr, fr, padded.shape[1] // fc, fc)
    with np.errstate(invalid="ignore"):
        means = np.nanmean(blocks, axis=(1, 3))
    if np.isnan(m).any():
        broken = np.pad(np.isnan(m), ((0, pr), (0, pc))).reshape(blocks.shape).any(axis=(1, 3))
        means[broken] = np.nan
    return means


def overview_mosaic(trace: Trace, attention_type: str, batch: int = 0, tile: int = 48) -> Heatmap | None:
    """All layers × heads attention weights of one type as one mosaic image (rows = layers, columns = heads).

    Each map is block-averaged to at most `tile` cells a side; tiles are separated by one empty cell (NaN, marked
    in `gaps` and drawn transparent). extra holds what overview_cell() needs to map a clicked cell back to
    (layer, head).
    """
    stack, kind = attention_type.split(".")
    steps = [s for s in trace if s.attention_type == attention_type and s.kind == "attention_weights"]
    if not steps:
        return None
    steps.sort(key=lambda s: s.layer or 0)
    n_heads = head_count(steps[0])
    tiles = []
    for s in steps:
        b = min(batch, s.shape[0] - 1)
        w = s.item(b).to(torch.float32).numpy()  # (h, Tq, Tk)
        tiles.append([_shrink(w[h], tile) for h in range(n_heads)])
    th = max(t.shape[0] for row in tiles for t in row)
    tw = max(t.shape[1] for row in tiles for t in row)
    gap = 1
    mosaic = np.full((len(steps) * (th + gap) - gap, n_heads * (tw + gap) - gap), np.nan, dtype=np.float32)
    gaps = np.ones(mosaic.shape, dtype=bool)
    for li, row in enumerate(tiles):
        for h, t in enumerate(row):
            r0, c0 = li * (th + gap), h * (tw + gap)
            mosaic[r0 : r0 + t.shape[0], c0 : c0 + t.shape[1]] = t
            gaps[r0 : r0 + t.shape[0], c0 : c0 + t.shape[1]] = False
    title = f"{ATTENTION_TITLES.get(attention_type, attention_type)}: {len(steps)} layers × {n_heads} heads"
    return Heatmap(
        values=np.ascontiguousarray(mosaic),
        row_labels=[f"Layer {s.layer + 1}" for s in steps],
        col_labels=[f"Head {h + 1}" for h in range(n_heads)],
        row_dim="layer", col_dim="head", levels=(0.0, 1.0), colormap=SEQUENTIAL, title=title,
        subtitle=f"batch item {batch + 1}; each tile is one head's weights (queries down, keys across)",
        formula="softmax(QKᵀ/√d_k + M)",
        extra={"tile_rows": th, "tile_cols": tw, "gap": gap, "layers": [s.layer for s in steps],
               "steps": [s.name for s in steps], "heads": n_heads},
        gaps=gaps,
    )


def overview_cell(mosaic: Heatmap, row: float, col: float) -> tuple[int, int] | None:
    """(layer index in the mosaic, head) under a mosaic cell, or None on a gap or outside."""
    e = mosaic.extra
    r, c = int(np.floor(row)), int(np.floor(col))
    if r < 0 or c < 0 or r >= mosaic.values.shape[0] or c >= mosaic.values.shape[1]:
        return None
    li, ri = divmod(r, e["tile_rows"] + e["gap"])
    h, ci = divmod(c, e["tile_cols"] + e["gap"])
    if ri >= e["tile_rows"] or ci >= e["tile_cols"]:
        return None
    return li, h


def overview_tick_positions(mosaic: Heatmap) -> tuple[list[float], list[float]]:
    """Centre of each tile along rows and columns, for axis labels."""
    e = mosaic.extra
    rows = [i * (e["tile_rows"] + e["gap"]) + (e["tile_rows"] - 1) / 2 for i in range(len(e["layers"]))]
    cols = [h * (e["tile_cols"] + e["gap"]) + (e["tile_cols"] - 1) / 2 for h in range(e["heads"])]
    return rows, cols
