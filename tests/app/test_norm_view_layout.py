"""The LayerNorm view's mean and std charts keep their layout from one comparison to the next: their value axes
have a fixed room for labels, so new numbers (wider or narrower labels) never re-lay out the view and paint every
chart and map in it a second time."""

from __future__ import annotations

from app.main import drawn
from app.views.norm_view import NormView


def test_the_charts_value_axes_keep_their_width_across_comparisons(qtbot, ran_window):
    w = ran_window
    i = next(i for i, v in enumerate(w.views) if isinstance(v, NormView))
    view = w.views[i]
    w.tabs.setCurrentIndex(i)
    widths, ranges = set(), set()
    for name in ("encoder.0.add_norm1.out", "encoder.0.add_norm2.out", "decoder.0.add_norm1.out"):
        w.go_to_step(name)
        drawn(w)
        qtbot.wait(30)  # any re-layout the painting asked for has happened
        for plot in (view.mean_plot, view.std_plot):
            widths.add(round(plot.getAxis("left").width()))
            ranges.add(tuple(round(x, 3) for x in plot.getViewBox().viewRange()[1]))
    assert len(ranges) > 2  # the comparisons' numbers differ, so their labels do
    assert len(widths) == 1  # and the axes did not change size for them
