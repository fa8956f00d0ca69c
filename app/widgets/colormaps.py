"""Colour maps by name, in one place: the window and the exporters (app/export/) draw with the same tables.

plotdata names three maps: "viridis" (sequential), "RdBu_r" (diverging around 0) and "mask" (0 = may attend).
Cells that are not numbers on the map's scale (plotdata.special) get colours that none of the maps contains: a
mask's −∞ a neutral grey (MASKED_RGBA); NaN magenta, +∞ orange and any other −∞ cyan (a model whose numbers
broke); cells without data (gaps in the overview mosaic) are transparent.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyqtgraph as pg

from scratchformer.plotdata.special import GAP, MASKED, NAN, NEG_INF, POS_INF, cell_classes, heatmap_classes

MASKED_RGBA = (118, 118, 118, 255)  # −∞: "blocked", drawn the same on screen and in exports
NAN_RGBA = (255, 0, 255, 255)  # NaN: magenta
POS_INF_RGBA = (255, 140, 0, 255)  # +∞: orange
NEG_INF_RGBA = (0, 255, 255, 255)  # −∞ that no mask explains: cyan
GAP_RGBA = (0, 0, 0, 0)  # no data: transparent
SPECIAL_RGBA = {MASKED: MASKED_RGBA, NAN: NAN_RGBA, POS_INF: POS_INF_RGBA, NEG_INF: NEG_INF_RGBA, GAP: GAP_RGBA}

# ColorBrewer RdBu, reversed so that negative is blue and positive is red (matplotlib's "RdBu_r").
_RDBU_R = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
           "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"]  # fmt: skip
# Allowed mask cells are a pale blue; the map only ever sees 0, but a gradient keeps the colour bar readable.
_MASK = ["#e3eef9", "#9ecae1"]


@cache
def colormap(name: str) -> pg.ColorMap:
    """The pyqtgraph ColorMap for a plotdata colour-map name (unknown names fall back to viridis)."""
    if name == "RdBu_r":
        return pg.ColorMap(np.linspace(0.0, 1.0, len(_RDBU_R)), _RDBU_R, name="RdBu_r")
    if name == "mask":
        return pg.ColorMap(np.array([0.0, 1.0]), _MASK, name="mask")
    return pg.colormap.get("viridis")


@cache
def _lut(name: str) -> np.ndarray:
    lut = colormap(name).getLookupTable(0.0, 1.0, 256, alpha=True, mode="byte")
    lut = np.ascontiguousarray(lut, dtype=np.uint8)
    lut.setflags(write=False)
    return lut


def lookup_table(name: str) -> np.ndarray:
    """(256, 4) uint8 RGBA table of a colour map, low to high."""
    return _lut(name).copy()


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
    packed = np.ascontiguousarray(_lut(name)).view(np.uint32)[:, 0]  # (256,): one 4-byte RGBA word per level
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
