"""Small tensors read as numbers: values inside the cells (window and exports), the token-id table, rows that are
not stretched over the whole plot, and head / overview thumbnails that use the space they have."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from app.export.render import render_bytes
from app.views.heads_view import HeadsView, grid_shape
from app.views.overview_view import OverviewView
from app.views.step_view import StepView
from app.widgets.colormaps import MASKED_RGBA, lookup_table
from app.widgets.heatmap import MAX_CELL_W, MAX_VALUE_TEXTS, MIN_ROW_PX, HeatmapWidget
from scratchformer.exporting.figure import single_figure
from scratchformer.plotdata import DIVERGING, SEQUENTIAL, Heatmap
from scratchformer.plotdata.heatmap import (
    DARK_TEXT,
    LIGHT_TEXT,
    cell_label,
    cell_labels,
    dark_text_on,
    text_colour_for,
)
from tests.app.conftest import run_and_wait, shown_heatmap

WALKTHROUGH = Path(__file__).resolve().parents[2] / "data" / "samples" / "walkthrough.txt"
SVG = "{http://www.w3.org/2000/svg}"


def synthetic(values, cmap=SEQUENTIAL, levels=(0.0, 1.0)) -> Heatmap:
    values = np.ascontiguousarray(values, dtype=np.float32)
    masked = np.isneginf(values)
    return Heatmap(values=values, row_labels=None, col_labels=None, row_dim="row", col_dim="col", levels=levels,
                   colormap=cmap, title="synthetic", masked=masked if masked.any() else None)  # fmt: skip


@pytest.fixture
def widget(qtbot):
    return shown_heatmap(qtbot, 800, 500)


def settle(qtbot, ms=30):
    qtbot.wait(ms)  # layout requests and resizes are posted events


def show(window, cls):
    i = next(i for i, v in enumerate(window.views) if isinstance(v, cls))
    window.tabs.setCurrentIndex(i)
    return window.views[i]


# ---- the labels and their colours (pure) --------------------------------------------------------------------


def test_cell_labels_are_compact():
    assert [cell_label(v) for v in (0.42, -1.3, 12.0, 0.16666, 1234.4, 2.5e-5, -0.0)] == [
        "0.42", "-1.3", "12", "0.167", "1234", "2.5e-5", "0"]  # fmt: skip
    assert cell_label(float("-inf")) == "−∞" and cell_label(float("inf")) == "∞" and cell_label(float("nan")) == "NaN"
    gaps = np.array([[False, True]])  # a cell that holds no data (between the overview's tiles) stays empty
    assert cell_labels(np.float32([[np.nan, np.nan]]), gaps=gaps) == [["NaN", ""]]
    assert cell_labels(np.float32([[50256, 4673], [354, -np.inf]])) == [["50256", "4673"], ["354", "−∞"]]
    assert cell_labels(np.float32([[0.5, 2.0]])) == [["0.5", "2"]]


def test_text_is_white_on_the_darkest_viridis_cell_and_dark_on_the_brightest():
    lut = lookup_table(SEQUENTIAL)
    assert text_colour_for(lut[0]) == LIGHT_TEXT and text_colour_for(lut[-1]) == DARK_TEXT
    rdbu = lookup_table(DIVERGING)  # both ends of the diverging map are dark, its middle is near white
    assert text_colour_for(rdbu[0]) == LIGHT_TEXT and text_colour_for(rdbu[128]) == DARK_TEXT
    assert text_colour_for(rdbu[-1]) == LIGHT_TEXT
    assert dark_text_on(np.array([MASKED_RGBA, (0, 0, 0, 0)], np.uint8)).tolist() == [True, True]  # grey; clear


# ---- values in the window -----------------------------------------------------------------------------------


def test_a_small_attention_map_shows_every_value_in_its_cell(qtbot, make_window):
    w = make_window(source=WALKTHROUGH.read_text(encoding="utf-8"), target="")
    w.set_windows((10, 4))  # the walkthrough: 4 windows of 10 tokens
    w.resize(1400, 900)
    run_and_wait(qtbot, w)
    w.go_to_step("encoder.0.self_attn.weights")
    view = show(w, StepView)
    settle(qtbot)
    hm = view.heatmap
    assert hm.heatmap.shape == (10, 10)
    assert hm.cell_texts_shown() == 100
    values = w.current_trace()["encoder.0.self_attn.weights"].tensor[0, 0].numpy()
    for row, col, text, _dark in hm.cell_texts():
        assert text == f"{values[row, col]:.3f}"  # probabilities: fixed 3 decimals, as the tutorials print them
    # the attention weights here are all ~0.1: dark cells, white text
    assert all(not dark for *_, dark in hm.cell_texts())


def test_masked_cells_read_minus_infinity_and_colours_follow_the_cells(qtbot, widget):
    values = np.float32([[0.0, 1.0], [-np.inf, 0.5]])
    widget.set_heatmap(synthetic(values))
    settle(qtbot)
    texts = {(r, c): (t, dark) for r, c, t, dark in widget.cell_texts()}
    assert texts[(0, 0)] == ("0.000", False)  # darkest viridis: white text
    assert texts[(0, 1)] == ("1.000", True)  # brightest (yellow): dark text
    assert texts[(1, 0)][0] == "−∞"


def test_a_large_map_draws_no_values_until_zoomed_in(qtbot, widget):
    values = np.random.default_rng(0).uniform(0, 1, (300, 300)).astype(np.float32)
    widget.set_heatmap(synthetic(values))
    settle(qtbot)
    assert widget.cell_texts_shown() == 0 and not widget.values_item.isVisible()
    widget.plot.getViewBox().setRange(xRange=(99.5, 109.5), yRange=(19.5, 27.5), padding=0.0)
    settle(qtbot)
    shown = widget.cell_texts()
    assert 0 < len(shown) <= MAX_VALUE_TEXTS
    assert {(r, c) for r, c, *_ in shown} >= {(20, 100), (27, 109)}
    assert all(text == cell_label(values[r, c], decimals=3) for r, c, text, _ in shown)
    widget.reset_zoom()
    settle(qtbot)
    assert widget.cell_texts_shown() == 0


def test_compact_thumbnails_need_larger_cells(qtbot):
    small = HeatmapWidget(compact=True, ticks=False, colorbar=False, square=True)
    qtbot.addWidget(small)
    small.resize(220, 220)
    small.show()
    qtbot.waitExposed(small)
    small.set_heatmap(synthetic(np.full((6, 6), 0.5)))
    settle(qtbot)
    assert small.cell_texts_shown() == 0  # ~35 px cells: a thumbnail stays a picture
    small.resize(400, 400)
    settle(qtbot)
    assert small.cell_texts_shown() == 36


# ---- rows and columns keep a readable size ------------------------------------------------------------------


def test_a_one_row_map_is_not_stretched_over_the_plot(qtbot, widget):
    widget.set_heatmap(synthetic(np.linspace(0, 1, 6)[None, :]))
    settle(qtbot)
    rect = widget.map_rect()
    cell_w = rect.width() / 6
    assert rect.height() <= max(MIN_ROW_PX, cell_w) + 1
    assert rect.height() < 0.35 * widget.height()
    assert rect.top() < 0.2 * widget.height()  # at the top, under the title
    widget.set_heatmap(synthetic([[0.5]]))  # one cell: neither a full-width bar nor a full-height one
    settle(qtbot)
    rect = widget.map_rect()
    assert rect.width() <= MAX_CELL_W + 1 and rect.height() <= MAX_CELL_W + 1
    widget.set_heatmap(synthetic(np.zeros((400, 400))))  # big maps still fill the plot
    settle(qtbot)
    assert widget.map_rect().height() > 0.7 * widget.height()


# ---- the token-id table -------------------------------------------------------------------------------------


def test_a_tokens_step_shows_the_table_of_positions_tokens_and_ids(qtbot, make_window):
    w = make_window(source="machine learning using PyTorch", target="")
    run_and_wait(qtbot, w)
    w.go_to_step("src_embed.tokens")
    view = show(w, StepView)
    assert view.token_table.isVisibleTo(view) and not view.heatmap.isVisibleTo(view)
    # GPT-2's ids: "machine" opening the text is 30243 (" machine", after a space, would be 4572)
    assert view.token_table.ids(0) == [30243, 4673, 1262, 9485, 15884, 354]
    assert view.token_table.tokens(0)[1] == "␣learning"
    assert view.token_table.item(3, 0).text() == "3"
    assert [h.shape for h in view.current_heatmaps()] == [(1, 6)]  # still exported as the heatmap
    w.go_to_step("tgt_embed.tokens")
    assert view.token_table.ids(0)[0] == 50256  # the start token opens the decoder input
    w.go_to_step("src_embed.lookup")
    assert view.heatmap.isVisibleTo(view) and not view.token_table.isVisibleTo(view)


def test_a_batch_of_windows_shows_one_token_column_per_item(qtbot, make_window):
    w = make_window(source=WALKTHROUGH.read_text(encoding="utf-8"), target="")
    w.set_windows((10, 4))
    run_and_wait(qtbot, w)
    w.go_to_step("src_embed.tokens")
    view = show(w, StepView)
    ids = w.current_trace()["src_embed.tokens"].tensor
    assert view.token_table.columnCount() == 1 + 2 * 4
    for b in range(4):
        assert view.token_table.ids(b) == ids[b].tolist()
    assert view.token_table.ids(1)[:9] == ids[0, 1:].tolist()  # windows slide by one token


# ---- thumbnails use the space -------------------------------------------------------------------------------


def test_grid_shape_follows_the_space():
    assert grid_shape([1.0, 1.0], 400, 700) == (2, 1)  # a tall panel stacks two heads
    assert grid_shape([1.0, 1.0], 700, 400) == (1, 2)
    assert grid_shape([1.0] * 4, 500, 500) == (2, 2)
    assert grid_shape([1.0] * 8, 900, 450) == (2, 4)
    assert grid_shape([0.5, 0.5, 0.5], 860, 650, (110, 50)) == (3, 1)  # wide mosaics stack
    assert grid_shape([0.8, 0.8, 0.8], 860, 650, (110, 50)) == (2, 2)


def test_two_heads_fill_most_of_the_thumbnail_area(qtbot, ran_window):
    w = ran_window
    w.resize(1400, 900)
    w.go_to_step("encoder.0.self_attn.weights")
    view = show(w, HeadsView)
    settle(qtbot, 60)
    host = view.grid_host.size()
    area = sum(t.map_rect().width() * t.map_rect().height() for t in view.thumbs)
    assert view.grid_dims == (2, 1)  # the panel is taller than wide: stacked
    assert area > 0.55 * host.width() * host.height()


def test_overview_mosaics_use_the_space(qtbot, ran_window):
    w = ran_window
    w.resize(1400, 900)
    view = show(w, OverviewView)
    settle(qtbot, 60)
    assert view.grid_dims == (3, 1)  # blog: 1 layer × 2 heads, three wide mosaics, stacked
    host = view.grid_host.size()
    area = sum(x.map_rect().width() * x.map_rect().height() for x in view.widgets.values())
    assert area > 0.3 * host.width() * host.height()


# ---- exports ------------------------------------------------------------------------------------------------


def _svg_texts(svg: bytes) -> list[str]:
    root = ET.fromstring(svg)
    return [re.sub(r"\s+", "", t.text or "") for t in root.iter(f"{SVG}text")]


def test_exports_write_the_values_of_small_maps_only():
    values = np.float32([[0.125, 0.875], [-np.inf, 0.5]])
    texts = _svg_texts(render_bytes(single_figure(synthetic(values)), "svg"))
    for label in ("0.125", "0.875", "0.500", "−∞"):
        assert label in texts
    big = np.full((30, 30), 0.123, np.float32)
    assert "0.123" not in _svg_texts(render_bytes(single_figure(synthetic(big)), "svg"))


def test_only_probability_maps_get_fixed_decimals():
    from scratchformer.plotdata.heatmap import DIVERGING, value_decimals

    weights = synthetic(np.float32([[4.76e-10, 1.0], [0.321, 0.679]]))
    assert value_decimals(weights) == 3 and cell_label(4.76e-10, decimals=3) == "0.000"
    scores = synthetic(np.float32([[-16.9, 4.58], [0.0123, 1.0]]), DIVERGING, (-16.9, 16.9))
    assert value_decimals(scores) is None and cell_label(0.0123) == "0.0123"
