"""What the logit lens, rollout and attribution views share: a result computed off the UI thread for the current
run (a job on the view's runner, the latest request only: a newer one cancels it), a one-sentence placeholder
when the analysis does not apply, and "Save CSV…" of the numbers shown (scratchformer.plotdata.analyses makes both
the maps and the CSV)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from scratchformer.errors import UserError
from scratchformer.exporting.files import write_csv

from ..export.actions import save_numbers
from ..work.jobs import JobRunner
from .base import View, placeholder


class AnalysisView(View):
    """A bar (controls, then Save CSV…), a placeholder, and a body that subclasses fill; `compute(result, key)`
    runs off the UI thread and `draw(value)` on it."""

    empty_text = "Run a model first."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.layout_ = QVBoxLayout(self)
        self.layout_.setContentsMargins(6, 6, 6, 6)
        self.bar = QHBoxLayout()
        self.layout_.addLayout(self.bar)
        self.save_button = QPushButton("Save CSV…")
        self.save_button.setToolTip("The numbers shown, as a CSV file")
        self.save_button.clicked.connect(self._save_dialog)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.layout_.addWidget(self.caption)
        self.empty = placeholder(self.empty_text)
        self.layout_.addWidget(self.empty)
        self.value = None  # the analysis of the current run, once made
        self._key = None  # what `value` was computed for
        self._jobs = JobRunner("scratchformer-analysis", latest_only=True)

    def finish_bar(self) -> None:
        """The Save button last; combo boxes no wider than a few words, so the bar fits a 1024-pixel window."""
        for i in range(self.bar.count()):
            widget = self.bar.itemAt(i).widget()
            if isinstance(widget, QComboBox):
                widget.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
                widget.setMinimumContentsLength(6)
        self.bar.addStretch(1)
        self.bar.addWidget(self.save_button)

    # --- what subclasses give -----------------------------------------------------------------------------------
    def request(self, result) -> tuple:
        """What to compute for this run and these controls, read on the UI thread: (id(result), batch, …)."""
        return (id(result), self.main.current_batch())

    def compute(self, result, key: tuple, job):
        """The analysis (off the UI thread): it reads only `result` and `key`, never a widget. `job`
        (app.work.jobs.Job) takes progress(…) for `progressed` and says when the answer is no longer wanted; a
        cancelled computation may return None."""
        raise NotImplementedError

    def progressed(self, *news) -> None:
        """What a long computation reports while it runs (on the UI thread); nothing by default."""

    def draw(self, value) -> None:
        raise NotImplementedError

    def csv_text(self) -> str:
        return ""

    # --- the machinery ------------------------------------------------------------------------------------------
    def show_body(self, shown: bool, text: str = "") -> None:
        self.empty.setVisible(not shown)
        if text:
            self.empty.setText(text)
        self.save_button.setEnabled(shown)

    def refresh(self) -> None:
        result = self.main.current_result()
        if result is None:
            self.value, self._key = None, None
            self.show_body(False, self.empty_text)
            return
        key = self.request(result)
        if key == self._key and self.value is not None:
            return
        self.caption.setText("Computing…")

        def made(error: str, found) -> None:
            if result is not self.main.current_result():
                return
            self._key = key
            if error or isinstance(found, UserError):
                self.value = None
                self.caption.setText("")
                self.show_body(False, str(found) if isinstance(found, UserError) else error)
                return
            self.value = found
            self.show_body(True)
            self.draw(found)

        def work(job):
            try:
                return self.compute(result, key, job)
            except UserError as exc:  # the analysis does not apply: one sentence in the view
                return exc

        self._jobs.start(work, on_result=lambda found: made("", found), on_error=lambda error: made(error, None),
                         on_progress=self.progressed, doing=f"The {self.title.lower()}")

    def recompute(self) -> None:
        """A control changed: compute again for it."""
        self._key = None
        self.refresh()

    def is_busy(self) -> bool:
        return self._jobs.busy()

    def shutdown(self) -> None:
        self._jobs.shutdown()

    def save_csv(self, path: str | Path) -> Path:
        return write_csv(path, self.csv_text())  # one sentence if it cannot

    def _save_dialog(self) -> None:
        save_numbers(self.main, "Save the numbers", f"{self.title.lower().replace(' ', '-')}.csv", "CSV (*.csv)",
                     self.save_csv)  # fmt: skip
