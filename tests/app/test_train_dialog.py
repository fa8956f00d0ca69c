"""File › Train…: the parameter count shown before training, a short run in a separate process that ends with the
trained model open in the window, Cancel (which keeps a loadable model), bad input as one sentence, and the
question the window asks when it is closed during training."""

from __future__ import annotations

import json
import os
import signal

import pytest
from PySide6.QtWidgets import QMessageBox

from app.training.train_dialog import TrainDialog, open_train_dialog, training_view
from app.training.train_form import SIZES
from app.training.training_close import KEEP, STAY, STOP
from app.training.training_runner import TrainingRunner, TrainRequest, check_output_folder
from scratchformer.errors import UserError
from scratchformer.loading.checkpoint import is_checkpoint, load_checkpoint, snapshot_dirs
from scratchformer.training import TrainOptions, build_config, load_data
from scratchformer.transformer.model import Transformer

RUN_TIMEOUT_MS = 120_000


@pytest.fixture
def dialog(qtbot, make_window, tmp_path):
    """The Train… dialog of a window showing the copy model; copy task, tiny model, output in tmp_path."""
    w = make_window(source="3 1 4 1 5", target="", model="copy")
    d = open_train_dialog(w)
    d.form.set_task("copy")
    d.form.set_size("tiny")
    d.form.threads.setValue(1)
    d.form.out_edit.setText(str(tmp_path / "run"))
    d.form.out_edited = True
    yield d
    runner = w.training_runner
    if runner.is_running():  # a failed test: leave no process behind
        runner.stop()
        runner.wait(60)
    d.shutdown()


def _count(d: TrainDialog, qtbot) -> int:
    qtbot.waitUntil(lambda: d.parameter_count() is not None, timeout=60_000)
    return d.parameter_count()


def _model_size(task: str, size: tuple[int, int, int, int]) -> int:
    d_model, heads, layers, d_ff = size
    opts = TrainOptions(task=task, d_model=d_model, heads=heads, layers=layers, d_ff=d_ff)
    model = Transformer(build_config(opts, load_data(opts)))
    return sum(p.numel() for p in model.parameters())


def _start(d: TrainDialog, qtbot, epochs: int, snapshots: int) -> None:
    d.form.epochs.setValue(epochs)
    d.form.snapshots.setValue(snapshots)
    qtbot.waitUntil(lambda: not d.is_estimating(), timeout=60_000)
    d.start_button.click()
    assert d.main.training_runner.is_running(), d.error_label.text()


def _wait_steps(qtbot, d: TrainDialog, steps: int) -> None:
    """Until the run has made `steps` updates (or ended: then say why)."""
    runner = d.main.training_runner
    qtbot.waitUntil(lambda: runner.step >= steps or not runner.is_running(), timeout=RUN_TIMEOUT_MS)
    assert runner.is_running(), d.status_label.text()


def _wait_opened(qtbot, window, out) -> None:
    """The window switched its model to the trained folder and ran the current input through it."""
    qtbot.waitUntil(lambda: window.model_spec() == str(out) and not window.is_busy(), timeout=60_000)
    result = window.current_result()
    assert result is not None and result.request.model == str(out), window.message_text()


def test_parameter_count_is_the_models(dialog, qtbot):
    assert _count(dialog, qtbot) == _model_size("copy", SIZES["tiny"])
    assert f"{_model_size('copy', SIZES['tiny']):,} parameters" in dialog.estimate_label.text()
    dialog.form.d_model.setValue(48)  # an edited size is "custom", and counted again
    assert dialog.form.size_box.currentData() == "custom"
    assert _count(dialog, qtbot) == _model_size("copy", (48, 2, 1, 64))
    qtbot.waitUntil(lambda: "on this machine" in dialog.estimate_label.text(), timeout=60_000)  # the time estimate


def test_bad_input_is_one_sentence(dialog, qtbot, tmp_path):
    binary = tmp_path / "latin1.tsv"
    binary.write_bytes("caf\xe9\tcoffee\n".encode("latin-1"))
    dialog.form.set_task("file", str(binary))
    qtbot.waitUntil(lambda: dialog.error_label.isVisible(), timeout=30_000)
    assert dialog.error_label.text() == f"{binary} is not UTF-8 text."
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    dialog.form.file_edit.setText(str(empty))
    dialog.form.file_changed()
    qtbot.waitUntil(lambda: "is empty" in dialog.error_label.text(), timeout=30_000)
    dialog.form.set_task("copy")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    dialog.form.out_edit.setText(str(a_file))
    dialog.start_button.click()
    assert not dialog.main.training_runner.is_running()
    assert dialog.error_label.text() == f"{a_file} is a file; choose a folder for the trained model."
    with pytest.raises(UserError, match="already holds files"):
        check_output_folder(tmp_path)


def test_short_run_completes_and_opens_the_model(dialog, qtbot, tmp_path):
    w, runner, out = dialog.main, dialog.main.training_runner, tmp_path / "run"
    view = training_view(w)
    _start(dialog, qtbot, epochs=1, snapshots=3)
    _wait_steps(qtbot, dialog, 1)  # progress arrives while it trains
    assert (tmp_path / "run.training" / "progress.jsonl").is_file()  # beside the output folder, not in /tmp
    qtbot.waitUntil(lambda: view._live[0] in view.loss_plot.listDataItems() if getattr(view, "_live", None) else
                    False, timeout=10_000)
    assert w.tabs.currentWidget() is view  # the live loss curve is in the Training tab
    with qtbot.waitSignal(runner.finished, timeout=RUN_TIMEOUT_MS) as ended:
        pass
    stopped, saved, message = ended.args
    assert (stopped, saved) == ("finished", str(out)), message
    assert not (tmp_path / "run.training").exists()  # a run followed to its end tidies its progress folder
    assert dialog.progress_bar.value() == dialog.progress_bar.maximum() == runner.planned_steps
    assert "tokens/s" not in dialog.status_label.text() and str(out) in dialog.status_label.text()
    steps = sorted(snapshot_dirs(out))
    assert len(steps) == 3 and steps[-1] == runner.planned_steps
    assert [s["step"] for s in runner.snapshots] == steps and len(runner.curve) >= 2
    _wait_opened(qtbot, w, out)
    assert w.current_bundle().config.d_model == SIZES["tiny"][0]


def test_cancel_keeps_a_loadable_model(dialog, qtbot, tmp_path):
    w, runner, out = dialog.main, dialog.main.training_runner, tmp_path / "run"
    _start(dialog, qtbot, epochs=40, snapshots=6)
    _wait_steps(qtbot, dialog, 3)
    with qtbot.waitSignal(runner.finished, timeout=RUN_TIMEOUT_MS) as ended:
        dialog.cancel_button.click()
    stopped, saved, _ = ended.args
    assert (stopped, saved) == ("cancelled", str(out)) and runner.step < runner.planned_steps
    model, _, _ = load_checkpoint(out)
    assert sum(p.numel() for p in model.parameters()) == runner.parameters
    assert max(snapshot_dirs(out)) == runner.step  # the last snapshot: where it stopped
    _wait_opened(qtbot, w, out)


def test_closing_the_window_during_training_asks(dialog, qtbot, tmp_path, monkeypatch):
    w, runner, out = dialog.main, dialog.main.training_runner, tmp_path / "run"
    answers = []

    def answer(with_button):
        def exec_(box):
            answers.append(box.text())
            return with_button
        monkeypatch.setattr(QMessageBox, "exec", exec_)

    _start(dialog, qtbot, epochs=40, snapshots=2)
    _wait_steps(qtbot, dialog, 1)
    answer(STAY)
    w.close()
    assert len(answers) == 1 and "still running" in answers[0]
    assert w.isVisible() and runner.is_running()
    answer(STOP)
    w.close()
    assert len(answers) == 2 and w.isVisible()  # it closes once the model is saved
    qtbot.waitUntil(lambda: not w.isVisible(), timeout=RUN_TIMEOUT_MS)
    assert not runner.is_running() and is_checkpoint(out)
    load_checkpoint(out)


def test_keep_training_outlives_the_window_and_writes_its_progress_beside_the_model(dialog, qtbot, tmp_path,
                                                                                   monkeypatch):  # fmt: skip
    w, runner, out = dialog.main, dialog.main.training_runner, tmp_path / "run"
    _start(dialog, qtbot, epochs=40, snapshots=2)
    _wait_steps(qtbot, dialog, 1)
    process = runner.process
    questions = []

    def keep(box):
        questions.append(box.informativeText())
        return KEEP

    monkeypatch.setattr(QMessageBox, "exec", keep)
    w.close()
    assert not w.isVisible() and not runner.is_running()  # the window let go of it ...
    assert process.poll() is None  # ... and it goes on training
    log = tmp_path / "run.training" / "progress.jsonl"  # beside the model, not in a temporary folder
    assert str(log) in questions[0]
    with pytest.raises(UserError, match="still writes"):  # a second run cannot start writing the same folder
        TrainingRunner().start(TrainRequest(task="copy", out=str(out)))
    os.kill(process.pid, signal.SIGTERM)  # what Cancel would have sent: stop and save
    assert process.wait(RUN_TIMEOUT_MS / 1000) == 0
    load_checkpoint(out)
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert events[0]["event"] == "start" and events[-1]["event"] == "done" and events[-1]["out"] == str(out)
    assert any(e["event"] == "step" for e in events)

