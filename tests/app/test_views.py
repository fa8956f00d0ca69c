"""The views: heads (click to enlarge), overview (click a thumbnail), masks, PE, output, hover read-out."""

import time

import numpy as np
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from app.main import drawn
from app.views.heads_view import HeadsView
from app.views.masks_view import MasksView
from app.views.output_view import OutputView
from app.views.overview_view import OverviewView
from app.views.pe_view import LATER_CURVE_POINTS, PositionalView, parse_dims
from app.widgets.colormaps import MASKED_RGBA, heatmap_rgba, lookup_table
from app.widgets.draw_queue import draw_queue
from scratchformer.plotdata import Heatmap, overview_tick_positions
from tests.app.conftest import run_and_wait


def show(w, cls):
    """Open the view and wait until it has drawn (views make their heavy data off the UI thread)."""
    from app.main import drawn

    view = next(v for v in w.views if isinstance(v, cls))
    w.tabs.setCurrentWidget(view)
    drawn(w)
    deadline = time.monotonic() + 30
    while getattr(view, "is_busy", lambda: False)() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.005)
    return view


def click_cell(qtbot, heatmap_widget, row, col):
    vb = heatmap_widget.plot.getViewBox()
    scene = vb.mapViewToScene(QPointF(col, row))
    pos = heatmap_widget.view.mapFromScene(scene)
    qtbot.mouseClick(heatmap_widget.view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_clicking_a_head_enlarges_it(qtbot, ran_window):
    w = ran_window
    w.go_to_step("encoder.0.self_attn.weights")
    view = show(w, HeadsView)
    assert len(view.thumbs) == 2
    click_cell(qtbot, view.thumbs[1], 2, 2)
    assert w.current_head() == 1
    assert view.large.heatmap.title.endswith("Attention weights (softmax)")
    expected = w.current_trace()["encoder.0.self_attn.weights"].tensor[0, 1].numpy()
    np.testing.assert_allclose(view.large.heatmap.values, expected)
    assert [m.title for m in view.current_heatmaps()] == ["Head 1", "Head 2"]


def test_clicking_an_overview_thumbnail_goes_to_that_step_and_head(qtbot, ran_window):
    w = ran_window
    w.first_step()
    view = show(w, OverviewView)
    widget = view.widgets["decoder.cross_attn"]
    mosaic = view._maps["decoder.cross_attn"]
    rows, cols = overview_tick_positions(mosaic)
    click_cell(qtbot, widget, rows[0], cols[1])
    assert w.current_step().name == "decoder.0.cross_attn.weights"
    assert w.current_head() == 1
    assert len(view.current_heatmaps()) == 3  # encoder self, decoder self, cross


def test_masks_view_shows_causal_mask_with_blocked_cells_distinct(qtbot, ran_window):
    w = ran_window
    w.go_to_step("decoder.0.self_attn.masked_scores")
    view = show(w, MasksView)
    titles = [m.title for m in view.current_heatmaps()]
    assert "Causal (no peeking ahead)" in titles and "Combined mask used" in titles
    assert "Scores + mask, before softmax" in titles and "Attention weights, after softmax" in titles
    causal = next(m for m in view.current_heatmaps() if m.title.startswith("Causal"))
    rgba = heatmap_rgba(causal)
    assert tuple(rgba[0, 2]) == MASKED_RGBA  # query 0 may not see key 2
    assert tuple(rgba[2, 0]) != MASKED_RGBA


def test_positional_view_plots_the_encoding_added(qtbot, ran_window):
    w = ran_window
    w.first_step()
    view = show(w, PositionalView)
    (hm,) = view.current_heatmaps()
    np.testing.assert_allclose(hm.values, w.current_trace()["src_embed.positional_encoding"].tensor.numpy())
    assert len(view.plot.listDataItems()) == 2 * 4  # a line and the added points per default dimension
    assert parse_dims("0, 2-4, 99, x", 6) == [0, 2, 3, 4]
    items = view.plot.listDataItems()
    view.refresh()  # the same encoding again (a lesson page, a tab switch): the curves on screen stay
    assert view.plot.listDataItems() == items
    view.dims_edit.setText("1, 3")
    view.dims_edit.editingFinished.emit()
    drawn(w)
    assert len(view.plot.listDataItems()) == 2 * 2  # other dimensions: drawn anew


def test_output_view_lists_top_k_per_target_position(qtbot, ran_window):
    w = ran_window
    view = show(w, OutputView)
    assert view.table.rowCount() == 3  # start token + "the" + " answer"
    assert view.table.columnCount() == 2 + 5
    probs = w.current_trace()["generator.probs"].tensor[0, 0]
    best = int(probs.argmax())
    assert f"id {best})" in view.table.tooltip(0, 2)


def test_hover_reads_out_row_column_and_value(qtbot, ran_window):
    w = ran_window
    w.go_to_step("encoder.0.self_attn.weights")
    step_view = w.views[0]
    text = step_view.heatmap.describe_cell(1, 4)
    value = float(w.current_trace()["encoder.0.self_attn.weights"].tensor[0, 0, 1, 4])
    assert "' learning' (src_pos 1)" in text and "'Tor' (src_pos 4)" in text and f"{value:.4g}" in text


def test_every_view_reports_what_it_shows(qtbot, ran_window):
    w = ran_window
    w.go_to_step("decoder.0.cross_attn.weights")
    for i, view in enumerate(w.views):
        w.tabs.setCurrentIndex(i)
        if view.title == "Training":  # the blog preset was never trained: the tab says so instead
            assert view.empty.isVisible() and "no training snapshots" in view.empty.text()
            continue
        if view.title == "Rotary positions":  # the blog preset adds sinusoids: the tab says so instead
            assert view.other.isVisible() and not view.current_heatmaps()
            continue
        if view.title in ("Compare", "Head importance", "How this number was made", "Lessons", "Attribution",
                          "Patching", "Features"):
            # nothing to show before an intervention, a measurement or a click on a cell (Attribution: on a row of
            # Output, or its Attribute button; Patching: a corrupted input and Sweep; Features: an attached
            # dictionary, which says so); the lessons are a list
            assert not view.current_heatmaps()
            continue
        if view.title == "Graph":  # a picture of its own (current_picture); the blog preset has no transcoders
            assert not view.current_heatmaps() and view.current_picture() is None
            assert "ships no transcoder set" in view.status.text()
            continue
        if view.title == "Trajectories":  # paths, not heatmaps: the chart the exporters draw
            qtbot.waitUntil(lambda view=view: view.current_chart() is not None, timeout=30_000)
            assert not view.current_heatmaps() and view.view_title()
            continue
        # the Decoding tab computes its timeline in a thread: wait for what the user would wait for
        qtbot.waitUntil(lambda view=view: bool(view.current_heatmaps()), timeout=30_000)
        maps = view.current_heatmaps()
        assert maps and all(isinstance(m, Heatmap) for m in maps), view.title
        assert view.view_title()


def test_colormap_tables():
    for name in ("viridis", "RdBu_r", "mask"):
        lut = lookup_table(name)
        assert lut.shape == (256, 4) and lut.dtype == np.uint8
    rdbu = lookup_table("RdBu_r")
    assert rdbu[0, 2] > rdbu[0, 0] and rdbu[255, 0] > rdbu[255, 2]  # blue low, red high
    assert MASKED_RGBA not in {tuple(c) for c in lookup_table("viridis")}


def test_long_input_stays_usable(qtbot, make_window, monkeypatch):
    """512 tokens through a small model with a long max length: labels abbreviate, full text on hover."""
    from scratchformer.transformer import config as config_module

    def long_blog():
        c = config_module.blog()
        c.max_len = 600
        return c

    monkeypatch.setitem(config_module.PRESETS, "blog", long_blog)
    from app.work import worker

    worker._SHARED.clear()
    w = make_window(source=" ".join(["word"] * 512), target="")
    try:
        qtbot.waitUntil(lambda: True)
        w.run()
        qtbot.waitUntil(lambda: not w.is_busy(), timeout=120_000)
        trace = w.current_trace()
        assert len(trace.source_tokens[0]) == 512, w.message_text()
        w.go_to_step("encoder.0.self_attn.weights")
        qtbot.waitUntil(lambda: not w.is_busy(), timeout=30_000)  # its sublayer is recomputed, then drawn
        ticks = w.views[0].heatmap.plot.getAxis("bottom")._tickLevels[0]
        assert 0 < len(ticks) < 512  # thinned to what fits
        assert "' word' (src_pos 300)" in w.views[0].heatmap.describe_cell(0, 300)
    finally:
        worker._SHARED.clear()


def test_the_view_menu_lists_every_view_in_its_group_and_opens_the_one_chosen(qtbot, ran_window):
    """The View menu replaces the old "All tabs" button: every group, then its views, the one shown ticked."""
    from app.views.view_groups import GROUPS

    w = ran_window
    assert w.tabs.groups.cornerWidget(Qt.Corner.TopRightCorner) is None  # no "All tabs" button any more
    view_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    entries = [a for a in view_menu.actions() if a in w.group_actions or a in w.view_actions]
    expected = [t for title, classes in GROUPS for t in (title, *(c.title for c in classes))]
    assert [a.text().split("\t")[0].strip() for a in entries] == expected
    last = w.view_actions[-1]  # the last view of the last group
    last.trigger()
    assert w.tabs.currentIndex() == len(w.views) - 1 and w.tabs.currentWidget() is w.views[-1]
    assert [a.isChecked() for a in w.view_actions] == [i == len(w.views) - 1 for i in range(len(w.views))]
    w.view_actions[1].trigger()
    assert w.tabs.currentWidget() is w.views[1] and w.view_actions[1].isChecked() and not last.isChecked()


def test_positional_curves_of_a_long_input_are_drawn_after_its_map(qtbot, make_window):

    w = make_window(source=" ".join(["learning"] * (LATER_CURVE_POINTS + 20)), model="paper")
    run_and_wait(qtbot, w)
    w.first_step()
    view = next(v for v in w.views if isinstance(v, PositionalView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.current_heatmaps() != [], timeout=10_000)
    pe = w.current_trace()["src_embed.positional_encoding"].tensor.numpy()
    assert pe.shape[0] >= LATER_CURVE_POINTS
    draw_queue().finish()
    items = view.plot.listDataItems()
    assert len(items) == 2 * 4  # a smooth line and the added points per default dimension
    line, points = items[0], items[1]
    assert line.xData.max() >= pe.shape[0] - 1  # the line spans every position
    np.testing.assert_allclose(points.yData, pe[:, 0], rtol=1e-5, atol=1e-6)


def test_positional_curves_are_fitted_once_and_each_computed_once(qtbot, make_window, monkeypatch):
    """Adding the curves one by one with the range fitted per curve made every curve already drawn recompute its
    points at each addition (32 recomputations for 8 items at 512 positions); now each is computed once, and the
    range fitted afterwards still shows every position and value."""
    import pyqtgraph as pg

    w = make_window(source=" ".join(["learning"] * (LATER_CURVE_POINTS + 20)), model="paper")
    run_and_wait(qtbot, w)
    w.first_step()
    view = next(v for v in w.views if isinstance(v, PositionalView))
    updates = []
    real = pg.PlotDataItem.updateItems
    monkeypatch.setattr(pg.PlotDataItem, "updateItems",
                        lambda self, *a, **k: updates.append(self) or real(self, *a, **k))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.current_heatmaps() != [], timeout=10_000)
    draw_queue().finish()
    items = view.plot.listDataItems()
    assert len(items) == 8 and len(updates) <= len(items)
    QApplication.processEvents()  # the fitted range is applied before painting
    pe = w.current_trace()["src_embed.positional_encoding"].tensor.numpy()
    (x0, x1), (y0, y1) = view.plot.getViewBox().viewRange()
    shown = np.concatenate([item.yData for item in items])
    assert x0 <= 0 and x1 >= pe.shape[0] - 1 and y0 <= shown.min() and y1 >= shown.max()


def test_positional_curves_of_a_long_input_come_a_few_per_turn_in_the_final_range(qtbot, make_window, monkeypatch):
    """A long input's curves are added CURVES_PER_TURN a turn of the event loop (no turn makes and paints all
    eight); the view shows all of them from the first turn on, and the window is busy until the last is in."""
    from app.views.pe_view import CURVES_PER_TURN

    w = make_window(source=" ".join(["learning"] * (LATER_CURVE_POINTS + 20)), model="paper")
    run_and_wait(qtbot, w)
    w.first_step()
    view = next(v for v in w.views if isinstance(v, PositionalView))
    counts, busy, ranges = [], [], []
    real = view.draw_pending

    def watched() -> None:  # each turn the draw queue gives the view: what it added, and whether the window waits
        real()
        counts.append(len(view.plot.listDataItems()))
        busy.append(view._curves is None or w.is_busy())
        ranges.append(view.plot.getViewBox().viewRange())

    monkeypatch.setattr(view, "draw_pending", watched)  # the queue calls it by name, one turn at a time
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view._curves is None and bool(counts), timeout=10_000)
    assert counts[0] == 2 * CURVES_PER_TURN and counts[-1] == 2 * 4 and len(counts) == 4 // CURVES_PER_TURN
    assert all(b - a == 2 * CURVES_PER_TURN for a, b in zip(counts, counts[1:]))
    assert all(busy)  # the window counts as busy until the last curve is in
    first_range = ranges[0]
    pe = w.current_trace()["src_embed.positional_encoding"].tensor.numpy()
    (x0, x1), (y0, y1) = first_range  # every position and value of the curves, from the first turn
    assert x0 <= 0 and x1 >= pe.shape[0] - 1 and y0 <= -0.99 and y1 >= 0.99
