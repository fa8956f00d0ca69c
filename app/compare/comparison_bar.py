"""The bar above the stepper while two models are compared: what is compared with what, the first step that
differs (a link), a strip with one bar per step both models compute — its height the decades by which the
relative difference exceeds the tolerance, red where the shapes differ — with the current step marked, how many
parameters differ (Parameters… lists them), Save CSV… and Stop comparing. While the comparison is computed: a
progress bar and Cancel. A click on a bar goes to its step.
"""

from __future__ import annotations

import html
import math

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from scratchformer.plotdata.diff import diff_bars, shade

from ..panels.diagram import difference_colour
from .parameter_diff_dialog import ParameterDiffDialog, parameter_summary

STRIP_H = 54
SHAPES_DIFFER = "#b2182b"


class ComparisonBar(QWidget):
    stop_requested = Signal()
    cancel_requested = Signal()
    step_requested = Signal(str)
    save_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("comparisonBar")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 2, 8, 2)
        layout.setSpacing(2)
        row = QHBoxLayout()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.linkActivated.connect(self.step_requested.emit)
        row.addWidget(self.text, 1)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setMaximumWidth(110)
        row.addWidget(self.progress)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_requested.emit)
        row.addWidget(self.cancel_button)
        self.parameters_button = QPushButton("Parameters…")
        self.parameters_button.setToolTip("The parameters in which A and B differ: the largest difference of each, "
                                           "and those whose shapes differ")  # fmt: skip
        self.parameters_button.clicked.connect(self.show_parameters)
        row.addWidget(self.parameters_button)
        self.save_button = QPushButton("Save CSV…")
        self.save_button.setToolTip("Every step's differences, then every parameter that differs, as a CSV table")
        self.save_button.clicked.connect(self.save_requested.emit)
        row.addWidget(self.save_button)
        self.stop_button = QPushButton("Stop comparing")
        self.stop_button.setToolTip("Back to the one model: one map per step, the diagram's usual colours")
        self.stop_button.clicked.connect(self.stop_requested.emit)
        row.addWidget(self.stop_button)
        layout.addLayout(row)
        self.strip = pg.PlotWidget()
        self.strip.setBackground("w")
        self.strip.setFixedHeight(STRIP_H)
        self.strip.setMouseEnabled(x=False, y=False)
        self.strip.hideButtons()
        self.strip.getPlotItem().hideAxis("bottom")
        self.strip.getPlotItem().getAxis("left").setWidth(28)
        self.strip.setToolTip("One bar per step both models compute: its height, the decades by which A and B differ "
                              "beyond the tolerance (dark red: the shapes differ). Click a bar to go to its step.")
        self.strip.scene().sigMouseClicked.connect(self._clicked)
        self.marker = pg.InfiniteLine(angle=90, pen=pg.mkPen("#333", width=1.5))
        self.first = pg.InfiniteLine(angle=90, pen=pg.mkPen("#d7301f", width=1.5, style=Qt.PenStyle.DashLine))
        layout.addWidget(self.strip)
        self.steps: list[str] = []
        self.diff = None  # the ModelDiff shown
        self.dialog = None  # Parameters…, while open
        self.setVisible(False)

    def forget(self) -> None:
        """The diff shown is no longer the window's: its Parameters… table closes."""
        self.diff = None
        if self.dialog is not None:
            self.dialog.close()

    def computing(self, text: str) -> None:
        self.forget()
        self.setVisible(True)
        self.text.setText(html.escape(text))
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self.save_button.setEnabled(False)
        self.parameters_button.setEnabled(False)

    def idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)

    def show_diff(self, diff) -> None:
        """Draw the strip and the summary of a ModelDiff."""
        self.idle()
        self.diff = diff
        self.save_button.setEnabled(True)
        self.parameters_button.setEnabled(bool(diff.parameters))
        bars = diff_bars(diff)
        self.steps = bars.steps
        span = math.log10(1 / max(bars.tolerance, 1e-12))
        heights, brushes = [], []
        for rel in bars.relative:
            if not math.isfinite(rel):
                heights.append(span)
                brushes.append(pg.mkBrush(SHAPES_DIFFER))
            else:
                s = shade(rel, bars.tolerance)
                heights.append(max(0.08 * span, s * span))
                brushes.append(pg.mkBrush(difference_colour(s)))
        self.strip.clear()
        self.strip.addItem(pg.BarGraphItem(x=list(range(len(heights))), height=heights, width=0.85, brushes=brushes,
                                           pen=pg.mkPen("#999", width=0.5)))  # fmt: skip
        self.strip.addItem(self.first)
        self.strip.addItem(self.marker)
        self.first.setVisible(bars.first_difference is not None)
        if bars.first_difference is not None:
            self.first.setPos(bars.first_difference)
        self.strip.setXRange(-0.5, len(heights) - 0.5, padding=0)
        self.strip.setYRange(0, span, padding=0.05)
        first = diff.first_difference
        n_differ = sum(s.differs(diff.tolerance) for s in diff.steps)
        n_shapes = sum(s.max_abs_diff is None for s in diff.steps)
        parts = [f"<b>Comparing</b> A = {html.escape(diff.model_a)} with B = {html.escape(diff.model_b)}: "
                 f"{n_differ} of {len(diff.steps)} steps differ beyond {diff.tolerance:g}"]
        if n_shapes:
            parts.append(f"{n_shapes} with different shapes")
        if diff.only_in_a or diff.only_in_b:
            parts.append(f"{len(diff.only_in_a)} only in A, {len(diff.only_in_b)} only in B")
        parts.append(f"first difference: <a href=\"{html.escape(first)}\">{html.escape(first)}</a>" if first else
                     "no difference: every step agrees")  # fmt: skip
        parts.append(parameter_summary(diff))
        self.text.setText(" · ".join(parts))
        self.setVisible(True)

    def show_parameters(self) -> None:
        """Parameters…: the table of the parameters that differ (one dialog, raised if already open)."""
        if self.diff is None:
            return
        if self.dialog is not None:
            self.dialog.close()
        self.dialog = ParameterDiffDialog(self.window(), self.diff)
        self.dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.dialog.destroyed.connect(lambda *_: setattr(self, "dialog", None))
        self.dialog.show()

    def show_step(self, name: str | None) -> None:
        """Mark the window's current step on the strip (when both models compute it)."""
        shown = name in self.steps
        self.marker.setVisible(shown)
        if shown:
            self.marker.setPos(self.steps.index(name))

    def _clicked(self, event) -> None:
        if not self.steps or event.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.strip.getPlotItem().getViewBox()
        if vb.sceneBoundingRect().contains(event.scenePos()):
            i = round(vb.mapSceneToView(event.scenePos()).x())
            if 0 <= i < len(self.steps):
                self.step_requested.emit(self.steps[i])
