"""The heatmap widget draws big maps block-reduced to its pixel size, yet reads out and exports full resolution."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from app.widgets.colormaps import rgba_image
from app.widgets.heatmap import HeatmapWidget, ImageCache
from scratchformer.plotdata import SEQUENTIAL, Heatmap, block_reduce, format_value
from scratchformer.plotdata.heatmap import cell_label


def ffn_hidden_map(values: np.ndarray) -> Heatmap:
    rows, cols = values.shape
    return Heatmap(
        values=values, row_labels=[f" tok{i}" for i in range(rows)], col_labels=[f"unit{j}" for j in range(cols)],
        row_dim="src_pos", col_dim="d_ff", levels=(0.0, 1.0), colormap=SEQUENTIAL, title="Feed-forward hidden",
    )


@pytest.fixture
def widget(qtbot):
    w = HeatmapWidget()
    w.image_cache = ImageCache()
    qtbot.addWidget(w)
    w.resize(800, 500)  # a plot of ~700 × 450 pixels: 2048 columns cannot each get one
    w.show()
    qtbot.waitExposed(w)
    return w


def settle(qtbot, widget):
    """Drawn, at the plot's final size: the title line takes its height a turn or more after the first draw (more
    on a loaded machine), and the display block follows the size, so wait until the plot's size has held still
    over several turns and the map is drawn for it."""
    seen = []

    def still():
        seen.append(widget.plot.getViewBox().sceneBoundingRect().size().toTuple())
        return len(seen) >= 4 and len(set(seen[-4:])) == 1 and widget.is_drawn()

    qtbot.waitUntil(widget.is_drawn, timeout=5000)  # a map this large draws on a coming turn (draw_queue.py)
    qtbot.waitUntil(still, timeout=5000)


def pixel_and_cell(widget, row, col):
    """The viewport pixel nearest to cell (row, col) and the cell that pixel really lies on (a pixel spans
    several cells of a reduced map)."""
    vb = widget.plot.getViewBox()
    pos = widget.view.mapFromScene(vb.mapViewToScene(QPointF(col, row)))
    return pos, widget.cell_at(widget.view.mapToScene(pos))


def hover(qtbot, widget, pos):
    qtbot.mouseMove(widget.view.viewport(), pos)
    qtbot.waitUntil(lambda: widget._last_cell is not None, timeout=2000)


def test_a_reduced_map_keeps_the_maximum_of_each_block(qtbot, widget):
    rng = np.random.default_rng(0)
    values = rng.uniform(0.0, 0.5, (512, 2048)).astype(np.float32)
    values[300, 1234] = 0.97  # one bright cell
    widget.set_heatmap(ffn_hidden_map(values), key=("ffn", 0, 0))
    settle(qtbot, widget)
    br, bc = widget.display_block
    assert bc > 1  # reduced: fewer image columns than cells
    assert f"a pixel shows the maximum of {br} × {bc} cells" in widget.readout.text()
    shown = widget.image.image
    assert shown.shape[:2] == (-(-512 // br), -(-2048 // bc))
    # every displayed pixel has the colour of its block's maximum, so the bright cell stays bright
    want = rgba_image(block_reduce(values, (br, bc), "max"), (0.0, 1.0), SEQUENTIAL)
    np.testing.assert_array_equal(shown, want)
    bright = rgba_image(np.float32([[0.97]]), (0, 1), "viridis")[0, 0]
    np.testing.assert_array_equal(shown[300 // br, 1234 // bc], bright)
    # the image covers the cells it stands for: block (i, j) spans cells i·br … and j·bc …
    rect = widget.image.mapRectToParent(widget.image.boundingRect())
    assert rect.left() == -0.5 and rect.width() == shown.shape[1] * bc


def test_hover_on_a_reduced_map_reports_the_exact_cell_and_labels(qtbot, widget):
    rng = np.random.default_rng(1)
    values = rng.uniform(0.0, 1.0, (512, 2048)).astype(np.float32)
    widget.set_heatmap(ffn_hidden_map(values), key=("ffn", 0, 0))
    settle(qtbot, widget)
    br, bc = widget.display_block
    assert bc > 1
    pos, (row, col) = pixel_and_cell(widget, 257, 1200)
    # make that cell not its block's maximum: the screen shows the maximum, the read-out must show the cell
    c0 = col // bc * bc
    values = values.copy()
    values[row, c0 : c0 + bc] = 0.25
    values[row, c0 + (col - c0 + 1) % bc] = 0.75
    values[row, col] = 0.125
    widget.set_heatmap(ffn_hidden_map(values), reset_view=False, key=("ffn", 0, 1))
    qtbot.waitUntil(widget.is_drawn, timeout=5000)  # a map this large draws on a coming turn (draw_queue.py)
    bright = rgba_image(np.float32([[0.75]]), (0, 1), "viridis")[0, 0]
    assert widget.image.image[row // br, col // bc].tolist() == bright.tolist()
    hover(qtbot, widget, pos)
    assert widget._last_cell == (row, col)
    text = widget.readout.text()
    assert text.endswith(f"=  {format_value(0.125)}")
    assert f"' tok{row}' (src_pos {row})" in text and f"'unit{col}' (d_ff {col})" in text


def test_zooming_in_draws_full_resolution_and_revisits_come_from_the_cache(qtbot, widget, monkeypatch):
    values = np.random.default_rng(2).uniform(0, 1, (512, 2048)).astype(np.float32)
    hm = ffn_hidden_map(values)
    widget.set_heatmap(hm, key=("ffn", 0, 0))
    settle(qtbot, widget)
    reduced = widget.display_block
    assert reduced != (1, 1)
    widget.plot.getViewBox().setRange(xRange=(99.5, 199.5), yRange=(9.5, 59.5), padding=0.0)
    qtbot.waitUntil(lambda: widget.display_block == (1, 1), timeout=2000)
    np.testing.assert_array_equal(widget.image.image, rgba_image(values, (0, 1), SEQUENTIAL))
    widget.reset_zoom()
    assert widget.display_block == reduced
    assert widget.image_cache.get((("ffn", 0, 0), (1, 1))) is not None
    cached = widget.image_cache.get((("ffn", 0, 0), reduced))
    widget.set_heatmap(None)

    def no_recompute(*args, **kwargs):
        raise AssertionError("the image of a key seen before was computed again")

    monkeypatch.setattr("app.widgets.heatmap.block_reduce", no_recompute)
    widget.set_heatmap(hm, key=("ffn", 0, 0))
    qtbot.waitUntil(widget.is_drawn, timeout=5000)
    np.testing.assert_array_equal(widget.image.image, cached)


def test_image_cache_keeps_to_its_byte_budget():
    cache = ImageCache(max_bytes=3000)
    for i in range(5):
        cache.put(i, np.zeros(1000, np.uint8))
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) is not None
    cache.clear()
    assert len(cache) == 0


def test_a_small_map_is_drawn_cell_for_cell(qtbot, widget):
    values = np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    widget.set_heatmap(ffn_hidden_map(values))
    assert widget.display_block == (1, 1)
    np.testing.assert_array_equal(widget.image.image, rgba_image(values, (0, 1), SEQUENTIAL))


def test_a_reduced_map_writes_no_values_and_a_zoomed_in_one_does(qtbot, widget):
    values = np.random.default_rng(3).uniform(0, 1, (512, 2048)).astype(np.float32)
    widget.set_heatmap(ffn_hidden_map(values), key=("ffn", 0, 0))
    settle(qtbot, widget)
    assert widget.display_block != (1, 1)
    assert widget.cell_texts_shown() == 0 and not widget.values_item.isVisible()
    widget.plot.getViewBox().setRange(xRange=(99.5, 107.5), yRange=(9.5, 15.5), padding=0.0)
    qtbot.waitUntil(lambda: widget.cell_texts_shown() > 0, timeout=2000)
    texts = {(r, c): text for r, c, text, _ in widget.cell_texts()}
    assert texts[(10, 100)] == cell_label(values[10, 100]) and len(texts) <= 8 * 6 + 8 + 6 + 1


def test_a_hidden_plot_keeps_the_size_it_had_when_shown_for_images_made_ahead(qtbot, widget):
    """The Step view hides the map behind a token table (squeezing it first) and meanwhile makes the next maps'
    images ahead: they are made for the plot's size when shown, which it has again when the map comes back."""
    from PySide6.QtWidgets import QApplication

    widget.set_heatmap(ffn_hidden_map(np.zeros((512, 512), dtype=np.float32)))
    qtbot.waitUntil(widget.is_drawn, timeout=5000)
    QApplication.processEvents()
    shown = widget._plot_pixels()
    assert min(shown) > 300
    widget.resize(800, 80)  # squeezed, then hidden
    QApplication.processEvents()
    widget.hide()
    assert widget._plot_pixels() == shown
    widget.resize(800, 500)
    widget.show()
    qtbot.waitExposed(widget)
    QApplication.processEvents()
    assert widget._plot_pixels() == shown
