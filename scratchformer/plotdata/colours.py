"""The colour maps' tables, in one place for every picture: the window, the exported figures and the page.

plotdata names three maps: "viridis" (sequential), "RdBu_r" (diverging around 0) and "mask" (0 = may attend).
Each becomes a (256, 4) uint8 RGBA table, low to high. viridis is the 256 colours of matplotlib's map (by Nathaniel
J. Smith, Stefan van der Walt and Eric Firing; CC0), as data; RdBu_r (ColorBrewer's RdBu, reversed so that negative
is blue) and the mask's pale blues are stops spread evenly over 0 … 1, the colours between them linear in RGB and
rounded down — the same bytes pyqtgraph's ColorMap makes of these stops, so the window and the files agree.
Pure numpy: the page and the exporters need no Qt to know a colour.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .special import GAP, MASKED, NAN, NEG_INF, POS_INF

# Cells that are not numbers on the map's scale (plotdata.special) get colours that none of the maps contains.
MASKED_RGBA = (118, 118, 118, 255)  # −∞ of a mask: "blocked", drawn the same on screen, in files and on the page
NAN_RGBA = (255, 0, 255, 255)  # NaN: magenta
POS_INF_RGBA = (255, 140, 0, 255)  # +∞: orange
NEG_INF_RGBA = (0, 255, 255, 255)  # −∞ that no mask explains: cyan
GAP_RGBA = (0, 0, 0, 0)  # no data: transparent
SPECIAL_RGBA = {MASKED: MASKED_RGBA, NAN: NAN_RGBA, POS_INF: POS_INF_RGBA, NEG_INF: NEG_INF_RGBA, GAP: GAP_RGBA}

RDBU_R = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
          "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"]  # fmt: skip
MASK_STOPS = ["#e3eef9", "#9ecae1"]  # allowed mask cells; the map only ever sees 0, a gradient keeps a bar readable

VIRIDIS_HEX = (  # 256 × "rrggbb"
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e6147106347116447136548146748166848176948186a481a6c"
    "481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a472d7b472e7c472f7d46307e"
    "46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85424086424186414287414487404588404688"
    "3f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b3b528b3a538b3a548c39558c39568c38588c38598c375a8c"
    "375b8d365c8d365d8d355e8d355f8d34608d34618d33628d33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e"
    "2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e"
    "277e8e277f8e27808e26818e26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d"
    "218f8d21908d21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88"
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad8128ae8029af7f"
    "2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc743fbc7340bd7242be7144bf70"
    "46c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc8635ec96260ca6063cb5f65cb5e67cc5c69cd5b"
    "6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d84d44b86d54989d5488bd6468ed64590d74393d74195d840"
    "98d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021"
    "c8e020cae11fcde11dd0e11cd2e21bd5e21ad8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61e"
    "f6e620f8e621fbe723fde725"
)

STOPS = {"RdBu_r": RDBU_R, "mask": MASK_STOPS}


def _rgb(stop: str) -> list[int]:
    return [int(stop[i:i + 2], 16) for i in (1, 3, 5)]


@cache
def _table(name: str) -> np.ndarray:
    if name in STOPS:
        rgb = np.array([_rgb(s) for s in STOPS[name]], dtype=np.float64)  # (stops, 3)
        at = np.linspace(0.0, 1.0, len(rgb))
        x = np.linspace(0.0, 1.0, 256)
        colours = np.floor(np.stack([np.interp(x, at, rgb[:, c]) for c in range(3)], axis=1))  # (256, 3)
    else:  # viridis, and any unknown name
        colours = np.frombuffer(bytes.fromhex(VIRIDIS_HEX), dtype=np.uint8).reshape(256, 3)
    table = np.empty((256, 4), dtype=np.uint8)
    table[:, :3] = colours
    table[:, 3] = 255
    table.setflags(write=False)
    return table


def table_hex(name: str) -> str:
    """A colour map's table as 256 × "rrggbb" (the page carries its maps' colours so)."""
    return colour_table(name)[:, :3].tobytes().hex()


def colour_table(name: str) -> np.ndarray:
    """(256, 4) uint8 RGBA table of a colour map by its plotdata name, low to high (read-only; unknown names:
    viridis)."""
    return _table(name if name in STOPS else "viridis")
