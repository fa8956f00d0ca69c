"""Run › Compare with… in the window: en-hi against one of its snapshots colours the diagram by difference, the
Step view shows A, B and A − B equal to the core's maps, the strip and link go to steps, Stop comparing returns
to one map, a model without a step in common gives one sentence, and the comparison's numbers export."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.views.step_view import StepView
from scratchformer.analyses import diff as model_diff
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata.diff import block_shades, diff_step_maps
from tests.app.conftest import run_and_wait

SOURCE, TARGET = "the girl eats an apple", ""
SNAPSHOT = "en-hi@step-000032"


@pytest.fixture(scope="module")
def core_diff():
    """The core's diff of the same input, computed apart from the window."""
    return model_diff.compute(load_model("en-hi"), load_model(SNAPSHOT), SOURCE, TARGET)


def _compared(qtbot, make_window, spec=SNAPSHOT):
    w = make_window(source=SOURCE, target=TARGET, model="en-hi")
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    w.tabs.setCurrentWidget(next(v for v in w.views if isinstance(v, StepView)))
    w.comparison.compare_with(spec)
    qtbot.waitUntil(lambda: not w.comparison.is_busy(), timeout=60_000)
    return w


def _step_view(w) -> StepView:
    return next(v for v in w.views if isinstance(v, StepView))


def test_compare_with_a_snapshot(qtbot, make_window, core_diff):
    w = _compared(qtbot, make_window)
    diff = w.comparison.diff
    assert diff is not None, w.message_text()
    assert diff.first_difference == core_diff.first_difference is not None
    assert [s.step for s in diff.steps] == [s.step for s in core_diff.steps]
    # the diagram: each block shaded by its steps' largest difference, the same numbers as the core's
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=30_000)
    shades = block_shades(core_diff)
    assert any(v > 0 for v in shades.values())
    for key, item in w.diagram.items_by_key.items():
        if key in shades:
            assert item.difference is not None and item.difference[0] == pytest.approx(shades[key])
            assert "A vs B" in item.toolTip()
    differing = max(shades, key=shades.get)
    agreeing = [k for k, v in shades.items() if v == 0]
    if agreeing:
        assert w.diagram.difference_fill(differing) != w.diagram.difference_fill(agreeing[0])
    # the bar: the first difference, a strip bar per common step
    assert w.comparison.bar.isVisible() and core_diff.first_difference in w.comparison.bar.text.text()
    assert w.comparison.bar.steps == [s.step for s in core_diff.steps]

    # the Step view at an attention map of head 2: A, B and A − B as the core makes them
    view = _step_view(w)
    name = "decoder.0.cross_attn.weights"
    assert w.go_to_step(name, head=1)
    qtbot.waitUntil(lambda: not w.is_busy() and not view.is_busy() and len(view.current_heatmaps()) == 3,
                    timeout=30_000)
    shown = view.current_heatmaps()
    expected = diff_step_maps(core_diff, name, 0, 1)
    for got, want in zip(shown, (expected.a, expected.b, expected.difference)):
        np.testing.assert_allclose(got.values, want.values, rtol=1e-6, atol=1e-7)
    assert not np.allclose(shown[0].values, shown[1].values)  # an early snapshot attends differently
    np.testing.assert_allclose(shown[2].values, shown[0].values - shown[1].values, atol=1e-6)
    assert view.diff_panel.isVisible() and not view.heatmap.isVisible()
    assert "max |A − B|" in view.diff_panel.summary.text()
    assert w.comparison.bar.marker.isVisible()  # the strip marks the current step

    # the link to the first difference goes there
    w.comparison.bar.text.linkActivated.emit(core_diff.first_difference)
    assert w.current_step().name == core_diff.first_difference

    # Stop comparing: one map again, the usual colours
    w.comparison.stop()
    qtbot.waitUntil(lambda: not w.is_busy() and not view.is_busy(), timeout=30_000)
    assert w.comparison.diff is None and not w.comparison.bar.isVisible()
    assert len(view.current_heatmaps()) == 1 and not view.diff_panel.isVisible()
    assert all(item.difference is None for item in w.diagram.items_by_key.values())


def test_a_model_against_itself_agrees_everywhere(qtbot, make_window):
    w = _compared(qtbot, make_window, spec="en-hi")
    diff = w.comparison.diff
    assert diff is not None and diff.first_difference is None
    assert "no difference" in w.comparison.bar.text.text()
    assert all(item.difference is None or item.difference[0] <= 0 for item in w.diagram.items_by_key.values())


def test_a_new_run_is_compared_with_the_b_already_open(qtbot, make_window, monkeypatch):
    """B is opened once: a new run of the window while comparing reuses it; Stop comparing lets it go."""
    import app.compare.model_diff as window_diff

    opened = []
    real = window_diff._open
    monkeypatch.setattr(window_diff, "_open", lambda *a: opened.append(a[0]) or real(*a))
    w = _compared(qtbot, make_window, spec="en-hi")
    first = w.comparison.diff
    w.source_edit.setText("the boy reads a book")
    run_and_wait(qtbot, w)
    qtbot.waitUntil(lambda: not w.comparison.is_busy() and w.comparison.diff is not None, timeout=60_000)
    assert w.comparison.diff is not first and w.comparison.diff.first_difference is None
    assert opened == ["en-hi"]
    w.comparison.stop()
    assert w.comparison._opened is None


@pytest.mark.parametrize("spec, words", [
    ("llama-tiny-random", "no step can be compared"),  # nothing in common: another tokenizer, another architecture
    ("en-hi@step-000999", "step"),  # a snapshot that is not there
])
def test_bad_second_model_is_one_sentence(qtbot, make_window, spec, words):
    w = make_window(source=SOURCE, target=TARGET, model="en-hi")
    run_and_wait(qtbot, w)
    w.comparison.compare_with(spec)
    qtbot.waitUntil(lambda: not w.comparison.is_busy(), timeout=60_000)
    message = w.message_text()
    assert w.comparison.diff is None and not w.comparison.bar.isVisible()
    assert words in message and message.count(". ") == 0 and message.endswith(".") and "Traceback" not in message
    assert _step_view(w).current_heatmaps() and len(_step_view(w).current_heatmaps()) == 1


def test_different_vocabularies_are_said_once(qtbot, make_window):
    w = _compared(qtbot, make_window, spec="copy")
    assert w.comparison.diff is not None and w.comparison.diff.positions is not None
    message = w.message_text()
    assert message.count("tokenize this input differently") == 1 and "only where the token ids agree" in message


def test_the_comparison_exports(qtbot, make_window, core_diff, tmp_path, monkeypatch):
    from app.export import actions

    w = _compared(qtbot, make_window)
    name = "encoder.0.add_norm1.out"
    assert w.go_to_step(name)
    view = _step_view(w)
    qtbot.waitUntil(lambda: not w.is_busy() and not view.is_busy() and len(view.current_heatmaps()) == 3,
                    timeout=30_000)
    for fmt in ("png", "svg", "pdf"):
        target = tmp_path / f"diff.{fmt}"
        monkeypatch.setattr(actions, "ask_save_path", lambda *_a, t=target: str(t))
        w.request_export(f"view_{fmt}")
        assert target.exists() and target.stat().st_size > 1000, w.message_text()
    assert (tmp_path / "diff.svg").read_text().count("A − B") >= 1
    path = w.comparison.save_csv(tmp_path / "diff.csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    steps = [r for r in rows if r["kind"] == "step"]
    assert [r["name"] for r in steps] == [s.step for s in core_diff.steps]
    first = next(r for r in steps if r["first_difference"] == "1")
    assert first["name"] == core_diff.first_difference
    # then every parameter that differs (a snapshot: all of them), with its largest difference
    params = [r for r in rows if r["kind"] == "parameter"]
    assert [r["name"] for r in params] == [p.name for p in core_diff.parameters] and params
    for row, p in zip(params, core_diff.parameters):
        assert float(row["max_abs_diff"]) == pytest.approx(p.max_abs_diff, rel=1e-5)


def test_the_parameters_that_differ_are_listed_and_saved(qtbot, make_window, tmp_path):
    """A copy of en-hi with one weight changed: the bar says one parameter differs, Parameters… lists it with its
    largest difference, and the CSV ends with it."""
    import copy

    import torch

    from app.compare.parameter_diff_dialog import ParameterDiffDialog
    from scratchformer.loading.checkpoint import save_checkpoint

    changed_name = "decoder.1.cross_attn.out_proj.weight"
    bundle = load_model("en-hi")
    changed = copy.deepcopy(bundle.model)
    with torch.no_grad():
        changed.state_dict()[changed_name][3, 5] += 0.25
    save_checkpoint(tmp_path / "changed", changed, bundle.src_tokenizer, bundle.tgt_tokenizer)
    w = _compared(qtbot, make_window, spec=str(tmp_path / "changed"))
    diff = w.comparison.diff
    assert diff is not None, w.message_text()
    total = len(bundle.model.state_dict())
    bar = w.comparison.bar
    assert f"1 of {total} parameters differ" in bar.text.text() and bar.parameters_button.isEnabled()
    bar.parameters_button.click()
    dialog = w.findChild(ParameterDiffDialog, "parameterDiffDialog")
    assert dialog is not None and dialog.isVisible()
    table = dialog.table
    assert table.rowCount() == 1 and table.item(0, 0).text() == changed_name
    assert table.item(0, 1).text() == table.item(0, 2).text() == "128×128"
    assert table.item(0, 3).data(Qt.ItemDataRole.UserRole) == pytest.approx(0.25, rel=1e-5)
    assert table.item(0, 5).text() == "values differ"
    rows = list(csv.DictReader(io.StringIO(w.comparison.save_csv(tmp_path / "diff.csv").read_text())))
    assert [(r["kind"], r["name"]) for r in rows][-1] == ("parameter", changed_name)
    assert float(rows[-1]["max_abs_diff"]) == pytest.approx(0.25, rel=1e-5)
    w.comparison.stop()  # the table goes with the comparison
    qtbot.waitUntil(lambda: w.findChild(ParameterDiffDialog, "parameterDiffDialog") is None, timeout=5_000)


def test_parameter_rows_put_shape_changes_first_then_the_largest_difference():
    from scratchformer.analyses.diff import ModelDiff, ParameterDiff
    from scratchformer.plotdata.diff import parameter_rows

    d = ModelDiff("a", "b", [], 1e-5, [ParameterDiff("w1", (2, 2), (2, 2), 0.1, 0.01),
                                       ParameterDiff("w2", (2, 2), (3, 2), None),
                                       ParameterDiff("w3", (4,), (4,), 0.7, 0.2),
                                       ParameterDiff("w4", None, (1,), None)], 5)  # fmt: skip
    rows = parameter_rows(d)
    assert [(r.name, r.what) for r in rows] == [("w2", "shapes differ"), ("w4", "only in B"), ("w3", "values differ"),
                                               ("w1", "values differ")]  # fmt: skip
    assert rows[1].shape_a == "—" and rows[0].shape_b == "3×2"


def test_the_dialog_offers_the_snapshots_first(qtbot, make_window):
    from app.compare.compare_dialog import CompareDialog, choices

    offered = choices("en-hi", ["en-hi", "copy"])
    assert [spec for _, spec in offered] == [f"en-hi@step-{s:06d}" for s in (32, 64, 128, 256)] + ["copy"]
    assert choices("en-hi@step-000064", [])[0][1] == "en-hi"  # a snapshot: its final model first
    w = make_window(source=SOURCE, target=TARGET, model="en-hi")
    dialog = CompareDialog(w, "en-hi", ["en-hi", "copy"])
    qtbot.addWidget(dialog)
    got = []
    dialog.chosen.connect(got.append)
    dialog.list.setCurrentRow(1)
    dialog.accept()
    assert got == ["en-hi@step-000064"]
