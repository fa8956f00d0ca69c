"""The colour bar's value axis is drawn by bar_axis.py instead of pyqtgraph's layout pass: it must look exactly as
pyqtgraph draws it, for every range a step can bring, and leave alone the cases it does not draw."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from app.widgets.bar_axis import BarAxisItem
from scratchformer.plotdata import DIVERGING, SEQUENTIAL, Heatmap
from tests.app.conftest import shown_heatmap


def bar_pixels(w, lean: bool, monkeypatch) -> np.ndarray:
    monkeypatch.setattr(BarAxisItem, "lean", lean)
    axis = w.colorbar.axis
    axis.picture = None  # pyqtgraph's paint draws afresh, not a picture it kept
    axis.update()
    for _ in range(3):
        QApplication.processEvents()
    image = w.view.grab().toImage()
    ptr = image.constBits()
    return np.array(ptr, dtype=np.uint8).reshape(image.height(), image.bytesPerLine())[:, : image.width() * 4].copy()


@pytest.mark.parametrize("levels, colormap", [
    ((0.0, 1.0), SEQUENTIAL), ((-3.25, 7.5), DIVERGING), ((-0.004, 0.0035), DIVERGING),
    ((12000.0, 98000.0), SEQUENTIAL), ((-1e-7, 2e-7), DIVERGING), ((5.0, 5.0), SEQUENTIAL),
])
def test_the_bar_axis_looks_as_pyqtgraph_draws_it(qtbot, monkeypatch, levels, colormap):
    w = shown_heatmap(qtbot, 520, 360)
    values = np.linspace(levels[0], levels[1], 48, dtype=np.float32).reshape(6, 8)
    w.set_heatmap(Heatmap(values=values, row_labels=None, col_labels=None, row_dim="rows", col_dim="cols",
                          levels=levels, colormap=colormap, title="a map"))
    assert isinstance(w.colorbar.axis, BarAxisItem) and w.colorbar.axis._drawn_here()
    ours, theirs = bar_pixels(w, True, monkeypatch), bar_pixels(w, False, monkeypatch)
    np.testing.assert_array_equal(ours, theirs)
    assert len(w.colorbar.axis._tickLevels[0]) >= 1


def test_automatic_ticks_are_left_to_pyqtgraph(qtbot):
    w = shown_heatmap(qtbot, 520, 360)
    w.set_heatmap(Heatmap(values=np.eye(4, dtype=np.float32), row_labels=None, col_labels=None, row_dim="r",
                          col_dim="c", levels=(0.0, 1.0), colormap=SEQUENTIAL, title="eye"))
    axis = w.colorbar.axis
    axis.setTicks(None)  # pyqtgraph picks the ticks itself: its own paint draws them
    assert not axis._drawn_here()
