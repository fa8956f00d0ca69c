"""The Q·K neuron view and the weighted sum in the window: reached from a derivation's buttons and from each
other, redrawn by their pickers and by a click on a key, explained with this run's numbers, and exported."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from app.views.derivation_view import DerivationView
from app.views.neuron_view import NeuronView
from app.views.step_view import StepView
from app.views.weighted_sum_view import WeightedSumView
from tests.app.test_derivation_window import click_cell, view_of, wait_derived


def settle(qtbot, w, view):
    qtbot.waitUntil(lambda: not w.is_busy() and not view.is_busy(), timeout=20_000)


def test_a_derived_score_opens_its_pair_in_the_neuron_view(qtbot, en_hi):
    w = en_hi
    step_view, derivation, neuron = view_of(w, StepView), view_of(w, DerivationView), view_of(w, NeuronView)
    w.tabs.setCurrentWidget(step_view)
    w.go_to_step("decoder.0.cross_attn.scores", head=1)
    qtbot.waitUntil(lambda: not w.is_busy())
    click_cell(qtbot, step_view.heatmap, 2, 4)
    wait_derived(qtbot, derivation)
    assert derivation.neuron_button.isVisible()
    derivation.neuron_button.click()
    settle(qtbot, w, neuron)
    assert w.tabs.currentWidget() is neuron
    pair = neuron.pair
    assert (pair.pick.sublayer, pair.pick.head, pair.pick.query, pair.key) == ("decoder.0.cross_attn", 1, 2, 4)
    trace = w.current_trace()
    assert pair.score == pytest.approx(float(trace["decoder.0.cross_attn.scores"].tensor[0, 1, 2, 4]), rel=1e-5)
    # the bars are the products, the pickers say what is shown, the key is outlined in the row
    heights = neuron.bar_item.opts["height"]
    assert np.allclose(heights, pair.q * pair.k) and len(heights) == 32
    assert neuron.bar.sublayer.currentData() == "decoder.0.cross_attn" and neuron.bar.head.value() == 2
    assert neuron.bar.query.currentIndex() == 2 and neuron.bar.key.currentIndex() == 4
    assert neuron.weights.highlighted == [(0, 4)]
    assert f"{pair.score:.4f}" in neuron.summary.text() and "√32" in neuron.summary.text()
    # the explanation panel carries this pair's numbers
    qtbot.waitUntil(lambda: f"{pair.weight:.4f}" in w.explain_panel.plain_text(), timeout=5_000)

    click_cell(qtbot, neuron.weights, 0, 0)  # another key of the row
    settle(qtbot, w, neuron)
    assert neuron.pair.key == 0 and neuron.weights.highlighted == [(0, 0)]
    neuron.bar.head.setValue(4)  # another head, from the picker
    settle(qtbot, w, neuron)
    assert neuron.pair.pick.head == 3
    assert neuron.pair.score == pytest.approx(float(trace["decoder.0.cross_attn.scores"].tensor[0, 3, 2, 0]),
                                              rel=1e-5)  # fmt: skip


def test_the_masked_self_attention_says_why_a_future_key_gets_nothing(qtbot, en_hi):
    w = en_hi
    neuron = view_of(w, NeuronView)
    w.tabs.setCurrentWidget(neuron)
    neuron.show_pair("decoder.1.self_attn", 0, 1, 3)
    settle(qtbot, w, neuron)
    assert math.isinf(neuron.pair.mask) and neuron.pair.weight == 0.0
    assert "exactly 0" in neuron.summary.text()


def test_the_weighted_sum_rebuilds_the_output_and_a_key_leads_to_its_pair(qtbot, en_hi, tmp_path):
    w = en_hi
    view = view_of(w, WeightedSumView)
    w.go_to_step("encoder.1.self_attn.context", head=2)
    qtbot.waitUntil(lambda: not w.is_busy())
    w.tabs.setCurrentWidget(view)
    settle(qtbot, w, view)
    ws = view.ws
    assert (ws.pick.sublayer, ws.pick.head, ws.pick.query) == ("encoder.1.self_attn", 2, 5)  # the last query
    row = w.current_trace()["encoder.1.self_attn.context"].tensor[0, 2, 5].numpy()
    assert np.allclose(view.summed.heatmap.values[-1], row, atol=1e-5)
    assert view.summary.text().count("·v(") == 3
    view.bar.query.setCurrentIndex(1)
    settle(qtbot, w, view)
    assert view.ws.pick.query == 1

    click_cell(qtbot, view.weights, 3, 0)  # key 3's weight → how it was made
    neuron = view_of(w, NeuronView)
    settle(qtbot, w, neuron)
    assert w.tabs.currentWidget() is neuron
    assert (neuron.pair.pick.sublayer, neuron.pair.pick.head, neuron.pair.pick.query, neuron.pair.key) == \
        ("encoder.1.self_attn", 2, 1, 3)  # fmt: skip

    from app.export.actions import current_figure
    from app.export.render import render_bytes

    for v in (neuron, view):  # both export: the figure holds what the view shows
        w.tabs.setCurrentWidget(v)
        settle(qtbot, w, v)
        fig = current_figure(w)
        assert len(fig.heatmaps) == len(v.current_heatmaps()) >= 3
        for fmt in ("png", "svg", "pdf"):
            data = render_bytes(fig, fmt)
            assert data[:4] in (b"\x89PNG", b"<?xm", b"%PDF") and len(data) > 1000
        if os.environ.get("SCRATCHFORMER_SCREENSHOTS"):
            w.grab().save(os.path.join(os.environ["SCRATCHFORMER_SCREENSHOTS"], f"{type(v).__name__}.png"))


def test_both_pictures_read_their_numbers_off_the_ui_thread(qtbot, en_hi, monkeypatch):
    import threading

    import app.views.neuron_view as neuron_module
    import app.views.weighted_sum_view as sum_module

    threads: list[str] = []
    for module, name in ((neuron_module, "neuron_pair"), (sum_module, "weighted_sum")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real: threads.append(threading.current_thread().name)
                            or real(*a))  # fmt: skip
    w = en_hi
    for cls in (NeuronView, WeightedSumView):
        view = view_of(w, cls)
        w.tabs.setCurrentWidget(view)
        settle(qtbot, w, view)
    assert len(threads) >= 2 and threading.main_thread().name not in threads
