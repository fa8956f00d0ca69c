"""Colour maps by name, in one place: the window and the exporters (app/export/) draw with the same tables.

plotdata names three maps: "viridis" (sequential), "RdBu_r" (diverging around 0) and "mask" (0 = may attend).
Cells that are not numbers on the map's scale (plotdata.special) get colours that none of the maps contains: a
mask's −∞ a neutral grey (MASKED_RGBA); NaN magenta, +∞ orange and any other −∞ cyan (a model whose numbers
broke); cells without data (gaps in the overview mosaic) are transparent.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from scratchformer.plotdata.colours import (  # noqa: F401 — the special colours are re-exported for the views
    GAP_RGBA,
    MASKED_RGBA,
    NAN_RGBA,
    NEG_INF_RGBA,
    POS_INF_RGBA,
    SPECIAL_RGBA,
    colour_table,
)
from scratchformer.plotdata.special import cell_classes, heatmap_classes


@cache
def colormap(name: str):
    """The pyqtgraph ColorMap (for colour bars) of a plotdata colour-map name: the 256 colours of its table
    (scratchformer.plotdata.colours), so bar and cells agree. pyqtgraph loads here, not with this module: the
    exporters draw from the tables alone."""
    import pyqtgraph as pg

    table = colour_table(name)
    return pg.ColorMap(np.linspace(0.0, 1.0, 256), table, name=name)


def lookup_table(name: str) -> np.ndarray:
    """(256, 4) uint8 RGBA table of a colour map, low to high."""
    return colour_table(name).copy()


def rgba_image(values: np.ndarray, levels: tuple[float, float], name: str, classes: np.ndarray | None = None
               ) -> np.ndarray:  # fmt: skip
    """(rows, cols) float values → (rows, cols, 4) uint8 RGBA: the colour map over `levels`, and the special
    cells in SPECIAL_RGBA by their plotdata.special `classes` (without classes: every −∞ is a mask's, NaN is
    NaN). Exporters call this too, so files match the screen pixel for pixel."""
    v = np.asarray(values, dtype=np.float32)
    lo, hi = float(levels[0]), float(levels[1])
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        idx = (v - np.float32(lo)) * np.float32(scale)
    np.nan_to_num(idx, copy=False, nan=0.0, posinf=255.0, neginf=0.0)
    np.clip(idx, 0.0, 255.0, out=idx)
    packed = np.ascontiguousarray(colour_table(name)).view(np.uint32)[:, 0]  # (256,): one 4-byte RGBA word per level
    rgba = packed[idx.astype(np.uint8)].view(np.uint8).reshape(*v.shape, 4)  # one gather of words, not of bytes
    if classes is None and not np.isfinite(v).all():
        classes = cell_classes(v, masked=np.isneginf(v))
    if classes is not None:
        for code, colour in SPECIAL_RGBA.items():
            where = classes == code
            if where.any():
                rgba[where] = colour
    return rgba


def heatmap_rgba(heatmap) -> np.ndarray:
    """rgba_image of a scratchformer.plotdata.Heatmap, its special cells classified (plotdata.special)."""
    return rgba_image(heatmap.values, heatmap.levels, heatmap.colormap, heatmap_classes(heatmap))


def swatch_css(code: int) -> str:
    """A style for an inline swatch of a special cell's colour (legends in rich text)."""
    r, g, b, _ = SPECIAL_RGBA[code]
    return f"background: rgb({r},{g},{b}); border: 1px solid #888;"
