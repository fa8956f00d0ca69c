"""The Experiments view: opened by name (as lessons do), measured off the UI thread, redrawn when a control
changes (a switch only redraws; a slider measures again), its map exported, and an experiment that does not apply
to the loaded model said in one sentence."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import scratchformer.experiments as experiments
from app.views.experiments_view import ExperimentsView, tick_of
from scratchformer.loading.checkpoint import save_checkpoint
from tests.app.conftest import run_and_wait
from tests.app.test_derivation_window import view_of
from tests.scratchformer.test_derive import FAMILIES, family_bundle


def experiment_threads(monkeypatch) -> list:
    """The threads experiments run on from now on (each call of run_experiment appends its thread)."""
    threads = []
    real = experiments.run_experiment

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(experiments, "run_experiment", recording)
    return threads


def settle(qtbot, view):
    qtbot.waitUntil(lambda: not view.is_busy() and view.result is not None, timeout=30_000)


def test_the_mask_experiment_opens_by_name_and_its_switch_redraws(qtbot, en_hi, monkeypatch):
    w, view = en_hi, view_of(en_hi, ExperimentsView)
    threads = experiment_threads(monkeypatch)
    view.show_experiment("mask", masked=True)
    assert w.tabs.currentWidget() is view
    settle(qtbot, view)
    assert threads and threading.main_thread() not in threads  # measured off the UI thread
    assert view.result["with_mask"]["max_change_from_future"] == 0.0
    masked = view.current_heatmaps()[0]
    assert "with the causal mask" in masked.title and masked.shape == (5, 5)
    assert np.all(np.triu(masked.values, 1) == 0)  # no position moves when a later token does
    assert view.switch.isVisible() and not view.dk.isVisible()
    view.switch.setChecked(False)  # the switch redraws from the same result: nothing is measured again
    assert not view.is_busy() and len(threads) == 1
    unmasked = view.current_heatmaps()[0]
    assert "without the causal mask" in unmasked.title and np.triu(unmasked.values, 1).max() > 0
    assert view.heatmap.heatmap is unmasked
    lines = [p.getPlotItem().listDataItems() for p in view.plots]
    view.show_experiment("mask", masked=False)  # the same page again (a lesson turned back): kept, not redrawn
    assert not view.is_busy() and [p.getPlotItem().listDataItems() for p in view.plots] == lines
    view.switch.setChecked(True)
    assert "with the causal mask" in view.current_heatmaps()[0].title  # the switch still redraws


def test_a_slider_measures_again_and_the_charts_follow(qtbot, en_hi, tmp_path):
    view = view_of(en_hi, ExperimentsView)
    view.show_experiment("scaling", d_k=64)
    settle(qtbot, view)
    assert view.result["example"]["d_k"] == 64 and view.dk_label.text() == "d_k = 64"
    view.dk.setValue(9)  # d_k = 512
    qtbot.waitUntil(lambda: not view.is_busy() and view.result["example"]["d_k"] == 512, timeout=30_000)
    assert [row["d_k"] for row in view.result["rows"]] == [8, 64, 512]
    titles = [c.title for c in view.drawn_charts]
    assert titles[0].startswith("Largest weight") and view.drawn_charts[0].marker_x == 512
    assert view.plots[0].isVisible() and view.plots[2].isVisible()
    assert "d_k = 512" in view.current_heatmaps()[0].title
    # the numbers as shown: the whole result as JSON, the charts as CSV
    saved = json.loads(view.export_numbers(tmp_path / "scaling.json").read_text(encoding="utf-8"))
    assert saved["rows"] == view.result["rows"]
    csv = view.export_numbers(tmp_path / "scaling.csv").read_text(encoding="utf-8").splitlines()
    assert csv[0] == "chart,series,x,y" and len(csv) == 1 + 3 * 2 * 10  # 3 charts × 2 series × 10 values of d_k

    view.show_experiment("temperature", temperature=0.5, seed=2)
    settle(qtbot, view)
    assert view.result["temperature"] == pytest.approx(0.5, abs=0.01) and view.result["sampled"]["seed"] == 2
    entropy_cold = view.result["next_token"]["entropy"]
    view.temperature.setValue(tick_of(4.0))
    qtbot.waitUntil(lambda: not view.is_busy() and view.result["temperature"] > 3.5, timeout=30_000)
    assert view.result["next_token"]["entropy"] > entropy_cold
    assert view.t_label.text() == f"T = {view.result['temperature']:g}"


def test_an_experiment_that_does_not_apply_says_so(qtbot, make_window, tmp_path):
    from scratchformer.loading.bundle import load_model

    bert = family_bundle(load_model("en-hi"), FAMILIES["bert_like"])
    save_checkpoint(tmp_path / "bert", bert.model, bert.src_tokenizer, bert.tgt_tokenizer)
    w = make_window(source="the girl eats an apple", target="", model=str(tmp_path / "bert"))
    run_and_wait(qtbot, w)
    view = view_of(w, ExperimentsView)
    view.show_experiment("teacher-forcing")
    assert not view.is_busy() and view.result is None
    assert "needs a decoder" in view.status.text() and not view.body.isVisible()
    view.show_experiment("order", positional=False)
    settle(qtbot, view)
    assert view.result["without_pe"]["max_diff_after_unpermuting"] < 1e-5
    assert "without positional encoding" in view.current_heatmaps()[0].title


def test_the_charts_value_axes_keep_their_width_from_one_experiment_to_the_next(qtbot, en_hi):
    """New numbers never resize the charts' value axes (which would re-lay out the row and paint it twice)."""
    w, view = en_hi, view_of(en_hi, ExperimentsView)
    w.tabs.setCurrentWidget(view)
    widths, labels = set(), set()
    for name, controls in (("scaling", {"d_k": 64}), ("mask", {"masked": True}), ("norm", {})):
        view.show_experiment(name, **controls)
        settle(qtbot, view)
        qtbot.waitUntil(lambda name=name: view.result["experiment"] == name, timeout=30_000)
        qtbot.wait(30)  # any re-layout the painting asked for has happened
        for plot in view.plots:
            if plot.isVisible():
                widths.add(round(plot.getAxis("left").width()))
                labels.add(plot.getPlotItem().titleLabel.text)
    assert len(labels) > 2  # different charts were drawn
    assert len(widths) == 1
