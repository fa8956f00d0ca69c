"""The Training tab: loss curves, the snapshot slider (attention map and output change over training), the
placeholder for models without snapshots, inspecting a snapshot, and no thread or timer left behind."""

from __future__ import annotations

import numpy as np
import pytest

from app.views.training_view import NO_SNAPSHOTS, TrainingView
from scratchformer.loading.bundle import load_model, snapshots_of
from scratchformer.plotdata import (
    aligned_head,
    alignment_scores,
    guided_head,
    snapshot_heatmap,
    training_curves,
    training_record,
)
from scratchformer.running.decoding import greedy
from tests.app.conftest import run_and_wait

SOURCE = "3 1 4 1 5"


@pytest.fixture
def training_window(make_window):
    """make_window (the Training view is in the window's Training group)."""
    return make_window


def _tab(qtbot, window) -> TrainingView:
    view = next(v for v in window.views if isinstance(v, TrainingView))
    window.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy() and view.current_run() is not None or view.empty.isVisible(),
                    timeout=60_000)
    return view


def test_curves_and_the_default_head_pure():
    curves = training_curves(training_record("reverse@step-000334"))  # a snapshot spec reads its parent run
    assert len(curves.train_loss) > 10 and curves.valid_loss and curves.valid_token_accuracy
    assert curves.snapshot_steps == [s.step for s in snapshots_of("reverse")]
    assert training_curves(training_record("blog")).empty
    bundle = load_model("reverse")
    _, trace = bundle.run(bundle.prepare_run(SOURCE))
    head = aligned_head(trace)
    weights = trace.find("decoder.1.cross_attn.weights").tensor[0].float().numpy()  # (H, T, S)
    digits = len(SOURCE.split())
    # the chosen head reads the source backwards: the row that emits target digit i looks at source digit n-1-i
    assert weights[head, :digits].argmax(-1).tolist() == list(range(digits - 1, -1, -1))
    hm = snapshot_heatmap(trace, head=head, caption="final")
    assert hm is not None and hm.title.startswith("final") and hm.values.shape == weights.shape[1:]


def test_alignment_scores_prefer_heads_whose_rows_point_at_different_tokens():
    eye = np.eye(4)
    one_column = np.zeros((4, 4))
    one_column[:, 2] = 1  # peaked, but every row stares at the same token
    uniform = np.full((4, 4), 0.25)
    scores = alignment_scores(np.stack([one_column, uniform, eye]))
    assert scores.argmax() == 2 and scores[2] == 1.0
    assert scores[1] < scores[0] == 0.25  # uniform rows are neither peaked nor spread (their argmax is one token)


def test_en_hi_defaults_to_its_guided_head():
    bundle = load_model("en-hi")
    guided = guided_head(bundle.config)
    assert guided == (1, 0)  # decoder layer 2, head 1: the head trained on the gold alignment
    _, trace = bundle.run(bundle.prepare_run("the girl eats an apple"))
    assert aligned_head(trace, guided=guided) == 0
    assert aligned_head(trace, layer=0, guided=guided) == aligned_head(trace, layer=0)  # other layers: by score
    assert guided_head(load_model("reverse").config) is None


def test_slider_changes_map_and_output(qtbot, training_window):
    w = training_window(source=SOURCE, target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _tab(qtbot, w)
    assert not view.empty.isVisible()
    assert view.loss_plot.listDataItems() and view.accuracy_plot.listDataItems()
    snaps = snapshots_of("reverse")
    assert view.slider.maximum() == len(snaps) - 1 and view.slider.value() == len(snaps) - 1
    assert view.markers[0].value() == snaps[-1].step

    final_bundle = w.current_bundle()
    src_ids = final_bundle.prepare(SOURCE).src[0].tolist()
    final_greedy = final_bundle.tgt_tokenizer.decode(greedy(final_bundle, src_ids, final_bundle.generation_limit(
        len(src_ids))))
    last_output = view.snapshot_output_text()
    assert last_output == final_greedy
    assert view.type_box.currentData() == "decoder.cross_attn"
    assert view.layer_box.currentIndex() == view.layer_box.count() - 1
    assert view.head_box.currentIndex() == aligned_head(view.current_run().trace)
    last_maps = view.current_heatmaps()
    assert len(last_maps) == 2

    view.slider.setValue(0)
    qtbot.waitUntil(lambda: view.current_run() is not None, timeout=60_000)
    assert view.markers[0].value() == snaps[0].step
    early_output = view.snapshot_output_text()
    assert early_output != final_greedy
    early_maps = view.current_heatmaps()
    assert len(early_maps) == 2
    a, b = early_maps[0].values, last_maps[0].values
    assert a.shape != b.shape or not np.allclose(a, b)
    np.testing.assert_allclose(early_maps[1].values, last_maps[1].values)  # the final model's map stays
    assert str(snaps[0].step) in view.snapshot_output.text()

    view.slider.setValue(view.slider.maximum())  # cached: no new run
    assert not view.is_busy() and view.snapshot_output_text() == last_output


def test_every_snapshot_reads_the_windows_decoder_input_so_rows_line_up(qtbot, training_window):
    w = training_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    view = _tab(qtbot, w)
    translation = w.current_result().inputs.translation
    assert translation in view.reads_note.text() and "rows line up" in view.reads_note.text()
    assert view.head_box.currentIndex() == 0 and view.head_box.currentText() == "1 (guided in layer 2)"
    view.slider.setValue(0)
    qtbot.waitUntil(lambda: view.current_run() is not None, timeout=60_000)
    first, final = view.current_heatmaps()
    assert first.values.shape == final.values.shape and list(first.row_labels) == list(final.row_labels)
    assert first.values.max(axis=1).mean() < 0.5  # at step 32 the head still spreads its weight
    assert view.snapshot_output_text() != translation  # what the snapshot writes on its own


def test_play_stops_at_end_and_when_hidden(qtbot, training_window):
    w = training_window(source=SOURCE, target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _tab(qtbot, w)
    view.timer.setInterval(10)
    view.play_button.setChecked(True)  # at the last snapshot: starts again from the first
    assert view.slider.value() == 0 and view.timer.isActive()
    qtbot.waitUntil(lambda: not view.timer.isActive(), timeout=120_000)
    assert view.slider.value() == view.slider.maximum() and not view.play_button.isChecked()
    view.play_button.setChecked(True)
    assert view.timer.isActive()
    w.tabs.setCurrentIndex(0)  # the tab is hidden: playing stops
    assert not view.timer.isActive() and not view.play_button.isChecked()


def test_inspect_snapshot_runs_it_in_the_window(qtbot, training_window):
    w = training_window(source=SOURCE, target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _tab(qtbot, w)
    view.slider.setValue(1)
    qtbot.waitUntil(lambda: view.current_run() is not None, timeout=60_000)
    step = snapshots_of("reverse")[1].step
    view.inspect_snapshot()
    qtbot.waitUntil(lambda: not w.is_busy() and w.current_bundle().name == f"reverse@step-{step:06d}",
                    timeout=60_000)
    assert w.model_spec() == f"reverse@step-{step:06d}"
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    assert view.slider.value() == 1  # the same run: the tab stays where it was


def test_model_without_snapshots_shows_placeholder(qtbot, training_window):
    w = training_window(source="machine learning using PyTorch", target="", model="blog")
    run_and_wait(qtbot, w)
    view = _tab(qtbot, w)
    assert view.empty.isVisible() and view.empty.text() == NO_SNAPSHOTS
    assert not view.controls.isVisible() and view.current_heatmaps() == []
    assert not view.is_busy()


def test_closing_during_a_snapshot_run_leaves_no_thread(qtbot, training_window):
    w = training_window(source="5 9 2 6", target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _tab(qtbot, w)
    view.slider.setValue(2)  # not cached: a worker starts
    view.play_button.setChecked(True)
    w.close()  # the view waits for its worker; the conftest fails the test if a thread or timer survives
    assert not view.is_busy() and not view.timer.isActive()
