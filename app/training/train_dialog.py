"""File › Train…: choose a task (or your own file), a model size, epochs and snapshots, then train in a separate
process while the window stays responsive; the live loss curve appears in the Training tab, and the trained model
opens in the window when the run ends (finished, or cancelled with something saved).

The dialog is not modal and belongs to the window (one per window, with one TrainingRunner); closing it does not
stop the run, and the window asks before it closes while a run is going (training_close.py). The fields are in
train_form.py; the parameter count and time estimate are computed off the UI thread (training_estimate.py).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout

from scratchformer.errors import UserError

from ..work.jobs import JobRunner
from .train_form import TrainForm
from .training_estimate import Estimate, estimate_job
from .training_runner import TrainingRunner

ESTIMATE_DELAY_MS = 400


class TrainDialog(QDialog):
    def __init__(self, window, runner: TrainingRunner) -> None:
        super().__init__(window)
        self.main, self.runner = window, runner
        self.setWindowTitle("Train a model")
        self._estimates = JobRunner("scratchformer-train-estimate")  # newer choices cancel older estimates
        self.estimate: Estimate | None = None
        self.form = TrainForm()
        self.estimate_label = self.form.estimate_label

        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #b00020; font-weight: bold;")
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.setVisible(False)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.status_label = QLabel("Not started.")
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setWordWrap(True)

        self.start_button = QPushButton("Start training")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel training")
        self.cancel_button.setToolTip("Stop after the current step; the last snapshot and the model so far are kept")
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button = QPushButton("Close")
        self.close_button.setToolTip("Hide this dialog; a run in progress goes on (File › Train… shows it again)")
        self.close_button.clicked.connect(self.hide)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.start_button, self.cancel_button, self.close_button):
            buttons.addWidget(b)

        layout = QVBoxLayout(self)
        layout.addWidget(self.form)
        layout.addWidget(self.error_label)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.status_label)
        layout.addLayout(buttons)

        self.estimate_timer = QTimer(self)
        self.estimate_timer.setObjectName("train-estimate-delay")
        self.estimate_timer.setSingleShot(True)
        self.estimate_timer.setInterval(ESTIMATE_DELAY_MS)
        self.estimate_timer.timeout.connect(self._estimate)
        self.form.changed.connect(self._changed)
        runner.progress.connect(self._on_progress)
        runner.finished.connect(self._on_finished)
        self._changed()
        self._update_buttons()

    # --- parameter count and time estimate (off the UI thread) ----------------------------------------------

    def _changed(self) -> None:
        self._estimates.cancel()
        self.estimate = None
        self.estimate_label.setText("Counting the parameters…")
        self.show_error("")
        self.estimate_timer.start()

    def _estimate(self) -> None:
        try:
            request = self.form.request()
        except UserError as exc:
            self.estimate_label.setText("")
            self.show_error(str(exc))
            return
        opts = self.form.options(request)
        self._estimates.start(lambda job: estimate_job(opts, job), on_progress=self._on_estimate,
                              on_result=self._on_estimate, on_error=self._on_estimate_failed)

    def _on_estimate(self, estimate: Estimate) -> None:
        """The parameter count (the job's progress), then the same with the time (its result)."""
        self.estimate = estimate
        text = estimate.describe()
        if estimate.seconds is None:
            text += " · timing a few steps…"
        self.estimate_label.setText(text)

    def _on_estimate_failed(self, message: str) -> None:
        self.estimate_label.setText("")
        self.show_error(message)

    def is_estimating(self) -> bool:
        return self.estimate_timer.isActive() or self._estimates.busy()

    def parameter_count(self) -> int | None:
        return self.estimate.parameters if self.estimate is not None else None

    # --- running -------------------------------------------------------------------------------------------

    def show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def start(self) -> None:
        try:
            request = self.form.request()
            self.runner.start(request)
        except UserError as exc:
            self.show_error(str(exc))
            return
        self.show_error("")
        self.form.out_edit.setText(request.out)
        self.progress_bar.setRange(0, 0)  # busy until the run says how many steps it plans
        self.status_label.setText(f"Starting: preparing the {request.label()} data and the model…")
        self.main.show_message(f"Training {request.label()} in {request.out}…")
        self.main.tabs.setCurrentWidget(training_view(self.main))
        self._update_buttons()

    def cancel(self) -> None:
        if self.runner.is_running():
            self.runner.stop()
            self.status_label.setText("Stopping after the current step and saving…")
            self._update_buttons()

    def _update_buttons(self) -> None:
        running = self.runner.is_running()
        self.start_button.setEnabled(not running)
        self.cancel_button.setEnabled(running and not self.runner.stopping)
        self.form.setEnabled(not running)

    def _on_progress(self, event: dict) -> None:
        r = self.runner
        if r.planned_steps:
            self.progress_bar.setRange(0, r.planned_steps)
            self.progress_bar.setValue(min(r.step, r.planned_steps))
        parts = [f"step {r.step:,} of {r.planned_steps:,}" if r.planned_steps else "starting"]
        if r.loss is not None:
            parts.append(f"loss {r.loss:.3f}")
        if r.tokens_per_second:
            parts.append(f"{r.tokens_per_second:,.0f} tokens/s")
        if r.valid_curve:
            parts.append(f"valid loss {r.valid_curve[-1][1]:.3f}")
        if r.snapshots:
            parts.append(f"{len(r.snapshots)} snapshot{'s' * (len(r.snapshots) > 1)} saved")
        text = " · ".join(parts)
        if r.stopping:
            text = "Stopping and saving… " + text
        self.status_label.setText(text)
        self.main.show_message(f"Training {r.request.label()}: {text}")
        if event.get("event") in ("step", "epoch", "snapshot") and r.curve:
            training_view(self.main).show_live_curve(r.curve, r.valid_curve, r.accuracy_curve)

    def _on_finished(self, stopped: str, out: str, message: str) -> None:
        self._update_buttons()
        self.progress_bar.setRange(0, max(1, self.runner.planned_steps))
        if stopped == "finished":
            self.progress_bar.setValue(self.progress_bar.maximum())
        self.status_label.setText(message)
        self.form.out_edited = False
        self.form.file_changed()  # a new default folder for the next run (this clears the error line: first)
        if stopped == "failed":
            self.show_error(message)
            self.main.show_error(message)
        else:
            self.main.show_message(message)
        if getattr(self.main, "close_after_training", False):
            self.main.close()
        elif out:
            self.main.open_model(out)  # sets the model choice to the folder and runs the current input

    def shutdown(self) -> None:
        """Stop the delay timer and wait for estimates in progress (no thread may outlive the window)."""
        self.estimate_timer.stop()
        self._estimates.shutdown()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.estimate_timer.stop()
        super().closeEvent(event)


def training_view(window):
    from ..views.training_view import TrainingView

    return next(v for v in window.views if isinstance(v, TrainingView))


def open_train_dialog(window) -> TrainDialog:
    """File › Train…: the window's dialog (made on first use, with the runner it keeps), shown and raised."""
    dialog = getattr(window, "train_dialog", None)
    if dialog is None:
        window.training_runner = TrainingRunner(window)
        dialog = window.train_dialog = TrainDialog(window, window.training_runner)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
