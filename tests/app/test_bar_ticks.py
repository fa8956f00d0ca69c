"""The colour bar's ticks: a few round values inside the map's range, labelled so they read back as those values."""

import math

from hypothesis import given
from hypothesis import strategies as st

from app.widgets.bar_ticks import bar_ticks

finite = st.floats(min_value=-1e7, max_value=1e7, allow_nan=False)


@given(finite, finite)
def test_ticks_are_few_round_values_inside_the_range(a, b):
    lo, hi = min(a, b), max(a, b)
    if hi - lo < 1e-9 * max(1.0, abs(lo)):
        return  # a range narrower than float rounding reads as one value
    ticks = bar_ticks(lo, hi)
    assert 3 <= len(ticks) <= 12
    values = [v for v, _ in ticks]
    step = values[1] - values[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5, 10)) < 1e-6  # 1, 2 or 5 × 10^k apart
    slack = 1e-9 * max(abs(lo), abs(hi), step)
    assert all(lo - slack <= v <= hi + slack for v in values)
    for value, text in ticks:  # each label reads back as its value (to the label's precision)
        assert math.isclose(float(text.replace("−", "-")), value, rel_tol=5e-3, abs_tol=step * 1e-3)


def test_a_constant_map_has_one_tick_and_a_broken_range_none():
    assert bar_ticks(2.5, 2.5) == [(2.5, "2.5")]
    assert bar_ticks(0.0, math.inf) == []
    assert [t for _, t in bar_ticks(-0.5, 0.5)] == ["−0.5", "0.0", "0.5"]
    assert [t for _, t in bar_ticks(0.0, 1.0)] == ["0.0", "0.5", "1.0"]


def test_the_window_colour_bar_shows_round_ticks(qtbot):
    import numpy as np

    from app.widgets.heatmap import HeatmapWidget
    from scratchformer.plotdata import Heatmap

    w = HeatmapWidget()
    qtbot.addWidget(w)
    values = np.linspace(-3.2, 7.9, 12, dtype=np.float32).reshape(3, 4)
    w.set_heatmap(Heatmap(values=values, title="t", levels=(-3.2, 7.9), row_labels=None, col_labels=None,
                          row_dim="row", col_dim="col", colormap="viridis"))
    ticks = w.colorbar.axis._tickLevels[0]
    assert [t for _, t in ticks] == ["−2", "0", "2", "4", "6"]
