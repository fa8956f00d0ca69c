"""Training from the window: what to train (TrainRequest), where it goes, and the process that does it.

The run is a separate process, `python -m scratchformer train … --progress-json FILE`, so training never competes
with the UI thread for the interpreter and can outlive the window if the user wants it to. The child writes one
JSON object per line to FILE (start, step, epoch, snapshot, done or error; see commands/train.py's ProgressJson);
a QTimer here reads the new lines a few times a second and turns them into signals. Cancel sends SIGTERM
(CTRL_BREAK on Windows), which the child treats as "stop after this update and save": it keeps the last snapshot,
the resume state and a loadable checkpoint. Checkpoints are written to a temporary folder and renamed into place
(scratchformer/loading/checkpoint.py), so no moment of the run leaves half of one behind.

FILE and the child's stderr live next to the output folder, in <out>.training/ (log_folder): a run the window
follows to its end tidies it away; a run left training when the window closes ("keep training") keeps writing its
progress there, beside the model it is saving, where the user can read it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal

from scratchformer.errors import UserError
from scratchformer.loading.checkpoint import is_checkpoint

POLL_MS = 200
TASKS = ("en-hi", "copy", "reverse", "sort")


@dataclass
class TrainRequest:
    """One training run as the dialog describes it; `arguments()` is its `scratchformer train` command line."""

    out: str
    task: str | None = "copy"  # a built-in task, or None with `data` (pairs TSV) or `text` (plain text)
    data: str | None = None
    text: str | None = None
    d_model: int = 32
    heads: int = 2
    layers: int = 1
    d_ff: int = 64
    epochs: int = 10
    snapshots: int = 6
    max_steps: int | None = None
    max_minutes: float | None = None
    threads: int = 2
    name: str | None = None
    extra: list[str] = field(default_factory=list)  # further `scratchformer train` options, passed as they are

    def label(self) -> str:
        """What is trained, for people: "copy", "pairs.tsv"."""
        return self.task or Path(self.data or self.text or "model").name

    def arguments(self) -> list[str]:
        args = ["train"]
        if self.data:
            args += ["--data", self.data]
        elif self.text:
            args += ["--text", self.text]
        else:
            args += ["--task", self.task or "copy"]
        args += ["--out", self.out, "--epochs", str(self.epochs), "--d-model", str(self.d_model),
                 "--heads", str(self.heads), "--layers", str(self.layers), "--d-ff", str(self.d_ff),
                 "--snapshots", str(self.snapshots), "--threads", str(self.threads)]
        if self.max_steps:
            args += ["--max-steps", str(self.max_steps)]
        if self.max_minutes:
            args += ["--max-minutes", f"{self.max_minutes:g}"]
        if self.name:
            args += ["--name", self.name]
        return args + list(self.extra)


LOG_SUFFIX = ".training"  # <out>.training/, next to the output folder: progress.jsonl, stderr.txt, pid
LOG_FILES = ("progress.jsonl", "stderr.txt", "pid")
PID_FILE = "pid"


def log_folder(out: str | Path) -> Path:
    """Where a run writes its progress and its process id: beside its output folder, <out>.training/."""
    out = Path(out)
    return out.with_name(out.name + LOG_SUFFIX)


def _alive(pid: int) -> bool:
    """Whether a process with this id still runs (on Windows, assumed so: its folder then waits)."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists but belongs to someone else
        return True
    return True


def run_still_writing(out: str | Path) -> bool:
    """Whether a run left training by a closed window still writes `out` (its pid file names a live process)."""
    try:
        pid = int((log_folder(out) / PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return False
    return _alive(pid)


def runs_folder() -> Path:
    """Where trained models go by default: <the user's data folder>/scratchformer/runs (never the package)."""
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    return Path(base or Path.home() / ".local" / "share") / "scratchformer" / "runs"


def default_output_folder(stem: str, parent: Path | None = None) -> Path:
    """A folder that does not exist yet under `parent` (default runs_folder()): copy, copy-2, copy-3, …"""
    parent = parent or runs_folder()
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in stem).strip("-.") or "model"
    candidate, n = parent / stem, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{stem}-{n}"
    return candidate


def check_output_folder(path: str | Path) -> Path:
    """The folder a run may write: new or empty (an earlier run's folder would mix two runs' snapshots), with its
    nearest existing parent writable. UserError with one sentence otherwise."""
    text = str(path).strip()
    if not text:
        raise UserError("Choose an output folder for the trained model.")
    folder = Path(text).expanduser().absolute()
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file; choose a folder for the trained model.")
    if folder.is_dir() and any(folder.iterdir()):
        raise UserError(f"{folder} already holds files; choose an empty or new folder.")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"Cannot write to the folder {existing} (permission denied); choose another folder.")
    return folder


class TrainingRunner(QObject):
    """Starts, follows and stops one training process at a time.

    Signals: started(request), progress(event dict, as the child wrote it), finished(stopped, out, message) where
    stopped is "finished", "cancelled", "max_steps", "max_minutes", "interrupted" or "failed" and message is one
    sentence for people. State for the dialog: planned_steps, step, loss, tokens_per_second, curve (step, loss),
    valid_curve (step, valid loss), accuracy_curve (step, valid token accuracy), snapshots (dicts as in
    training.json).
    """

    started = Signal(object)
    progress = Signal(dict)
    finished = Signal(str, str, str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.request: TrainRequest | None = None
        self.process: subprocess.Popen | None = None
        self.timer = QTimer(self)
        self.timer.setObjectName("training-progress")
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.poll)
        self._folder: Path | None = None  # <out>.training/: the progress file and the child's stderr (log_folder)
        self._offset = 0
        self._partial = b""
        self.stopping = False
        self._reset()

    def _reset(self) -> None:
        self.planned_steps = 0
        self.step = 0
        self.loss: float | None = None
        self.tokens_per_second: float | None = None
        self.parameters: int | None = None
        self.curve: list[tuple[int, float]] = []
        self.valid_curve: list[tuple[int, float]] = []
        self.accuracy_curve: list[tuple[int, float]] = []
        self.snapshots: list[dict] = []
        self.done: dict | None = None
        self.error: str | None = None

    def is_running(self) -> bool:
        return self.process is not None

    def command(self, request: TrainRequest, progress_file: Path) -> list[str]:
        return [sys.executable, "-m", "scratchformer", *request.arguments(), "--quiet",
                "--progress-json", str(progress_file)]

    def start(self, request: TrainRequest) -> None:
        """Check the output folder and start the process; UserError (one sentence) if it cannot start."""
        if self.is_running():
            raise UserError("A training run is already in progress; cancel it or wait for it to finish.")
        wanted = Path(str(request.out).strip()).expanduser().absolute()
        if str(request.out).strip() and run_still_writing(wanted):
            raise UserError(f"A training run left going by a closed window still writes {wanted}; choose another "
                            "folder, or wait for it to finish.")  # fmt: skip
        out = check_output_folder(request.out)
        folder = log_folder(out)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name in LOG_FILES:  # an earlier, ended run's log of the same name: this run's starts empty
                (folder / name).unlink(missing_ok=True)
        except OSError as exc:
            raise UserError(f"Cannot create the folder {folder}: {exc.strerror or exc}.") from None
        request.out = str(out)
        self._reset()
        self.request, self.stopping = request, False
        self._folder = folder
        progress_file = self._folder / "progress.jsonl"
        progress_file.touch()
        self._offset, self._partial = 0, b""
        flags = {"start_new_session": True}  # Ctrl-C in the terminal of the window does not reach it
        if os.name == "nt":
            flags = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # so it can receive CTRL_BREAK
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            with open(self._folder / "stderr.txt", "wb") as stderr:
                self.process = subprocess.Popen(self.command(request, progress_file), stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL, stderr=stderr, env=env, **flags)
        except OSError as exc:
            self._cleanup()
            raise UserError(f"The training process could not start: {exc.strerror or exc}.") from None
        (self._folder / PID_FILE).write_text(str(self.process.pid), encoding="utf-8")  # see run_still_writing
        self.timer.start()
        self.started.emit(request)

    def stop(self) -> None:
        """Ask the process to stop after the update in progress and save (it keeps its snapshots and checkpoint)."""
        if self.process is None or self.stopping:
            return
        self.stopping = True
        try:
            if os.name == "nt":
                self.process.send_signal(signal.CTRL_BREAK_EVENT)
            else:
                self.process.send_signal(signal.SIGTERM)
        except OSError:  # it has just ended: poll() will say how
            pass

    def detach(self) -> None:
        """Stop following the run and leave the process training (the window is closing; it saves on its own)."""
        self.timer.stop()
        self.process = None  # the child keeps writing its progress file in <out>.training/, beside the model
        self._folder = None

    def poll(self) -> None:
        """Read the progress written since the last call; when the process has ended, say how it ended."""
        if self.process is None:
            self.timer.stop()
            return
        code = self.process.poll()
        for event in self._new_events():
            self._take(event)
        if code is not None:
            self.timer.stop()
            self._ended(code)

    def _new_events(self) -> list[dict]:
        try:
            with open(self._folder / "progress.jsonl", "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # a line still being written
        events = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        return events

    def _take(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "start":
            self.planned_steps = int(event.get("planned_steps") or 0)
            self.parameters = event.get("parameters")
        elif kind == "step":
            self.step = int(event["step"])
            self.loss = float(event["loss"])
            self.tokens_per_second = event.get("tokens_per_second")
            self.curve.append((self.step, self.loss))
        elif kind in ("epoch", "snapshot"):
            self.step = max(self.step, int(event.get("step", 0)))
            if kind == "snapshot":
                self.snapshots.append(event)
            for curve, key in ((self.valid_curve, "valid_loss"), (self.accuracy_curve, "valid_token_accuracy")):
                if isinstance(event.get(key), (int, float)) and all(s != event["step"] for s, _ in curve):
                    curve.append((int(event["step"]), float(event[key])))  # a snapshot at an epoch's end: once
                    curve.sort()
        elif kind == "done":
            self.done = event
            self.step = max(self.step, int(event.get("steps") or 0))
        elif kind == "error":
            self.error = str(event.get("message") or "")
        self.progress.emit(event)

    def _ended(self, code: int) -> None:
        out = self.request.out if self.request is not None else ""
        saved = bool(out) and is_checkpoint(out)
        if self.done is not None and code == 0:
            stopped = str(self.done.get("stopped") or "finished")
            message = _ending_sentence(stopped, self.step, out)
        elif self.error:
            stopped, message = "failed", self.error
        elif self.stopping:
            stopped = "cancelled"
            message = (f"Training was cancelled at step {self.step}; the model so far is in {out}." if saved else
                       "Training was cancelled before it had anything to save.")
        else:
            stopped = "failed"
            last = self._last_error_line()
            message = "The training process stopped unexpectedly" + (f": {last}" if last else f" ({_exit(code)}).")
            if not message.endswith("."):
                message += "."
        self.process = None
        self._cleanup()
        self.finished.emit(stopped, out if saved else "", message)

    def _last_error_line(self) -> str:
        try:
            lines = (self._folder / "stderr.txt").read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return ""
        last = lines[-1].strip() if lines else ""
        return last.removeprefix("scratchformer: ")

    def _cleanup(self) -> None:
        """The run ended while followed: its log folder goes (the window showed the progress; the model's own
        training.json keeps its history). Only our files, and the folder only if nothing else is in it."""
        if self._folder is not None:
            for name in LOG_FILES:
                try:
                    (self._folder / name).unlink(missing_ok=True)
                except OSError:
                    pass
            try:
                self._folder.rmdir()
            except OSError:  # someone else's file in it: it stays
                pass
            self._folder = None

    def wait(self, timeout_s: float = 60.0) -> bool:
        """Block until the process has ended and its end is reported (for shutdown and tests); True if it did."""
        if self.process is None:
            return True
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        self.poll()
        return True


def _exit(code: int) -> str:
    """How a process ended, for people: "exit 3", or "killed by signal SIGKILL" (Popen's negative codes)."""
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def _ending_sentence(stopped: str, step: int, out: str) -> str:
    why = {"finished": "Training finished", "cancelled": "Training was cancelled",
           "max_steps": "Training reached its step limit", "max_minutes": "Training reached its time limit",
           "interrupted": "Training was interrupted"}.get(stopped, "Training stopped")
    return f"{why} after {step} steps; the model is saved in {out}."
