"""Cells that are not ordinary numbers, classified once for the window and the exporters alike.

A heatmap cell is one of: a finite number (drawn by the colour map); −∞ that a mask put there on purpose
(`Heatmap.masked`, drawn grey); NaN, +∞, or −∞ that no mask explains — trouble, each drawn in a colour of its own
that no colour map uses, so a broken model's numbers show where they break; or a gap, a cell that holds no data
(the space between the overview's tiles, `Heatmap.gaps`), drawn empty. The codes are ordered so that the larger
wins when a block of cells is drawn as one pixel: trouble is never hidden by its finite neighbours, and a finite
value shows over masked cells, as block_reduce does.
"""

from __future__ import annotations

import numpy as np

GAP, MASKED, FINITE, NEG_INF, POS_INF, NAN = 0, 1, 2, 3, 4, 5
TROUBLE = (NAN, POS_INF, NEG_INF)

# What a legend says for each class, in the order legends list them.
LEGEND_TEXT = {
    NAN: "NaN",
    POS_INF: "+∞",
    NEG_INF: "−∞ (not a mask)",
    MASKED: "−∞ masked",
}


def cell_classes(values: np.ndarray, masked: np.ndarray | None = None, gaps: np.ndarray | None = None
                 ) -> np.ndarray | None:  # fmt: skip
    """(rows, cols) values → (rows, cols) uint8 class codes, or None when every cell is a finite number (the
    usual case, one pass). `masked`: True where −∞ is a mask's (None: no cell is); `gaps`: True where a cell
    holds no data (its NaN is not trouble)."""
    v = np.asarray(values)
    if gaps is None and bool(np.isfinite(v).all()):
        return None
    out = np.full(v.shape, FINITE, dtype=np.uint8)
    neg = np.isneginf(v)
    out[neg] = NEG_INF
    if masked is not None:
        out[neg & np.asarray(masked, dtype=bool)] = MASKED
    out[np.isposinf(v)] = POS_INF
    out[np.isnan(v)] = NAN
    if gaps is not None:
        out[np.asarray(gaps, dtype=bool)] = GAP
    return out


def heatmap_classes(hm) -> np.ndarray | None:
    """cell_classes of a Heatmap (its values, masked and gaps)."""
    return cell_classes(hm.values, hm.masked, hm.gaps)


def reduce_classes(classes: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """(rows, cols) codes → one code per block of br × bc cells (the last blocks may be partial), the largest:
    a block with any NaN is drawn NaN, one with a finite value and masked cells is drawn by its value."""
    br, bc = block
    if br <= 1 and bc <= 1:
        return classes
    rows, cols = classes.shape
    padded = np.pad(classes, ((0, (-rows) % br), (0, (-cols) % bc)), constant_values=GAP)
    return padded.reshape(padded.shape[0] // br, br, padded.shape[1] // bc, bc).max(axis=(1, 3))


def trouble_count(classes: np.ndarray | None) -> int:
    """How many cells hold NaN or ±∞ that no mask explains."""
    return 0 if classes is None else int((classes >= NEG_INF).sum())


def legend_entries(classes: np.ndarray | None) -> list[tuple[int, str]]:
    """(class, words) for each special class present — NaN, +∞, −∞ not from a mask, masked −∞ — in that order;
    [] when all cells are finite numbers or gaps."""
    if classes is None:
        return []
    present = set(np.flatnonzero(np.bincount(classes.ravel(), minlength=NAN + 1)).tolist())  # one pass, no sort
    return [(code, text) for code, text in LEGEND_TEXT.items() if code in present]
