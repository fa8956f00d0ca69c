"""`scratchformer train --progress-json`: the JSON-lines channel the window's Train… dialog follows, the graceful
stop it relies on (a cancelled run saves a loadable model and its last snapshot), and SIGTERM as "stop and save"."""

from __future__ import annotations

import json
import signal

import pytest
import torch

from scratchformer.cli import main
from scratchformer.commands.train import stop_on_terminate
from scratchformer.loading.checkpoint import is_checkpoint, load_checkpoint, snapshot_dirs
from scratchformer.training import TrainOptions, train

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--quiet", "--threads", "1"]


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """Training sets torch's thread count for the process; give the next tests the one they had."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_progress_lines_follow_the_run(tmp_path):
    progress, out = tmp_path / "progress.jsonl", tmp_path / "run"
    code = main(["train", "--task", "copy", "--out", str(out), "--epochs", "1", "--max-steps", "12",
                 "--snapshots", "2", *TINY, "--progress-json", str(progress)])
    assert code == 0
    events = _events(progress)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and "step" in kinds and kinds.count("snapshot") == 2
    start, done = events[0], events[-1]
    assert start["planned_steps"] == 12 and start["snapshot_steps"] == [6, 12] and start["parameters"] > 0
    steps = [e["step"] for e in events if e["event"] == "step"]
    assert steps[0] == 1 and steps == sorted(steps) and all(e["loss"] > 0 for e in events if e["event"] == "step")
    assert done == {**done, "stopped": "max_steps", "steps": 12, "out": str(out)}
    assert sorted(snapshot_dirs(out)) == [6, 12] and is_checkpoint(out)


def test_bad_input_is_one_error_line(tmp_path, capsys):
    progress = tmp_path / "progress.jsonl"
    code = main(["train", "--data", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "run"), *TINY,
                 "--progress-json", str(progress)])
    assert code == 2
    (event,) = _events(progress)
    assert event["event"] == "error" and "missing.tsv does not exist" in event["message"]
    assert event["message"] in capsys.readouterr().err  # the same sentence the command prints


def test_a_cancelled_run_keeps_a_loadable_model_and_its_last_snapshot(tmp_path):
    out = tmp_path / "run"
    opts = TrainOptions(task="copy", out=str(out), epochs=5, d_model=16, heads=2, layers=1, d_ff=32, snapshots=4,
                        valid_greedy=0, threads=1)
    events = []
    result = train(opts, progress=False, on_event=events.append,
                   should_stop=lambda: any(e["event"] == "step" and e["step"] >= 7 for e in events))
    assert result["stopped"] == "cancelled" and result["steps"] == 7
    model, _, _ = load_checkpoint(out)  # never trained to an epoch's end, yet loadable
    assert sum(p.numel() for p in model.parameters()) == events[0]["parameters"]
    assert max(snapshot_dirs(out)) == 7  # the snapshot where it stopped
    assert json.loads((out / "training.json").read_text())["stopped"] == "cancelled"


def test_sigterm_asks_to_stop_instead_of_killing():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_terminate(True) as stop:
        assert not stop.is_set()
        signal.raise_signal(signal.SIGTERM)  # this process: it would end here without the handler
        assert stop.is_set()
    assert signal.getsignal(signal.SIGTERM) is before
    with stop_on_terminate(False) as stop:  # without --progress-json nothing changes
        assert signal.getsignal(signal.SIGTERM) is before
