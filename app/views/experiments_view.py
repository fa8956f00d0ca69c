"""Experiments: each claim of the lessons measured on the model and sentence of the current run — why ÷√d_k,
the causal mask, order and positional encoding, LayerNorm against BatchNorm, teacher forcing, temperature — and
superposition, in a toy model trained here and in one neuron of the trained en-hi model.

Pick an experiment; its controls appear (a d_k slider, a switch, a temperature slider, a snapshot, a seed) and
every change redraws. The experiment runs off the UI thread (a job, app/work/jobs.py), one at a time, keeping
only the latest request; results are kept per run and controls, and a switch only redraws (both sides of a
switch are in one result). Lessons open an experiment with `show_experiment(name, **controls)`.
Computation: scratchformer.experiments; what is drawn: scratchformer.plotdata.experiments.
"""

from __future__ import annotations

import html
import json
import math
from collections import OrderedDict
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.experiments import EXPERIMENTS, experiment_named
from scratchformer.exporting.files import atomic_write_bytes
from scratchformer.plotdata.experiments import SWITCHES, Chart, charts, charts_csv, maps

from ..export.actions import save_numbers
from ..widgets.heatmap import HeatmapWidget
from ..work.jobs import JobRunner
from .base import View, fix_value_axis, placeholder

MAX_DK_POWER = 11  # the d_k slider: 2^0 … 2^11
T_MIN, T_MAX, T_STEPS = 0.1, 10.0, 100  # the temperature slider: log-spaced
KEPT = 32  # results kept (per run, experiment and controls)
MAX_CHARTS = 3


def run_key(run) -> tuple:
    """What identifies a run for the cache: the window's request number and what it ran."""
    r = run.request
    return (r.generation, r.model, r.source, r.target)


def temperature_of(tick: int) -> float:
    """The slider's tick → T, log-spaced from T_MIN to T_MAX, to two significant digits (2.0, not 1.995)."""
    return float(f"{T_MIN * (T_MAX / T_MIN) ** (tick / T_STEPS):.2g}")


def tick_of(temperature: float) -> int:
    t = min(max(float(temperature), T_MIN), T_MAX)
    return round(T_STEPS * math.log(t / T_MIN) / math.log(T_MAX / T_MIN))


class ExperimentsView(View):
    title = "Experiments"
    tooltip = "Each claim measured on this model and sentence: ÷√d_k, the mask, order, LayerNorm, teacher forcing, T"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self._build_controls())
        self.claim = QLabel()
        self.claim.setWordWrap(True)
        self.claim.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.claim)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.summary)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setStyleSheet("color: #555;")
        status_row = QHBoxLayout()
        status_row.addWidget(self.status, 1)
        self.save_button = QPushButton("Save numbers…")
        self.save_button.setToolTip("Save this experiment's numbers: JSON (everything) or CSV (the charts' series)")
        self.save_button.clicked.connect(self._save_dialog)
        status_row.addWidget(self.save_button)
        layout.addLayout(status_row)
        self.empty = placeholder("Run a model first: the experiments measure the model and sentence of the run.")
        layout.addWidget(self.empty)
        self.body = QSplitter(Qt.Orientation.Vertical)
        self.heatmap = HeatmapWidget()
        self.connect_heatmap(self.heatmap)
        self.body.addWidget(self.heatmap)
        plots = QWidget()
        row = QHBoxLayout(plots)
        row.setContentsMargins(0, 0, 0, 0)
        self.plots: list[pg.PlotWidget] = []
        for _ in range(MAX_CHARTS):
            plot = pg.PlotWidget(background="w")
            plot.setMenuEnabled(False)
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.setMinimumSize(80, 150)  # three side by side still fit a narrow window
            fix_value_axis(plot)  # a new result does not re-lay out the row of charts
            row.addWidget(plot, 1)
            self.plots.append(plot)
        self.body.addWidget(plots)
        self.body.setSizes([330, 230])
        self.body.setStretchFactor(0, 3)
        self.body.setStretchFactor(1, 2)
        layout.addWidget(self.body, 1)
        self.result: dict | None = None  # the result drawn now
        self._drawn_key: tuple | None = None  # (id of the result, switch) on screen: drawn once, not per page turn
        self.drawn_charts: list[Chart] = []
        self._maps: list = []
        self._cache: OrderedDict[tuple, dict] = OrderedDict()
        self._jobs = JobRunner("scratchformer-experiment")
        self._pending: tuple | None = None  # (key, run, name, controls): the latest request while a job runs
        self._wanted: tuple | None = None  # the key of what the controls ask for now
        self._running: tuple | None = None  # the key the job measures
        self._choose(next(iter(EXPERIMENTS)), {})
        self._show_body(False)

    def _build_controls(self) -> QWidget:
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(0, 0, 0, 0)
        self.picker = QComboBox()
        for name in EXPERIMENTS:
            self.picker.addItem(EXPERIMENTS[name].title, name)
        self.picker.setToolTip("Which claim to test")
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(16)
        self.picker.currentIndexChanged.connect(lambda _i: self._changed())
        row.addWidget(self.picker)
        self.switch = QCheckBox()
        self.switch.toggled.connect(lambda _on: self._redraw())
        row.addWidget(self.switch)
        self.dk_label = QLabel()
        self.dk = QSlider(Qt.Orientation.Horizontal)
        self.dk.setRange(0, MAX_DK_POWER)
        self.dk.setValue(6)
        self.dk.setToolTip("d_k, the width of q and k (a power of two)")
        self.dk.valueChanged.connect(lambda _v: self._changed())
        self.t_label = QLabel()
        self.temperature = QSlider(Qt.Orientation.Horizontal)
        self.temperature.setRange(0, T_STEPS)
        self.temperature.setValue(tick_of(1.0))
        self.temperature.setToolTip("The temperature T of the output softmax, softmax(logits / T)")
        self.temperature.valueChanged.connect(lambda _v: self._changed())
        self.snapshot = QComboBox()
        self.snapshot.addItem("an early snapshot", None)
        self.snapshot.setToolTip("Which training snapshot to decode")
        self.snapshot.activated.connect(lambda _i: self._changed())
        self.sparsity_label = QLabel("sparsity")
        self.sparsity = QDoubleSpinBox()
        self.sparsity.setRange(0.0, 0.99)
        self.sparsity.setSingleStep(0.05)
        self.sparsity.setDecimals(2)
        self.sparsity.setValue(0.9)
        self.sparsity.setToolTip("The sparse setting's S: each feature is 0 with probability S (the dense one has 0)")
        self.sparsity.valueChanged.connect(lambda _v: self._changed())
        self.seed_label = QLabel("seed")
        self.seed = QSpinBox()
        self.seed.setRange(0, 9999)
        self.seed.setToolTip("Seed of the random draws: q and k, the replaced tokens, the shuffle, sampling")
        self.seed.valueChanged.connect(lambda _v: self._changed())
        for w in (self.dk_label, self.dk, self.t_label, self.temperature, self.snapshot, self.sparsity_label,
                  self.sparsity, self.seed_label, self.seed):
            row.addWidget(w)
        self.dk.setMinimumWidth(80)
        self.temperature.setMinimumWidth(80)
        row.addStretch(1)
        return bar

    # --- choosing ----------------------------------------------------------------------------------------------

    def show_experiment(self, name: str, **controls) -> None:
        """Open one experiment with these controls (d_k, temperature, seed, snapshot, and the switch: masked,
        positional or batchnorm) on the current run, and switch to this view. For lessons and menus."""
        exp = experiment_named(name)
        unknown = sorted(set(controls) - set(exp.controls))
        if unknown:
            raise UserError(f"The {exp.name} experiment has no control {unknown[0]!r}.")
        self._choose(exp.name, controls)
        self.main.tabs.setCurrentWidget(self)
        self._changed()

    def _choose(self, name: str, controls: dict) -> None:
        """Set the picker and the controls without asking for a run (each setter's signal is held)."""
        widgets = (self.picker, self.switch, self.dk, self.temperature, self.seed, self.snapshot, self.sparsity)
        for w in widgets:
            w.blockSignals(True)
        try:
            self.picker.setCurrentIndex(list(EXPERIMENTS).index(name))
            switch = SWITCHES.get(name)
            if switch is not None:
                self.switch.setChecked(bool(controls.get(switch[0], EXPERIMENTS[name].controls[switch[0]])))
            if "d_k" in controls:
                self.dk.setValue(min(MAX_DK_POWER, max(0, round(math.log2(max(1, int(controls["d_k"])))))))
            if "temperature" in controls:
                self.temperature.setValue(tick_of(controls["temperature"]))
            if "seed" in controls:
                self.seed.setValue(int(controls["seed"]))
            if "sparsity" in controls:
                self.sparsity.setValue(float(controls["sparsity"]))
            if "snapshot" in controls:
                self._set_snapshot(controls["snapshot"])
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._show_controls()

    def _set_snapshot(self, step) -> None:
        index = self.snapshot.findData(step)
        if index < 0:
            self.snapshot.addItem(f"step {step}", step)
            index = self.snapshot.count() - 1
        self.snapshot.setCurrentIndex(index)

    def name(self) -> str:
        return self.picker.currentData()

    def controls(self) -> dict:
        """What the controls ask the experiment for (the switch is not among them: it only picks what is drawn)."""
        name = self.name()
        wanted = {"d_k": 2 ** self.dk.value(), "temperature": temperature_of(self.temperature.value()),
                  "seed": self.seed.value(), "snapshot": self.snapshot.currentData(),
                  "sparsity": round(self.sparsity.value(), 2)}  # fmt: skip
        return {k: v for k, v in wanted.items() if k in EXPERIMENTS[name].controls}

    def switch_value(self) -> bool | None:
        return self.switch.isChecked() if self.name() in SWITCHES else None

    def _show_controls(self) -> None:
        name = self.name()
        exp = EXPERIMENTS[name]
        keys = exp.controls
        switch = SWITCHES.get(name)
        self.switch.setVisible(switch is not None)
        if switch is not None:
            self.switch.setText({"mask": "causal mask", "order": "positional encoding", "norm": "BatchNorm",
                                 "superposition": "sparse"}[name])  # fmt: skip
            self.switch.setToolTip(f"On: {switch[1]}; off: {switch[2]}")
        for w in (self.dk_label, self.dk):
            w.setVisible("d_k" in keys)
        for w in (self.t_label, self.temperature):
            w.setVisible("temperature" in keys)
        self.snapshot.setVisible("snapshot" in keys)
        self.sparsity_label.setVisible("sparsity" in keys)
        self.sparsity.setVisible("sparsity" in keys)
        self.seed_label.setVisible("seed" in keys)
        self.seed.setVisible("seed" in keys)
        self.dk_label.setText(f"d_k = {2 ** self.dk.value()}")
        self.t_label.setText(f"T = {temperature_of(self.temperature.value()):g}")
        self.claim.setText(f"<b>{html.escape(exp.title)}.</b> {html.escape(exp.claim)}")

    def _changed(self) -> None:
        self._show_controls()
        self.request()

    # --- running -----------------------------------------------------------------------------------------------

    def request(self) -> None:
        """Measure what the controls ask for on the current run: from the cache, or off the UI thread."""
        run = self.main.current_result()
        if run is None:
            self._wanted = None
            self._show_body(False)
            return
        name, controls = self.name(), self.controls()
        why_not = EXPERIMENTS[name].applies(run.bundle)  # reads the config only
        if why_not:
            self._wanted = None
            self.result = None
            self.status.setText(why_not)
            self._show_body(False, why_not)
            return
        key = (run_key(run), name, tuple(sorted(controls.items(), key=lambda kv: kv[0])))
        self._wanted = key
        if key in self._cache:
            self._cache.move_to_end(key)
            self._draw(self._cache[key])
            return
        if self._jobs.busy() and self._running == key:  # already being measured: wait for it
            self._pending = None
            return
        self._pending = (key, run, name, controls)
        self.status.setText(f"Measuring {EXPERIMENTS[name].title.lower()} on {run.bundle.name}…")
        if not self._jobs.busy():
            self._start()

    def _start(self) -> None:
        key, run, name, controls = self._pending
        self._pending, self._running = None, key
        from scratchformer.experiments import run_experiment

        request = run.request

        def measure(job) -> dict:  # a UserError (this input does not suit it) arrives as its own sentence
            return run_experiment(name, run.bundle, request.source, request.target or None, **controls)

        self._jobs.start(measure, on_result=lambda value: self._done(key, value, ""),
                         on_error=lambda error: self._done(key, None, error), doing=f"Measuring the {name} experiment")

    def _done(self, key: tuple, value: dict | None, error: str) -> None:
        """A measurement ended: keep its result (even one no longer wanted: the controls may come back to it),
        then measure the latest request, or draw."""
        if value is not None:
            self._cache[key] = value
            while len(self._cache) > KEPT:
                self._cache.popitem(last=False)
        if self._pending is not None:  # a newer request came in meanwhile: measure that one
            self._start()
            return
        if key != self._wanted:
            return
        if error or value is None:
            sentence = error or "The experiment gave no result."
            self.result = None
            self.status.setText(sentence)
            self._show_body(False, sentence)
            return
        self._draw(value)

    def is_busy(self) -> bool:
        return self._jobs.busy()

    def shutdown(self) -> None:
        self._pending = None
        self._jobs.shutdown()

    # --- drawing -----------------------------------------------------------------------------------------------

    def refresh(self) -> None:
        run = self.main.current_result()
        drawn_for = self._wanted[0] if self._wanted else None
        if run is None or drawn_for != run_key(run) or self.result is None:
            self.request()

    def _redraw(self) -> None:
        self._show_controls()
        if self.result is not None:
            self._draw(self.result)

    def _show_body(self, visible: bool, text: str | None = None) -> None:
        self.body.setVisible(visible)
        self.empty.setVisible(not visible)
        if text:
            self.empty.setText(text)
        elif not visible:
            self.empty.setText("Run a model first: the experiments measure the model and sentence of the run.")
        if not visible:
            self.summary.setText("")
            self._maps, self.drawn_charts, self._drawn_key = [], [], None

    def _draw(self, result: dict) -> None:
        self.result = result
        self.status.setText("")
        notes = " ".join(result.get("notes", []))
        self.summary.setText(result["summary"] + (f" {notes}" if notes else ""))
        if result["experiment"] == "teacher_forcing":
            self._fill_snapshots(result)
        switch = self.switch_value()
        drawn_key = (id(result), switch)
        if drawn_key == self._drawn_key and self.body.isVisible():
            return  # this result with this switch is on screen already (a lesson page turned back to it)
        self._drawn_key = drawn_key
        self._maps = maps(result, switch)
        self.heatmap.set_heatmap(self._maps[0] if self._maps else None)
        self.heatmap.setVisible(bool(self._maps))
        self.drawn_charts = charts(result, switch)
        for i, plot in enumerate(self.plots):
            chart = self.drawn_charts[i] if i < len(self.drawn_charts) else None
            plot.setVisible(chart is not None)
            if chart is not None:
                draw_chart(plot, chart)
        self._show_body(True)

    def _fill_snapshots(self, result: dict) -> None:
        steps = [s["step"] for s in result["snapshots"] if s["step"] != "final"]
        current = self.snapshot.currentData()
        self.snapshot.blockSignals(True)
        self.snapshot.clear()
        self.snapshot.addItem("an early snapshot", None)
        for step in steps:
            self.snapshot.addItem(f"step {step}", step)
        self.snapshot.setCurrentIndex(max(0, self.snapshot.findData(current)))
        self.snapshot.blockSignals(False)

    # --- export ------------------------------------------------------------------------------------------------

    def current_heatmaps(self) -> list:
        return list(self._maps)

    def view_title(self) -> str:
        return f"Experiment: {EXPERIMENTS[self.name()].title}"

    def numbers(self, kind: str = "json") -> str:
        """The experiment's numbers as shown: its whole result as JSON (what `scratchformer experiment --json`
        prints), or the charts' series as CSV."""
        if self.result is None:
            raise UserError("No experiment has been measured yet.")
        if kind == "csv":
            return charts_csv(self.drawn_charts)
        return json.dumps(self.result, ensure_ascii=False, indent=1)

    def export_numbers(self, path: str | Path) -> Path:
        path = Path(path)
        text = self.numbers("csv" if path.suffix.lower() == ".csv" else "json")
        atomic_write_bytes(path, text.encode("utf-8"), overwrite=True)  # one sentence if it cannot
        return path

    def _save_dialog(self) -> None:
        if self.result is None:
            self.main.show_error("Measure an experiment first.")
            return
        save_numbers(self.main, "Save the experiment's numbers", f"{self.name()}.json",
                     "JSON (*.json);;CSV of the charts (*.csv)", self.export_numbers)  # fmt: skip


def draw_chart(plot: pg.PlotWidget, chart: Chart) -> None:
    """One Chart on a PlotWidget: its series as lines with dots, a legend, labelled ticks, the control's marker."""
    plot.clear()  # its lines leave the legend with them
    item = plot.getPlotItem()
    legend = item.legend
    if legend is None:
        legend = plot.addLegend(offset=(-10, 10), brush=pg.mkBrush(255, 255, 255, 210))
    item.setLogMode(x=chart.log_x, y=False)
    item.setAspectLocked(chart.square)
    item.setTitle(chart.title, size="9pt")
    item.setLabel("bottom", chart.x_label)
    item.setLabel("left", chart.y_label)
    for s in chart.series:
        pen = pg.mkPen(s.colour, width=2)
        curve = plot.plot(s.x, s.y, pen=pen, symbol="o", symbolSize=5, symbolBrush=s.colour, symbolPen=None)
        legend.addItem(curve, s.name)
    axis = item.getAxis("bottom")
    where = (lambda x: math.log10(x)) if chart.log_x else (lambda x: x)  # noqa: E731 - a log axis plots log10(x)
    axis.setTicks([[(where(x), label) for x, label in chart.x_ticks]] if chart.x_ticks else None)
    if chart.marker_x is not None:
        plot.addItem(pg.InfiniteLine(where(chart.marker_x), angle=90, pen=pg.mkPen("#777", style=Qt.PenStyle.DashLine)))
    item.enableAutoRange()
