"""Run › Compare with…: the window's input through the model shown (A) and a second model or snapshot (B), step
by step (scratchformer.analyses.diff). While a comparison is on, the stepper walks A's steps as usual, the Step
view shows A, B and A − B for each step both compute (app/views/step_diff_panel.py), the architecture diagram
colours each block by how much its steps differ (plotdata.diff.block_shades) and the bar above the stepper
(app/compare/comparison_bar.py) gives the first step that differs and a strip of every step's difference. A new run of
the window is compared again with the same B, kept open between runs; Stop comparing ends it and lets B go.

Loading B and running both models is a job (app/work/jobs.py) with progress and Cancel.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, Qt

from scratchformer.errors import UserError
from scratchformer.plotdata.diff import block_differences, block_shades

from ..work.jobs import JobRunner
from .comparison_bar import ComparisonBar


def _open(spec: str, device, precision: str):
    """Model B: a snapshot from the snapshots' cache (the Training view may have it open), else load_model."""
    from scratchformer.experiments.snapshots import load
    from scratchformer.loading.bundle import load_model, split_snapshot

    if split_snapshot(spec)[1] is not None:
        return load(spec, device)
    return load_model(spec, device, precision=precision)


def _compare(result, spec_b: str, opened: tuple | None, job):
    """(on the job's thread) (the ModelDiff of the window's run against model B, B's key and bundle) — B reused from
    `opened` ((key, bundle) of the last comparison) when it is the same model on the same device and precision, so
    a new run of the window does not read B from disk again — or None if cancelled."""
    from scratchformer.analyses import diff

    request = result.request
    key = (spec_b, str(result.bundle.device), getattr(request, "precision", "float32"))
    if opened is not None and opened[0] == key:
        b = opened[1]
    else:
        job.progress(f"Opening {spec_b}…")
        b = _open(spec_b, result.bundle.device, key[2])
    if job.cancelled():
        return None
    job.progress(f"Running {result.bundle.name} and {b.name} on the same input…")
    return diff.compute(result.bundle, b, request.source, request.target, request.start_only), (key, b)


class ModelComparison(QObject):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.main = window
        self.spec_b: str | None = None  # what A is compared with, while a comparison is on
        self.diff = None  # the ModelDiff of the window's current run, once made
        self._compared = None  # the RunResult it was made for
        self._opened: tuple | None = None  # ((spec, device, precision), bundle) of the last B opened
        self._jobs = JobRunner("scratchformer-model-diff", latest_only=True)
        self.bar = ComparisonBar()
        self.bar.stop_requested.connect(self.stop)
        self.bar.cancel_requested.connect(self.cancel)
        self.bar.step_requested.connect(lambda name: self.main.go_to_step(name))
        self.bar.save_requested.connect(self._save_dialog)

    def active(self) -> bool:
        return self.diff is not None

    def is_busy(self) -> bool:
        return self._jobs.busy()

    def ask(self) -> None:
        """Run › Compare with…: the dialog, then compare_with."""
        from .compare_dialog import CompareDialog

        result = self.main.current_result()
        if result is None:
            self.main.show_error("Run a model first; Compare with… runs its input through a second model.")
            return
        combo = self.main.model_combo
        listed = [combo.itemData(i) for i in range(combo.count())]
        listed = [s for s in listed if isinstance(s, str) and s and not s.startswith("Open")]
        dialog = CompareDialog(self.main, result.request.model, listed)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(self.compare_with)
        dialog.open()

    def compare_with(self, spec: str) -> None:
        """Compare the window's current run with model `spec` (a name, NAME@step-N, a folder or a cached id)."""
        result = self.main.current_result()
        if result is None:
            self.main.show_error("Run a model first; Compare with… runs its input through a second model.")
            return
        if result.request.windows:
            self.main.show_error("Compare with… runs one sentence; turn off the batch of windows first.")
            return
        self.spec_b = spec
        self._start(result)

    def _start(self, result) -> None:
        self.bar.computing(f"Comparing {result.bundle.name} with {self.spec_b}…")
        spec, opened = self.spec_b, self._opened
        self._jobs.start(lambda job: _compare(result, spec, opened, job), on_result=lambda d: self._arrived(result, d),
                         on_error=self._failed, on_progress=self.bar.computing,
                         doing=f"Comparing with {spec}")  # fmt: skip

    def _arrived(self, result, found) -> None:
        if found is None:
            return
        diff, self._opened = found
        if result is not self.main.current_result():
            return
        self.diff, self._compared = diff, result
        self.bar.show_diff(diff)
        self.colour_diagram()
        first = diff.first_difference
        said = [f"Compared {diff.model_a} with {diff.model_b}: "
                + (f"the first step that differs is {first}." if first else "every step agrees within "
                   f"{diff.tolerance:g}.")]  # fmt: skip
        if result.trace.interventions:
            said.append("A is compared as it is, without the heads changed in this run.")
        said += diff.notes  # different tokenizers: compared where the ids agree (said once, here)
        self.main.show_message(" ".join(said))
        self._redraw()

    def _failed(self, sentence: str) -> None:
        self.spec_b = None
        self._end()
        self.main.show_error(sentence)

    def cancel(self) -> None:
        self._jobs.cancel()
        if self.diff is None:
            self.spec_b = None
            self.bar.setVisible(False)
        else:
            self.bar.idle()
        self.main.show_message("Comparison cancelled.")

    def stop(self) -> None:
        """Stop comparing: one map per step again, the diagram's own colours."""
        self._jobs.cancel()
        self.spec_b = self._opened = None  # B is let go
        self._end()
        self.main.show_message("Stopped comparing.")

    def _end(self) -> None:
        had = self.diff is not None
        self.diff = self._compared = None
        self.bar.setVisible(False)
        self.bar.idle()
        self.bar.forget()
        self.main.diagram.set_differences(None)
        if had:
            self._redraw()

    def _redraw(self) -> None:
        step = self.main.current_step()
        if step is not None:
            self.main.go_to(step.index, force=True)

    # --- what the window calls -------------------------------------------------------------------------------------

    def run_changed(self, result) -> None:
        """A new run arrived: compare it with the same B (its diff is no longer this run's)."""
        if self.spec_b is None or result is self._compared:
            return
        self.diff = self._compared = None
        self.main.diagram.set_differences(None)
        if result.request.windows:
            self.spec_b = None
            self._end()
            return
        self._start(result)

    def colour_diagram(self) -> None:
        """Each block's shade of its largest relative difference (the diagram keeps them when it is rebuilt)."""
        if self.diff is None:
            return
        amounts = block_differences(self.diff)
        shades = block_shades(self.diff)

        def line(rel: float) -> str:
            return ("A vs B: the shapes differ" if not math.isfinite(rel) else
                    f"A vs B: largest relative difference {rel:.3g}")  # fmt: skip

        self.main.diagram.set_differences({k: (shades[k], line(amounts[k])) for k in shades})

    def show_step(self, step) -> None:
        if self.diff is not None:
            self.bar.show_step(step.name if step is not None else None)

    def csv_text(self) -> str:
        from scratchformer.plotdata.diff import diff_csv

        if self.diff is None:
            raise UserError("Compare two models first (Run › Compare with…).")
        return diff_csv(self.diff)

    def save_csv(self, path):
        from scratchformer.exporting.files import write_csv

        return write_csv(path, self.csv_text())

    def _save_dialog(self) -> None:
        from ..export.actions import save_numbers

        if self.diff is not None:
            save_numbers(self.main, "Save the comparison", f"diff.{self.diff.model_b.replace('/', '_')}.csv",
                         "CSV (*.csv)", self.save_csv)  # fmt: skip

    def shutdown(self) -> None:
        self._jobs.shutdown()
