"""Head importance: zero each head in turn and see how much less sure the model is of its chosen output.

For the current input, the chosen tokens are the decoder input shifted by one (teacher forcing: typed, or the
model's own greedy output). One layers × heads map per attention type, in points of probability. The work runs
in a job (app/work/jobs.py) with a progress bar and a Cancel that stops it between two heads; a click on a cell goes
to that head.
"""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from scratchformer.patching.head_importance import HeadImportance, head_importance
from scratchformer.plotdata import Heatmap, importance_heatmaps, importance_step

from ..widgets.heatmap import HeatmapWidget
from ..work.jobs import Job, JobRunner
from .base import View


def measure_heads(bundle, inputs, job: Job) -> HeadImportance | None:
    """Zero every head of `bundle.model` in turn on these inputs (the work of a job: progress(done, total) after
    each head; None once cancelled)."""
    dev = bundle.device
    to = (lambda t: None if t is None else t.to(dev))  # noqa: E731
    return head_importance(bundle.model, to(inputs.src), to(inputs.tgt), to(inputs.src_pad), to(inputs.tgt_pad),
                           progress=job.progress, cancelled=job.cancelled)


class ImportanceView(View):
    title = "Head importance"
    explains = "importance"
    tooltip = "How much the output's probability drops when each head is zeroed in turn"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.measure_button = QPushButton("Measure head importance")
        self.measure_button.setToolTip("Zero every head in turn on the current input (in the background)")
        self.measure_button.clicked.connect(self.measure)
        bar.addWidget(self.measure_button)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        bar.addWidget(self.progress, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        bar.addWidget(self.cancel_button)
        layout.addLayout(bar)
        self.caption = QLabel(
            "For the current input: the drop in the mean probability of the output tokens (the decoder input "
            "shifted by one) when one head is zeroed, in points. Red: the model needs the head. Click a cell to "
            "go to that head."
        )
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.grid_host, 1)
        self.widgets: list[HeatmapWidget] = []
        self.maps: list[Heatmap] = []
        self._jobs = JobRunner("scratchformer-head-importance")  # one measurement at a time
        self._run = None  # the RunResult the maps were measured on

    # --- the job ---------------------------------------------------------------------------------------------

    def measure(self) -> None:
        result = self.main.current_result()
        if result is None:
            self.status.setText("Run a model first.")
            return
        if not result.bundle.config.has_decoder or result.inputs.tgt is None or result.inputs.tgt.shape[1] < 2:
            self.status.setText("Head importance needs a decoder input of at least one token after the start token.")
            return
        self.cancel()
        self._jobs.start(lambda job: measure_heads(result.bundle, result.inputs, job), on_progress=self._progress,
                         on_result=lambda importance: self._done(importance, result), on_error=self._ended)
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self.measure_button.setEnabled(False)
        self.status.setText(f"Zeroing each head of {result.bundle.name} in turn…")

    def cancel(self) -> None:
        """Stop a measurement in progress (it ends between two heads) and wait for its thread."""
        if self._jobs.busy():
            self._ended("Cancelled.")

    def shutdown(self) -> None:
        self._jobs.shutdown()

    def is_measuring(self) -> bool:
        return self._jobs.busy()

    def is_busy(self) -> bool:
        return self.is_measuring()

    def _progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat("head %v of %m")

    def _ended(self, message: str) -> None:
        """The job finished, failed or was cancelled (cancel and wait for its thread: a cancelled job's news never
        arrives), then show the controls again."""
        self._jobs.shutdown()
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self.measure_button.setEnabled(True)
        self.status.setText(message)

    def _done(self, importance: HeadImportance, run) -> None:
        self._ended(f"Measured on {run.bundle.name}: {importance.n_tokens} output tokens, "
                    f"P = {importance.base:.1%} with nothing zeroed.")
        self._run = run
        self.maps = importance_heatmaps(importance)
        self._draw()

    # --- drawing ---------------------------------------------------------------------------------------------

    def _draw(self) -> None:
        while len(self.widgets) < len(self.maps):
            w = HeatmapWidget(compact=False)
            i = len(self.widgets)
            w.clicked.connect(lambda r, c, i=i: self._clicked(i, r, c))
            self.connect_heatmap(w)
            self.grid.addWidget(w, i // 2, i % 2)
            self.widgets.append(w)
        for i, w in enumerate(self.widgets):
            w.setVisible(i < len(self.maps))
            w.set_heatmap(self.maps[i] if i < len(self.maps) else None)

    def _clicked(self, i: int, row: int, col: int) -> None:
        if row < 0 or i >= len(self.maps) or self.main.current_result() is not self._run:
            return
        self.main.go_to_step(importance_step(self.maps[i].extra["kind"], row), head=col)

    def refresh(self) -> None:
        if self._run is not None and self.main.current_result() is not self._run:
            self.status.setText("These maps were measured on an earlier run; press Measure for this one.")

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self.maps)

    def view_title(self) -> str:
        return "Head importance: layers × heads"
