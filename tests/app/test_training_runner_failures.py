"""How the window's training runner ends a run that goes wrong: a training process that reports an error (its
progress file's "error" line) ends "failed" with that sentence; one that dies without a word — killed, or a crash
whose traceback only reaches stderr — ends "failed" with a sentence that says so; in each case nothing is left
running, the log folder is tidied, and the Train… dialog lets the user start again and shows the sentence."""

from __future__ import annotations

import sys
import textwrap

import pytest

from app.training.train_dialog import open_train_dialog
from app.training.training_runner import TrainingRunner, TrainRequest

END_MS = 60_000

# Fake training processes (argv[1]: the progress file): they write what the real one writes, then end badly.
STARTED = textwrap.dedent("""
    import json, sys
    progress = open(sys.argv[1], "a")
    for event in ({"event": "start", "planned_steps": 40, "parameters": 123},
                  {"event": "step", "step": 3, "epoch": 1, "loss": 2.5, "tokens_per_second": 100.0}):
        progress.write(json.dumps(event) + "\\n")
    progress.flush()
""")
KILLED = STARTED + "import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n"
CRASHED = STARTED + "raise RuntimeError('CUDA error: an illegal memory access was encountered')\n"
SILENT = STARTED + "sys.exit(3)\n"


class FakeRunner(TrainingRunner):
    """The runner as it is, starting `script` instead of `python -m scratchformer train`."""

    def __init__(self, script: str) -> None:
        super().__init__()
        self.script = script

    def command(self, request, progress_file):
        return [sys.executable, "-c", self.script, str(progress_file)]


def _end(qtbot, runner: TrainingRunner, request: TrainRequest) -> tuple[str, str, str]:
    with qtbot.waitSignal(runner.finished, timeout=END_MS) as ended:
        runner.start(request)
    assert not runner.is_running() and not runner.timer.isActive()
    return tuple(ended.args)


def _request(tmp_path, **kw) -> TrainRequest:
    return TrainRequest(out=str(tmp_path / "run"), task="copy", d_model=8, heads=2, layers=1, d_ff=16, epochs=1,
                        snapshots=0, threads=1, **kw)  # fmt: skip


def test_a_reported_error_ends_failed_with_its_sentence(qtbot, tmp_path):
    runner = TrainingRunner()  # the real `scratchformer train`, refusing an option after it has started
    stopped, saved, message = _end(qtbot, runner, _request(tmp_path, extra=["--warmup", "0"]))
    assert (stopped, saved, message) == ("failed", "", "--warmup must be at least 1, not 0.")
    assert runner.error == message
    assert not (tmp_path / "run.training").exists()  # the log folder of a followed run is tidied


@pytest.mark.parametrize("script, says", [
    (KILLED, "The training process stopped unexpectedly (killed by signal SIGKILL)."),
    (CRASHED, "The training process stopped unexpectedly: RuntimeError: CUDA error: an illegal memory access was "
              "encountered."),
    (SILENT, "The training process stopped unexpectedly (exit 3)."),
], ids=["killed", "traceback", "silent-exit"])  # fmt: skip
def test_a_process_that_dies_without_a_word_ends_failed_with_a_sentence(qtbot, tmp_path, script, says):
    runner = FakeRunner(script)
    stopped, saved, message = _end(qtbot, runner, _request(tmp_path))
    assert (stopped, saved, message) == ("failed", "", says)
    assert runner.step == 3 and runner.planned_steps == 40  # what it said before it died was read
    assert "\n" not in message and "Traceback" not in message
    assert not (tmp_path / "run.training").exists()


def test_the_dialog_is_ready_again_after_a_crash(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setattr(TrainingRunner, "command",
                        lambda self, request, progress_file: [sys.executable, "-c", KILLED, str(progress_file)])
    w = make_window(source="3 1 4 1 5", target="", model="copy")
    d = open_train_dialog(w)
    d.form.set_task("copy")
    d.form.set_size("tiny")
    d.form.out_edit.setText(str(tmp_path / "run"))
    d.form.out_edited = True
    try:
        qtbot.waitUntil(lambda: not d.is_estimating(), timeout=60_000)
        with qtbot.waitSignal(w.training_runner.finished, timeout=END_MS):
            d.start_button.click()
            assert not d.start_button.isEnabled() and d.cancel_button.isEnabled()  # running
        says = "The training process stopped unexpectedly (killed by signal SIGKILL)."
        assert not w.training_runner.is_running()
        assert d.start_button.isEnabled() and not d.cancel_button.isEnabled() and d.form.isEnabled()
        assert d.error_label.text() == says and not d.error_label.isHidden()
        assert d.status_label.text() == says
        assert w.model_spec() == "copy"  # nothing was saved, so nothing is opened
        qtbot.waitUntil(lambda: not d.is_estimating(), timeout=60_000)  # the form's new estimate keeps the sentence
        assert d.error_label.text() == says and not d.error_label.isHidden()
    finally:
        if w.training_runner.is_running():
            w.training_runner.stop()
            w.training_runner.wait(60)
        d.shutdown()
