"""Head metrics over training in the Training tab: measured off the UI thread on en-hi's snapshots, one curve per
head equal to the core's numbers, the marker following the snapshot slider (and a click on the chart moving the
slider), Cancel, the core's one sentence for a model without snapshots, and the exports."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from app.views.training_view import TrainingView
from scratchformer.analyses import head_metrics
from scratchformer.errors import UserError
from tests.app.conftest import run_and_wait

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def core_metrics():
    return head_metrics.compute("en-hi")


def _training(qtbot, make_window, model="en-hi", source=SOURCE):
    w = make_window(source=source, target="", model=model)
    run_and_wait(qtbot, w)
    view = next(v for v in w.views if isinstance(v, TrainingView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    return w, view


def test_curves_over_en_hi_snapshots_follow_the_slider(qtbot, make_window, core_metrics, tmp_path, monkeypatch):
    w, view = _training(qtbot, make_window)
    panel = view.head_metrics
    assert panel.isVisible() and panel.measure_button.isEnabled() and not panel.plot.isVisible()
    panel.measure()
    assert panel.progress.isVisible() and panel.cancel_button.isVisible()  # the UI thread is free meanwhile
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=120_000)
    assert panel.metrics is not None and panel.plot.isVisible(), panel.message.text()
    m = panel.metrics
    assert [c.label for c in m.checkpoints] == [c.label for c in core_metrics.checkpoints]
    # the metrics offered: entropy, alignment (en-hi has a gold alignment) and importance
    assert [panel.metric_box.itemData(i) for i in range(panel.metric_box.count())] == \
        ["entropy", "alignment", "importance"]
    assert panel.type_box.currentData() == "decoder.cross_attn" and panel.layer_box.currentData() == 1  # the last
    panel.layer_box.setCurrentIndex(0)  # every layer's heads
    for metric in ("entropy", "alignment", "importance"):
        panel.metric_box.setCurrentIndex(panel.metric_box.findData(metric))
        kind = panel.type_box.currentData()
        lines = panel.plot.getPlotItem().listDataItems()
        want = getattr(core_metrics, metric)[kind]  # (checkpoints, layers, heads)
        assert len(lines) == want.shape[1] * want.shape[2]  # every head of every layer
        for line, curve in zip(lines, panel.curves().curves):
            xs, ys = line.xData, line.yData  # (as given: the chart's x axis shows them on a log scale)
            np.testing.assert_allclose(ys, want[:, curve.layer, curve.head], rtol=1e-9, atol=1e-12)
            assert list(xs) == [c.step for c in core_metrics.checkpoints]
    # one layer's heads only
    panel.layer_box.setCurrentIndex(2)  # layer 2 alone
    assert len(panel.plot.getPlotItem().listDataItems()) == want.shape[2]

    # the marker follows the snapshot slider; the final model has no snapshot of its own
    for i, snap in enumerate(view._snapshots):
        view.slider.setValue(i)
        assert panel.marker.isVisible() and panel.marker.value() == pytest.approx(math.log10(snap.step))
    # a click on the chart's first checkpoint moves the slider there
    view.slider.setValue(len(view._snapshots) - 1)
    panel.checkpoint_clicked.emit(view._snapshots[0].step)
    assert view.slider.value() == 0 and panel.marker.value() == pytest.approx(math.log10(view._snapshots[0].step))
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)

    # exports: the curves as PNG, SVG, PDF; every number as CSV
    for fmt in ("png", "svg", "pdf"):
        path = panel.export(tmp_path / f"heads.{fmt}")
        assert path.stat().st_size > 1000
    rows = list(csv.DictReader(io.StringIO(panel.export(tmp_path / "heads.csv").read_text())))
    entropy = core_metrics.entropy["decoder.cross_attn"]
    n_ckpt, n_layers, n_heads = entropy.shape
    cross = [r for r in rows if r["metric"] == "entropy" and r["attention"] == "decoder.cross_attn"]
    assert len(cross) == n_ckpt * n_layers * n_heads
    assert float(cross[-1]["value"]) == pytest.approx(entropy[-1, -1, -1], rel=1e-6)

    # the export dialog (export/actions.save_numbers): a chosen .svg is written, a name without a known suffix
    # gets .png, and a tensor file's suffix is one sentence
    from app.export import actions

    for name in ("chosen.svg", "plain", "tensors.npz"):
        monkeypatch.setattr(actions, "ask_save_path", lambda *_a, n=name: str(tmp_path / n))
        panel._export_dialog()
    assert (tmp_path / "chosen.svg").stat().st_size > 1000 and (tmp_path / "plain.png").stat().st_size > 1000
    assert not (tmp_path / "tensors.npz").exists() and "tensors.npz cannot be saved here" in view.main.message_text()


def test_at_1400_by_900_the_maps_and_the_heads_chart_both_keep_room(qtbot, make_window):
    """The snapshot's maps and the heads chart share the room under the loss curve as two tabs, so neither is
    squeezed; the log step axis reads the checkpoints' own steps; the legend sits beside the curves."""
    w = make_window(source=SOURCE, target="", model="en-hi")
    w.resize(1400, 900)
    run_and_wait(qtbot, w)
    view = next(v for v in w.views if isinstance(v, TrainingView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy() and view.current_run() is not None, timeout=60_000)
    panel = view.head_metrics
    view.lower.setCurrentWidget(panel)
    panel.measure()
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=120_000)
    assert panel.metrics is not None, panel.message.text()
    qtbot.wait(50)
    assert panel.plot.height() >= 160
    ticks = panel.plot.getAxis("bottom")._tickLevels[0]
    steps = [c.step for c in panel.metrics.checkpoints]
    assert [label for _, label in ticks] == [str(s) for s in steps] == ["32", "64", "128", "256", "2030"]
    assert [x for x, _ in ticks] == pytest.approx([math.log10(s) for s in steps])
    # the legend is beside the plot, not drawn over it, and names every head shown
    assert panel.plot.getPlotItem().legend is None
    assert not panel.key.geometry().intersects(panel.plot.geometry())
    assert all(f"head {h}" in panel.key.text() for h in range(1, 5))
    view.lower.setCurrentIndex(0)  # the snapshot's maps, measured heads or not
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    for heatmap in (view.snapshot_map, view.final_map):
        assert heatmap.isVisible() and heatmap.height() >= 160


def test_step_ticks_leave_out_steps_too_close_to_a_labelled_one():
    from scratchformer.plotdata.head_metrics import step_ticks

    assert step_ticks([1000, 0, 1, 10]) == [(0.0, "1"), (1.0, "10"), (3.0, "1000")]  # no place for step 0
    near = step_ticks([100, 110, 120, 1000, 1050], min_gap=0.2)
    assert [label for _, label in near] == ["120", "1050"]  # the final model's step is always labelled


@pytest.fixture
def step_revisions(tmp_path, monkeypatch):
    """A Hugging Face cache holding two Pythia-style step revisions of a tiny BERT (and main = the later one)."""
    from tests.scratchformer.test_hf_cache import step_revision_cache

    step_revision_cache(tmp_path, monkeypatch, (("step3", "a" * 40), ("step20", "b" * 40), ("main", "b" * 40)))
    return "someone/tiny-bert"


def test_a_hugging_face_models_step_revisions_are_measured_in_the_training_tab(qtbot, make_window, step_revisions):
    source = "the cat sat on the mat"
    w = make_window(source=source, target="", model=step_revisions)
    run_and_wait(qtbot, w)
    assert w.current_result() is not None, w.message_text()
    view = next(v for v in w.views if isinstance(v, TrainingView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    panel = view.head_metrics
    # no training log, no snapshots: one sentence saying so, and the heads over training alone
    assert view.empty.isVisible() and "no training log" in view.empty.text() and "2 of its" in view.empty.text()
    assert not view.controls.isVisible() and not view.curves_box.isVisible()
    assert panel.isVisible() and not view.lower.isTabVisible(0) and view.current_heatmaps() == []
    assert panel.measure_button.isEnabled() and "step3, step20" in panel.message.text()
    qtbot.waitUntil(lambda: "2 step revisions" in w.explain_panel.plain_text(), timeout=10_000)
    panel.measure()
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=120_000)
    assert panel.metrics is not None and panel.plot.isVisible(), panel.message.text()
    core = head_metrics.compute(step_revisions, source=source)
    assert [c.label for c in panel.metrics.checkpoints] == ["step3", "step20"]
    np.testing.assert_allclose(panel.metrics.entropy["encoder.self_attn"], core.entropy["encoder.self_attn"],
                               rtol=1e-6)  # fmt: skip
    assert [label for _, label in panel.plot.getAxis("bottom")._tickLevels[0]] == ["3", "20"]
    line = panel.plot.getPlotItem().listDataItems()[0]
    assert list(line.xData) == [3, 20]
    # a model with snapshots again: its curves, controls and maps come back
    w.set_model("en-hi")
    w.source_edit.setText(SOURCE)
    run_and_wait(qtbot, w)
    qtbot.waitUntil(lambda: not view.is_busy() and view.current_run() is not None, timeout=60_000)
    assert view.controls.isVisible() and view.curves_box.isVisible() and view.lower.isTabVisible(0)
    assert not view.empty.isVisible()


def test_cancel_and_no_snapshots(qtbot, make_window):
    w, view = _training(qtbot, make_window)
    panel = view.head_metrics
    panel.measure()
    panel.cancel()
    assert not panel.cancel_button.isVisible() and "Cancelled" in panel.message.text()
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=120_000)
    assert panel.metrics is None and panel.measure_button.isEnabled()

    # a model without snapshots: the core's one sentence, and nothing to measure
    w.set_model("blog")
    w.source_edit.setText("machine learning using PyTorch")
    w.set_windows(None)  # (the model's example is a batch of windows)
    run_and_wait(qtbot, w)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    with pytest.raises(UserError) as said:
        head_metrics.checkpoints_of("blog")
    assert panel.message.text() == str(said.value)
    assert not panel.measure_button.isEnabled() and panel.metrics is None
