"""The Step view while two models are compared (Run › Compare with…): the current step of model A and of model B
on one colour scale, and A − B on a diverging one, for the batch item and head chosen; a step whose shapes differ
shows A and B alone. The maps are made off the UI thread (a step of a lazy trace may rerun its sublayer) and kept
per (step, batch item, head) of the comparison.

Maps: scratchformer.plotdata.diff.diff_step_maps; the comparison itself: app/compare/model_diff.py.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from scratchformer.errors import UserError
from scratchformer.plotdata import Heatmap, step_heatmap
from scratchformer.plotdata.diff import diff_step_maps

from ..widgets.heatmap import HeatmapWidget
from ..work.jobs import JobRunner

KEPT = 48


def _maps(diff, name: str, batch: int, head: int, vocab_labels) -> tuple[list[Heatmap], str]:
    """(on a job's thread) [A, B, A − B], or [A, B] and the sentence saying why there is no A − B."""
    try:
        made = diff_step_maps(diff, name, batch, head, vocab_labels)
    except UserError as exc:  # the shapes differ: each model's own map
        a, b = diff.trace_a[name], diff.trace_b[name]
        ha = step_heatmap(diff.trace_a, a, min(batch, a.shape[0] - 1), head, vocab_labels)
        hb = step_heatmap(diff.trace_b, b, min(batch, b.shape[0] - 1), head, vocab_labels)
        ha.title, hb.title = f"A: {diff.model_a} — {ha.title}", f"B: {diff.model_b} — {hb.title}"
        return [ha, hb], str(exc)
    return [made.a, made.b, made.difference], ""


class StepDiffPanel(QWidget):
    def __init__(self, view) -> None:
        super().__init__()
        self.view = view
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.summary)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.widgets = []
        for _ in range(3):
            w = HeatmapWidget()
            view.connect_heatmap(w)
            self.widgets.append(w)
            self.splitter.addWidget(w)
        layout.addWidget(self.splitter, 1)
        self._jobs = JobRunner("scratchformer-step-diff", latest_only=True)
        self._cache: dict[tuple, tuple[list[Heatmap], str]] = {}
        self._diff = None
        self._key: tuple | None = None
        self.shown: list[Heatmap] = []

    def show_step(self, diff, step, batch: int, head: int, vocab_labels=None) -> bool:
        """Draw the step's A, B and A − B maps (made in a job when new); False if B has no step of this name."""
        if diff is not self._diff:
            self._diff, self._cache = diff, {}
        if diff.trace_b.find(step.name) is None or diff.trace_a.find(step.name) is None:
            return False
        key = (step.name, batch, head)
        self._key = key
        line = self._line(diff, step.name)
        if key in self._cache:
            self._draw(*self._cache[key], line)
            return True
        self.summary.setText(f"{line}  Making the maps…")

        def made(found) -> None:
            self._cache[key] = found
            if len(self._cache) > KEPT:
                self._cache.pop(next(iter(self._cache)))
            if key == self._key and diff is self._diff:
                self._draw(*found, line)

        self._jobs.start(lambda _job: _maps(diff, step.name, batch, head, vocab_labels), on_result=made,
                         on_error=lambda error: self.summary.setText(error), doing="Making the A − B maps")  # fmt: skip
        return True

    @staticmethod
    def _line(diff, name: str) -> str:
        s = diff.step(name)
        if s.max_abs_diff is None:
            return (f"{name}: the shapes differ ({' × '.join(map(str, s.shape_a))} in A, "
                    f"{' × '.join(map(str, s.shape_b))} in B).")
        verdict = "differs" if s.differs(diff.tolerance) else "agrees within the tolerance"
        first = "  ← the first step that differs" if diff.first_difference == name else ""
        return (f"{name}: max |A − B| = {s.max_abs_diff:.3g}, relative {s.relative_diff:.3g} — it {verdict} "
                f"({diff.tolerance:g}).{first}")

    def _draw(self, maps: list[Heatmap], why: str, line: str) -> None:
        self.shown = list(maps)
        self.summary.setText(f"{line} {why}".strip())
        for w, hm in zip(self.widgets, [*maps, None, None]):
            w.setVisible(hm is not None)
            if hm is not None:
                w.set_heatmap(hm)

    def is_busy(self) -> bool:
        return self._jobs.busy()

    def shutdown(self) -> None:
        self._jobs.shutdown()
