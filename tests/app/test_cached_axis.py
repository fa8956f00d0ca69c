"""A heatmap's axes keep the drawings of their last tick sets (app/widgets/cached_axis.py): a map shown again is
drawn from a kept drawing, and what is on screen is always what drawing its ticks afresh would show."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from app.widgets.cached_axis import CachedAxisItem
from app.widgets.heatmap import HeatmapWidget
from scratchformer.plotdata import SEQUENTIAL, Heatmap
from tests.app.conftest import shown_heatmap


def token_map(words: list[str], cols: int) -> Heatmap:
    values = np.linspace(0, 1, len(words) * cols, dtype=np.float32).reshape(len(words), cols)
    return Heatmap(values=values, row_labels=words, col_labels=None, row_dim="src_pos", col_dim="d_model",
                   levels=(0.0, 1.0), colormap=SEQUENTIAL, title=f"{len(words)} × {cols}")


A = token_map(["the", "girl", "eats", "an", "apple"], 12)
B = token_map(["machine", "learning", "using", "PyTorch"], 30)


def make(qtbot) -> HeatmapWidget:
    return shown_heatmap(qtbot, 520, 360)


def pixels(w: HeatmapWidget) -> np.ndarray:
    for _ in range(3):  # the first map builds the colour bar: let the layout settle
        QApplication.processEvents()
    image = w.grab().toImage()
    ptr = image.constBits()
    return np.array(ptr, dtype=np.uint8).reshape(image.height(), image.bytesPerLine())[:, : image.width() * 4].copy()


@pytest.mark.parametrize("order", [[A, B, A], [B, A, B, A]])
def test_a_map_shown_again_looks_as_when_first_drawn(qtbot, order):
    w = make(qtbot)
    assert isinstance(w.plot.getAxis("left"), CachedAxisItem)
    first_seen = {}
    for hm in order:
        w.set_heatmap(hm)
        shot = pixels(w)
        if hm.title in first_seen:
            np.testing.assert_array_equal(shot, first_seen[hm.title])
        else:
            first_seen[hm.title] = shot
    assert not np.array_equal(first_seen[A.title], first_seen[B.title])
    fresh = make(qtbot)  # and a widget that only ever drew the last map draws it the same
    fresh.set_heatmap(order[-1])
    np.testing.assert_array_equal(pixels(fresh), first_seen[order[-1].title])


def test_the_kept_drawing_is_reused_not_drawn_again(qtbot, monkeypatch):
    w = make(qtbot)
    left = w.plot.getAxis("left")
    for hm in (A, B):
        w.set_heatmap(hm)
        pixels(w)
    drawn = []
    real = CachedAxisItem.generateDrawSpecs
    monkeypatch.setattr(CachedAxisItem, "generateDrawSpecs", lambda self, p: drawn.append(self) or real(self, p))
    w.set_heatmap(A)
    pixels(w)
    assert left not in drawn  # A's token axis came from the kept drawing
    assert [tick for _, tick in left._tickLevels[0]] == ["the", "girl", "eats", "an", "apple"]
