"""Head metrics over training, under the Training tab's loss curve: for every snapshot (then the final model) and
every head of one attention type, its attention entropy, its alignment with the gold alignment (where the task has
one) or its importance, as one curve per head against the training step. A dashed line marks the snapshot the
tab's slider shows, and a click on the chart moves the slider to the nearest snapshot.

Measuring loads and runs every checkpoint, so it is a job (app/work/jobs.py) with a progress bar and Cancel, started
by the Measure button; the results are kept per model and input. Numbers: scratchformer.analyses.head_metrics;
curves: scratchformer.plotdata.head_metrics; CSV: scratchformer.plotdata.head_metrics too.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from scratchformer.errors import UserError
from scratchformer.plotdata.head_metrics import (
    METRICS,
    available,
    checkpoint_at,
    checkpoint_steps,
    head_curves,
    head_metrics_csv,
    step_ticks,
)
from scratchformer.plotdata.masks import ATTENTION_TITLES

from ..work.jobs import JobRunner
from .base import fix_value_axis

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
LAYER_STYLES = [Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine]
TASKS = ("en-hi", "copy", "reverse", "sort")  # the built-in tasks: measured on their validation pairs
KEY_W = 138  # the legend's width beside the chart
TICK_LABEL_PX = 46  # the room one step label of the log axis needs
LAYER_KEYS = ("───", "– – –", "·······", "–·–·–")  # LAYER_STYLES as text
EXPORT_FILTERS = "PNG image (*.png);;SVG vector image (*.svg);;PDF document (*.pdf);;CSV table (*.csv)"


def _measure(spec: str, source: str | None, target: str, device: str, job):
    """(on the job's thread) The head metrics of every checkpoint; None when cancelled."""
    from scratchformer.analyses import head_metrics

    return head_metrics.compute(spec, source=source, target=target, device=device,
                                progress=lambda done, total: job.progress(done, total), cancelled=job.cancelled)


def key_html(shown) -> str:
    """The legend of the curves: a colour per head and, with every layer shown, a line style per layer; the head
    trained on the gold alignment is the thick line."""
    heads = sorted({c.head for c in shown.curves})
    layers = sorted({c.layer for c in shown.curves})
    lines = []
    for h in heads:
        guided = shown.guided is not None and layers == [shown.guided[0]] and shown.guided[1] == h
        name = f"head {h + 1}" + (" (guided)" if guided else "")
        lines.append(f'<span style="color:{PALETTE[h % len(PALETTE)]}; font-weight:bold;">━━</span> {name}')
    if len(layers) > 1:
        lines.append("<br>line = layer:")
        lines += [f"<tt>{LAYER_KEYS[li % len(LAYER_KEYS)]}</tt> layer {li + 1}" for li in layers]
    elif layers:
        lines.insert(0, f"<b>layer {layers[0] + 1}</b>")
    if len(layers) > 1 and shown.guided is not None and shown.guided[0] in layers:
        lines.append(f"<br>thick: layer {shown.guided[0] + 1} head {shown.guided[1] + 1}, trained on the gold "
                     "alignment")
    return "<br>".join(lines)


class HeadMetricsPanel(QWidget):
    checkpoint_clicked = Signal(object)  # the training step of the checkpoint nearest a click (None: the final)

    def __init__(self, window) -> None:
        super().__init__()
        self.main = window
        self._base: str | None = None
        self._input: tuple | None = None  # (source or None, target): what the heads are measured on
        self._cache: dict[tuple, object] = {}  # (model, source, target) → HeadMetrics
        self._jobs = JobRunner("scratchformer-head-metrics", latest_only=True)
        self.metrics = None  # the HeadMetrics shown
        self.checkpoints = None  # what checkpoints_of found for the model (None: nothing to follow)
        self._step: int | None = None  # the slider's snapshot
        self._guided = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        bar = QHBoxLayout()
        title = QLabel("<b>Heads over training</b>")
        bar.addWidget(title)
        self.metric_box = QComboBox()
        self.metric_box.setToolTip("Which measure of each head to draw")
        self.type_box = QComboBox()
        self.type_box.setToolTip("Which attention's heads")
        self.layer_box = QComboBox()
        self.layer_box.setToolTip("One layer's heads, or every layer's (a line style per layer)")
        for box in (self.metric_box, self.type_box, self.layer_box):
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            box.currentIndexChanged.connect(lambda _i: self._draw())
            bar.addWidget(box)
        bar.addStretch(1)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(110)
        self.progress.setVisible(False)
        bar.addWidget(self.progress)
        self.measure_button = QPushButton("Measure")
        self.measure_button.setToolTip("Run every snapshot on the input and measure each head (takes a few seconds)")
        self.measure_button.clicked.connect(self.measure)
        bar.addWidget(self.measure_button)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        bar.addWidget(self.cancel_button)
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save the curves as PNG, SVG or PDF, or every head's numbers as CSV")
        self.export_button.clicked.connect(self._export_dialog)
        bar.addWidget(self.export_button)
        layout.addLayout(bar)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #555;")
        layout.addWidget(self.message)
        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.setMinimumHeight(120)
        self.plot.setLabel("bottom", "training step (log scale)")
        self.plot.setLogMode(x=True, y=False)  # snapshots come early (en-hi: 32 … 256 of 2,030)
        fix_value_axis(self.plot)
        self.marker = pg.InfiniteLine(angle=90, pen=pg.mkPen("#d62728", width=2, style=Qt.PenStyle.DashLine))
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.plot.getPlotItem().getViewBox().sigResized.connect(self._tick)  # a narrower chart: fewer step labels
        self.key = QLabel()  # the legend, beside the chart rather than over its curves
        self.key.setTextFormat(Qt.TextFormat.RichText)
        self.key.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.key.setStyleSheet("background: white; padding: 4px; font-size: 8pt;")
        self.key.setFixedWidth(KEY_W)
        self.key.setWordWrap(True)
        self.chart = QWidget()  # the chart and its key: what Export… paints
        chart = QHBoxLayout(self.chart)
        chart.setContentsMargins(0, 0, 0, 0)
        chart.setSpacing(0)
        chart.addWidget(self.plot, 1)
        chart.addWidget(self.key)
        layout.addWidget(self.chart, 1)
        self._show(False)

    # --- what the Training view calls ---------------------------------------------------------------------------

    def set_model(self, base: str, config, source: str, target: str) -> None:
        """The tab shows this model (without @step) and input: its measurements if made, else the Measure button,
        or the one sentence saying why there is nothing to follow."""
        from scratchformer.analyses.head_metrics import checkpoints_of
        from scratchformer.plotdata import guided_head

        task = config.extra.get("task") if config is not None else None
        wanted = (None, "") if task in TASKS else (source, target)  # a task's own pairs carry gold alignments
        if base == self._base and wanted == self._input:
            return
        if self._jobs.busy():
            self.cancel()
        self._base, self._input = base, wanted
        self._guided = guided_head(config) if config is not None else None
        try:
            self.checkpoints = checkpoints_of(base)
        except UserError as exc:
            self.checkpoints = None
            self.metrics = None
            self.measure_button.setEnabled(False)
            self._show(False, str(exc))
            return
        self.measure_button.setEnabled(True)
        self.metrics = self._cache.get((base, *wanted))
        if self.metrics is None:
            on = (f"the first validation pairs of the {task} task" if task in TASKS else f"“{source}”")
            at = ("every snapshot" if any(c.final for c in self.checkpoints) else
                  f"each of its {len(self.checkpoints)} step revisions ({', '.join(self.revision_labels())})")
            self._show(False, f"Measure each head's entropy, alignment and importance at {at}, on {on}.")
        else:
            self._shown()

    def revision_labels(self) -> list[str]:
        """The checkpoints' names ('step3', 'step20'), a long list shortened to its ends."""
        labels = [c.label for c in self.checkpoints or []]
        return labels if len(labels) <= 6 else [*labels[:3], "…", *labels[-2:]]

    def set_step(self, step: int | None) -> None:
        """The slider's snapshot (None: the final model): the marker and the dots follow it."""
        self._step = step
        self._mark()

    def is_busy(self) -> bool:
        return self._jobs.busy()

    def shutdown(self) -> None:
        self._jobs.shutdown()

    # --- measuring ------------------------------------------------------------------------------------------------

    def measure(self) -> None:
        if self._base is None or self._input is None:
            return
        key = (self._base, *self._input)
        base, (source, target) = self._base, self._input  # read here: the job runs on another thread
        device = str(self.main.current_bundle().device) if self.main.current_bundle() is not None else "cpu"
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self.measure_button.setEnabled(False)
        self.message.setText("Measuring the heads at every checkpoint…")

        def done(found) -> None:
            self._idle()
            if found is None:
                return
            self._cache[key] = found
            if key == (self._base, *self._input):
                self.metrics = found
                self._shown()

        def failed(sentence: str) -> None:
            self._idle()
            self._show(False, sentence)

        self._jobs.start(lambda job: _measure(base, source, target, device, job), on_result=done,
                         on_error=failed, on_progress=self._progressed, doing="Measuring the heads")  # fmt: skip

    def cancel(self) -> None:
        self._jobs.cancel()
        self._idle()
        self.message.setText("Cancelled; press Measure to start again.")

    def _progressed(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat(f"{done} of {total}")

    def _idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self.measure_button.setEnabled(True)

    # --- drawing ----------------------------------------------------------------------------------------------

    def _show(self, drawn: bool, text: str = "") -> None:
        self.chart.setVisible(drawn)
        self.export_button.setEnabled(drawn)
        for box in (self.metric_box, self.type_box, self.layer_box):
            box.setVisible(drawn)
        self.message.setText(text)

    def _shown(self) -> None:
        """A new HeadMetrics: fill the choices, then draw."""
        m = self.metrics
        found = available(m)
        self._fill(self.metric_box, [METRICS[k][0] for k in found], list(found))
        self._fill_types()
        notes = " ".join(m.notes)
        self._show(True, f"Measured on {m.input}. {notes}".strip())
        self._draw()

    @staticmethod
    def _fill(box: QComboBox, texts: list[str], data: list) -> None:
        if [box.itemData(i) for i in range(box.count())] == data:
            return
        chosen = box.currentData()
        box.blockSignals(True)
        box.clear()
        for text, d in zip(texts, data):
            box.addItem(text, d)
        box.setCurrentIndex(max(0, box.findData(chosen)))
        box.blockSignals(False)

    def _fill_types(self) -> None:
        m = self.metrics
        metric = self.metric_box.currentData()
        if m is None or metric is None:
            return
        types = list(getattr(m, metric))
        fresh = self.type_box.count() == 0
        self._fill(self.type_box, [ATTENTION_TITLES.get(t, t) for t in types], types)
        if fresh and "decoder.cross_attn" in types:  # where the heads learn the alignment: the one to watch first
            self.type_box.blockSignals(True)
            self.type_box.setCurrentIndex(types.index("decoder.cross_attn"))
            self.type_box.blockSignals(False)
        kind = self.type_box.currentData()
        layers = getattr(m, metric)[kind].shape[1] if kind in getattr(m, metric) else 0
        fresh = self.layer_box.count() == 0
        self._fill(self.layer_box, ["all layers"] + [f"layer {i + 1}" for i in range(layers)],
                   [None] + list(range(layers)))  # fmt: skip
        if fresh and layers > 1:  # the last layer's heads first: every layer's at once crowd the chart
            self.layer_box.blockSignals(True)
            self.layer_box.setCurrentIndex(layers)
            self.layer_box.blockSignals(False)

    def curves(self):
        """The HeadCurves drawn now (plotdata.head_metrics), or None."""
        metric, kind = self.metric_box.currentData(), self.type_box.currentData()
        if self.metrics is None or metric is None or kind not in getattr(self.metrics, metric):
            return None
        return head_curves(self.metrics, metric, kind, self.layer_box.currentData(), self._guided)

    def _draw(self) -> None:
        if self.metrics is None:
            return
        self._fill_types()
        shown = self.curves()
        self.plot.clear()
        if shown is None:
            return
        item = self.plot.getPlotItem()
        item.setTitle(shown.title, size="9pt")
        item.setLabel("left", shown.y_label, **{"font-size": "8pt"})
        several = len({c.layer for c in shown.curves}) > 1  # a line style per layer; one layer's are solid
        for c in shown.curves:
            guided = shown.guided == (c.layer, c.head)
            style = LAYER_STYLES[c.layer % len(LAYER_STYLES)] if several else Qt.PenStyle.SolidLine
            pen = pg.mkPen(PALETTE[c.head % len(PALETTE)], width=3 if guided else 1.6, style=style)
            self.plot.plot(c.steps, c.values, pen=pen, symbol="o", symbolSize=5, symbolPen=None,
                           symbolBrush=PALETTE[c.head % len(PALETTE)],
                           name=c.label + (" (guided)" if guided else ""))  # fmt: skip
        self.plot.addItem(self.marker)
        self.plot.enableAutoRange()
        self.key.setText(key_html(shown))
        self._tick()
        self._mark()

    def _tick(self, *_args) -> None:
        """Label the log step axis with the checkpoints' own steps, as many as fit its width."""
        shown = self.curves() if self.metrics is not None else None
        if shown is None:
            return
        xs = [math.log10(s) for s in shown.steps if s > 0]
        span = (max(xs) - min(xs)) if len(xs) > 1 else 1.0
        width = max(1, self.plot.getPlotItem().getViewBox().width())
        self.plot.getAxis("bottom").setTicks([step_ticks(shown.steps, TICK_LABEL_PX * span / width)])

    def _mark(self) -> None:
        m = self.metrics
        if m is None:
            return
        at = checkpoint_at(m, self._step)
        self.marker.setVisible(at is not None)
        if at is not None:  # the x axis is log10(step), as head_curves lays the checkpoints out
            self.marker.setPos(math.log10(max(checkpoint_steps(m)[at], 1)))

    def _clicked(self, event) -> None:
        if self.metrics is None or event.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        x = 10 ** vb.mapSceneToView(event.scenePos()).x()  # the x axis is log10(step)
        shown = self.curves()
        if shown is None or not shown.steps:
            return
        nearest = min(range(len(shown.steps)), key=lambda i: abs(shown.steps[i] - x))
        point = self.metrics.checkpoints[nearest]
        self.checkpoint_clicked.emit(None if point.final else point.step)

    # --- export --------------------------------------------------------------------------------------------------

    def export(self, path: str | Path) -> Path:
        """The curves shown as .png/.svg/.pdf, or every head's numbers as .csv (the extension decides)."""
        from scratchformer.exporting.files import write_csv

        from ..export.plot_export import save_plot

        if self.metrics is None:
            raise UserError("Measure the heads first; there are no curves to save yet.")
        path = Path(path)
        if path.suffix.lower() == ".csv":
            return write_csv(path, head_metrics_csv(self.metrics))
        shown = self.curves()
        return save_plot(self.chart, path, f"{self.metrics.model}: {shown.title if shown else 'head metrics'}")

    def _export_dialog(self) -> None:
        from ..export.actions import save_numbers

        stem = f"{Path(self._base or 'model').name}.head-metrics"
        save_numbers(self.main, "Export the head metrics", f"{stem}.png", EXPORT_FILTERS, self.export,
                     allowed=("png", "svg", "pdf", "csv"))  # fmt: skip
