"""The Training tab: how attention forms. The loss curves of the current model's training run, a slider (and
play) over its snapshots, and for the chosen snapshot the attention map and decoded output of the current input,
side by side with the final model (the window's current run).

Each snapshot is loaded and run in a job (app/work/jobs.py, never on the UI thread); results are cached per
(model, snapshot step, source, target). "Inspect this snapshot" makes the whole window follow the snapshot.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from scratchformer.loading.bundle import Snapshot, snapshots_of, split_snapshot
from scratchformer.plotdata import (
    ATTENTION_TITLES,
    Heatmap,
    aligned_head,
    attention_types,
    guided_head,
    head_labels,
    shared_decoder_input,
    snapshot_heatmap,
    training_curves,
    training_record,
)
from scratchformer.plotdata.training import CROSS, attention_layers

from ..widgets.heatmap import HeatmapWidget
from ..work.jobs import JobRunner
from .base import View, placeholder
from .head_metrics_panel import HeadMetricsPanel

PLAY_INTERVAL_MS = 900
REVISIONS_ONLY = ("{model} has no training log or snapshots of its own, but the Hugging Face cache holds {n} of its "
                  "step revisions: Heads over training below measures each head at each of them.")
MAPS_TAB, HEADS_TAB = "Attention at this snapshot", "Heads over training"
NO_SNAPSHOTS = "This model has no training snapshots; train one with scratchformer train --snapshots N."


@dataclass
class SnapshotRun:
    """The current input run through one snapshot."""

    step: int
    trace: object  # scratchformer.recording.trace.Trace
    output: str  # the snapshot's greedy output ("" for models that cannot generate)
    guided: tuple[int, int] | None = None  # (decoder layer, head) trained with guided alignment, if any


def _snapshot_run(snapshot: Snapshot, source: str, target: str) -> SnapshotRun:
    """Load one snapshot and run the input through it (the work of a job: never on the UI thread)."""
    from scratchformer.exporting.snapshots import snapshot_run  # only when a snapshot is run

    trace, output, guided = snapshot_run(snapshot.spec, source, target, truncate=True)
    return SnapshotRun(snapshot.step, trace, output, guided)


class TrainingView(View):
    title = "Training"
    explains = "training"
    tooltip = "Watch attention form: loss curves and each training snapshot's attention and output"

    def __init__(self, window) -> None:
        super().__init__(window)
        self._base: str | None = None  # the model (without @step) whose snapshots are listed
        self._snapshots: list[Snapshot] = []
        self._cache: dict[tuple, SnapshotRun] = {}
        self._jobs = JobRunner("scratchformer-training")  # the snapshot runs and the Export… of them
        self._generation = 0  # of the latest snapshot run asked for: only its failure is shown
        self._pending: tuple | None = None  # the cache key being computed for the shown snapshot
        self._input: tuple[str, str] | None = None
        self._head_chosen = False  # the head box was set from the last snapshot (or by the user)
        self._maps: list[Heatmap] = []
        self._explained: str | None = None  # the model whose step revisions the explanation panel was told of

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.play_button = QPushButton("⏯")
        self.play_button.setCheckable(True)
        self.play_button.setToolTip("Play through the snapshots")
        self.play_button.setMinimumWidth(36)
        self.play_button.toggled.connect(self._play_toggled)
        bar.addWidget(self.play_button)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("Which training snapshot to show")
        self.slider.setPageStep(1)
        self.slider.setMinimumWidth(120)  # with the label and the buttons, fits a 1024-pixel window
        self.slider.valueChanged.connect(lambda _v: self._select())
        bar.addWidget(self.slider, 1)
        self.step_label = QLabel()
        self.step_label.setMinimumWidth(260)  # "step 128 (3 of 4) · valid loss 2.390 · accuracy 57%" without jumps
        bar.addWidget(self.step_label)
        choose = QHBoxLayout()  # a second row, so the tab fits beside the diagram and the explanation
        self.type_box = QComboBox()
        self.type_box.setToolTip("Which attention to show")
        self.type_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.type_box.currentIndexChanged.connect(lambda _i: self._type_changed())
        choose.addWidget(self.type_box)
        choose.addWidget(QLabel("layer"))
        self.layer_box = QComboBox()
        self.layer_box.currentIndexChanged.connect(lambda _i: self._draw())
        choose.addWidget(self.layer_box)
        choose.addWidget(QLabel("head"))
        self.head_box = QComboBox()
        self.head_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)  # "1 (guided in layer 2)"
        self.head_box.activated.connect(lambda _i: setattr(self, "_head_chosen", True))
        self.head_box.currentIndexChanged.connect(lambda _i: self._draw())
        choose.addWidget(self.head_box)
        choose.addStretch(1)
        self.inspect_button = QPushButton("Inspect this snapshot")
        self.inspect_button.setToolTip("Run the chosen snapshot in the window: the stepper and every tab follow it")
        self.inspect_button.clicked.connect(self.inspect_snapshot)
        choose.addWidget(self.inspect_button)
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save the chosen map over training: an animation (GIF, APNG) or a grid of "
                                      "small multiples (PNG, SVG, PDF)")
        self.export_button.clicked.connect(lambda: self.export_snapshots())
        bar.addWidget(self.export_button)  # on the first row: the second holds the map's choices
        self.controls = QWidget()
        rows = QVBoxLayout(self.controls)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.addLayout(bar)
        rows.addLayout(choose)
        self.reads_note = QLabel()
        self.reads_note.setWordWrap(True)
        self.reads_note.setStyleSheet("color: #555;")
        rows.addWidget(self.reads_note)
        layout.addWidget(self.controls)

        self.empty = placeholder(NO_SNAPSHOTS)
        layout.addWidget(self.empty)

        self.body = QSplitter(Qt.Orientation.Vertical)
        curves = QWidget()
        curves_layout = QHBoxLayout(curves)
        curves_layout.setContentsMargins(0, 0, 0, 0)
        self.loss_plot = pg.PlotWidget(title="Loss")
        self.loss_plot.addLegend(offset=(-10, 10))
        self.loss_plot.setLabel("bottom", "training step")
        self.accuracy_plot = pg.PlotWidget(title="Validation token accuracy")
        self.accuracy_plot.setLabel("bottom", "training step")
        self.accuracy_plot.setYRange(0, 1)
        for plot in (self.loss_plot, self.accuracy_plot):
            plot.setBackground("w")
            plot.setMinimumHeight(120)
        self.markers = [pg.InfiniteLine(angle=90, pen=pg.mkPen("#d62728", width=2, style=Qt.PenStyle.DashLine))
                        for _ in range(2)]
        self.loss_plot.addItem(self.markers[0])
        self.accuracy_plot.addItem(self.markers[1])
        curves_layout.addWidget(self.loss_plot, 2)
        curves_layout.addWidget(self.accuracy_plot, 1)
        self.curves_box = curves
        self.body.addWidget(curves)
        # Under the curves, one of two at a time, each with the whole height: the chosen snapshot's attention map
        # beside the final model's, or every head's metrics over training (the slider marks both).
        self.lower = QTabWidget()
        self.lower.setDocumentMode(True)
        maps = QSplitter()
        self.maps_box = maps
        self.snapshot_title, self.snapshot_map, self.snapshot_output = self._panel(maps)
        self.final_title, self.final_map, self.final_output = self._panel(maps)
        self.lower.addTab(maps, MAPS_TAB)
        self.head_metrics = HeadMetricsPanel(window)  # each head's metrics over training, under the loss curve
        self.head_metrics.checkpoint_clicked.connect(self._go_to_checkpoint)
        self.lower.addTab(self.head_metrics, HEADS_TAB)
        self.lower.setTabToolTip(1, "Each head's entropy, alignment and importance at every snapshot")
        self.body.addWidget(self.lower)
        self.body.setStretchFactor(0, 2)
        self.body.setStretchFactor(1, 3)
        self.body.setSizes([2000, 3000])  # shared in this ratio whatever the height (the user may drag it)
        self.body.setCollapsible(1, False)
        layout.addWidget(self.body, 1)

        self.timer = QTimer(self)
        self.timer.setObjectName("training-play")
        self.timer.setInterval(PLAY_INTERVAL_MS)
        self.timer.timeout.connect(self._tick)
        window.installEventFilter(self)  # stop the timer and wait for the worker when the window closes
        self._show_empty(True, "Run a model to see its training snapshots.")

    def _panel(self, parent: QSplitter) -> tuple[QLabel, HeatmapWidget, QLabel]:
        box = QWidget()
        box_layout = QVBoxLayout(box)
        box_layout.setContentsMargins(0, 0, 0, 0)
        title = QLabel()
        title.setWordWrap(True)  # a long model name wraps rather than widening a 1024-pixel window
        output = QLabel()
        output.setWordWrap(True)
        output.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        heatmap = HeatmapWidget()
        self.connect_heatmap(heatmap)
        box_layout.addWidget(title)
        box_layout.addWidget(heatmap, 1)
        box_layout.addWidget(output)
        parent.addWidget(box)
        return title, heatmap, output

    # --- what the window calls ----------------------------------------------------------------------------

    def refresh(self) -> None:
        result = self.main.current_result()
        if result is None:
            self._show_empty(True, "Run a model to see its training snapshots.")
            return
        base, _ = split_snapshot(result.request.model)
        if base != self._base:
            self._load_model(base)
        if not self._snapshots:
            self.head_metrics.set_model(base, result.bundle.config, result.request.source, result.request.target)
            if self.head_metrics.checkpoints:  # step revisions in the Hugging Face cache: their heads alone
                self._show_empty(True, REVISIONS_ONLY.format(model=base, n=len(self.head_metrics.checkpoints)),
                                 heads_only=True)  # fmt: skip
                if self._explained != base and self.isVisible() and hasattr(self.main, "refresh_explanation"):
                    self._explained = base
                    self.main.refresh_explanation()  # the panel's "In this run" names the revisions
            return
        if result.request.windows:
            self._show_empty(True, "The Training tab runs one sentence; turn off the batch of windows.")
            return
        self._show_empty(False)
        # Every snapshot reads the decoder input the window's model read, so the two maps' rows line up: the
        # typed target, or else that model's own translation (teacher forcing); each snapshot's own greedy
        # output is decoded separately for the output line.
        typed = result.request.target
        translation = result.inputs.translation if result.inputs.decoder_input == "generated" else ""
        source = result.request.source
        if not result.bundle.config.has_encoder:  # a decoder-only model read its text and its continuation: so do all
            source, translation = result.bundle.tgt_tokenizer.decode(result.inputs.tgt[0, 1:].tolist()), ""
        target = shared_decoder_input(typed, translation)
        if typed.strip():
            note = "Both maps read the typed target as decoder input (teacher forcing)."
        elif target.strip():
            note = (f"Both maps read the same decoder input, &lt;s&gt; {html.escape(target)} (the window's model's "
                    "own translation), so their rows line up; each <b>output</b> line is what that model writes "
                    "on its own.")
        else:
            note = ""
        self.reads_note.setText(note)
        self._input = (source, target)
        self.head_metrics.set_model(base, result.bundle.config, source, target)
        self._fill_selectors(result.trace)
        self._select()

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._maps)

    def view_title(self) -> str:
        return "Training snapshots"

    def explain_facts(self) -> dict:
        if self._snapshots or not self.head_metrics.checkpoints:
            return {}
        return {"revisions": self.head_metrics.revision_labels()}  # a Hugging Face model's step revisions

    def is_busy(self) -> bool:
        return self._jobs.busy() or self.head_metrics.is_busy()

    def current_snapshot(self) -> Snapshot | None:
        i = self.slider.value()
        return self._snapshots[i] if 0 <= i < len(self._snapshots) else None

    def current_run(self) -> SnapshotRun | None:
        key = self._key()
        return self._cache.get(key) if key is not None else None

    def inspect_snapshot(self) -> None:
        """Make the window run the chosen snapshot (the stepper and every tab then show it)."""
        snap = self.current_snapshot()
        if snap is None or self._base is None:
            return
        self.stop_play()
        self.main.set_model(f"{self._base}@step-{snap.step:06d}")
        self.main.run()

    def export_snapshots(self, path: str | None = None):
        """Export…: the chosen map over every snapshot, as an animation or a grid, to `path` (None: ask with a
        file dialog). The snapshots run in a job (app/export/snapshot_export.py); returns it, or None."""
        from scratchformer.errors import UserError

        from ..export.snapshot_export import plan_export

        try:
            export = plan_export(self, path)
        except UserError as exc:
            self.main.show_error(str(exc))
            return None
        if export is None:
            return None
        # shutdown() waits for it like for the snapshot runs
        return self._jobs.start(export.series, on_result=export.write, on_error=export.fail,
                                name="scratchformer-snapshot-export")

    # --- model and selectors -------------------------------------------------------------------------------

    def _load_model(self, base: str) -> None:
        self.stop_play()
        self._base = base
        self._explained = None
        self._snapshots = snapshots_of(base)
        self._head_chosen = False
        curves = training_curves(training_record(base))
        self.loss_plot.clear()
        self.accuracy_plot.clear()
        self.loss_plot.addItem(self.markers[0])
        self.accuracy_plot.addItem(self.markers[1])
        if curves.train_loss:
            x, y = zip(*curves.train_loss)
            self.loss_plot.plot(x, y, pen=pg.mkPen("#1f77b4", width=2), name="train loss")
        if curves.valid_loss:
            x, y = zip(*curves.valid_loss)
            self.loss_plot.plot(x, y, pen=pg.mkPen("#ff7f0e", width=2), name="valid loss")
        if curves.valid_token_accuracy:
            x, y = zip(*curves.valid_token_accuracy)
            self.accuracy_plot.plot(x, y, pen=pg.mkPen("#2ca02c", width=2))
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, len(self._snapshots) - 1))
        self.slider.setValue(max(0, len(self._snapshots) - 1))  # start at the last snapshot (the default head's)
        self.slider.blockSignals(False)
        if not self._snapshots:
            self._show_empty(True, NO_SNAPSHOTS)

    @staticmethod
    def _fill_box(box: QComboBox, items: list[str], data: list | None = None, default: int = 0) -> bool:
        if [box.itemText(i) for i in range(box.count())] == items:
            return False
        box.blockSignals(True)
        box.clear()
        for i, text in enumerate(items):
            box.addItem(text, data[i] if data else None)
        box.setCurrentIndex(max(0, min(default, len(items) - 1)))
        box.blockSignals(False)
        return True

    def _fill_selectors(self, trace) -> None:
        types = attention_types(trace)
        default = types.index(CROSS) if CROSS in types else len(types) - 1
        self._fill_box(self.type_box, [ATTENTION_TITLES[t] for t in types], types, default)
        self._fill_layers(trace)

    def _fill_layers(self, trace) -> None:
        kind = self.type_box.currentData()
        n = attention_layers(trace, kind) if kind else 0
        self._fill_box(self.layer_box, [str(i + 1) for i in range(n)], default=n - 1)
        heads = 0
        for step in trace.attention_steps():
            heads = step.shape[1]
            break
        bundle = self.main.current_bundle()
        guided = guided_head(bundle.config) if bundle is not None and kind == CROSS else None
        if self._fill_box(self.head_box, head_labels(heads, guided)):
            self._head_chosen = False
            self.head_box.updateGeometry()  # the guided head's longer label

    def _type_changed(self) -> None:
        trace = self.main.current_trace()
        if trace is not None:
            self._fill_layers(trace)
        self._draw()

    # --- the snapshot shown ---------------------------------------------------------------------------------

    def _key(self) -> tuple | None:
        snap = self.current_snapshot()
        if snap is None or self._input is None:
            return None
        return (self._base, snap.step, *self._input)

    def _select(self) -> None:
        snap = self.current_snapshot()
        if snap is None:
            return
        for marker in self.markers:
            marker.setPos(snap.step)
        self.head_metrics.set_step(snap.step)
        parts = [f"step {snap.step} ({self.slider.value() + 1} of {len(self._snapshots)})"]
        if snap.valid_loss is not None:
            parts.append(f"valid loss {snap.valid_loss:.3f}")
        if snap.valid_token_accuracy is not None:
            parts.append(f"accuracy {snap.valid_token_accuracy:.0%}")
        self.step_label.setText(" · ".join(parts))
        key = self._key()
        if key is None:
            return
        if key in self._cache:
            self._pending = None
            self._draw()
        elif key != self._pending:
            self._start(key, snap)
            self._draw()

    def _start(self, key: tuple, snap: Snapshot) -> None:
        self._generation += 1
        self._pending = key
        generation = self._generation
        self._jobs.start(lambda job: _snapshot_run(snap, key[2], key[3]), on_result=lambda run: self._on_done(key, run),
                         on_error=lambda message: self._on_failed(generation, message))

    def _on_done(self, key: tuple, run: SnapshotRun) -> None:
        self._cache[key] = run  # kept even when superseded: the slider may come back to it
        if key == self._pending:
            self._pending = None
        if key == self._key():
            if not self._head_chosen and self._snapshots and run.step == self._snapshots[-1].step:
                kind = self.type_box.currentData() or CROSS
                head = aligned_head(run.trace, kind, self.layer_box.currentIndex(), run.guided)
                self.head_box.blockSignals(True)
                self.head_box.setCurrentIndex(min(head, self.head_box.count() - 1))
                self.head_box.blockSignals(False)
                self._head_chosen = True
            self._draw()

    def _on_failed(self, generation: int, message: str) -> None:
        if generation != self._generation:
            return
        self._pending = None
        self.stop_play()
        self.snapshot_output.setText(html.escape(message))
        if hasattr(self.main, "show_error"):
            self.main.show_error(message)

    def _go_to_checkpoint(self, step: int | None) -> None:
        """A click on the head metrics' chart: the slider goes to that snapshot (the final model: the last one)."""
        steps = [s.step for s in self._snapshots]
        if steps:
            self.slider.setValue(steps.index(step) if step in steps else len(steps) - 1)

    # --- playing --------------------------------------------------------------------------------------------

    def _play_toggled(self, on: bool) -> None:
        if on and self._snapshots:
            if self.slider.value() >= self.slider.maximum():
                self.slider.setValue(0)
            self.timer.start()
        else:
            self.stop_play()

    def stop_play(self) -> None:
        self.timer.stop()
        if self.play_button.isChecked():
            self.play_button.blockSignals(True)
            self.play_button.setChecked(False)
            self.play_button.blockSignals(False)

    def _tick(self) -> None:
        if self._pending is not None:
            return  # wait for the snapshot shown to be computed
        if self.slider.value() >= self.slider.maximum():
            self.stop_play()
            return
        self.slider.setValue(self.slider.value() + 1)

    def hideEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.stop_play()
        super().hideEvent(event)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt name)
        if obj is self.main and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Stop playing and wait for any snapshot run or export in progress (no thread may outlive the window).
        Not cancelled: what they make is still kept, or written, since a training run may refuse the close."""
        self.stop_play()
        self._generation += 1
        self._jobs.wait()
        self.head_metrics.shutdown()

    # --- drawing -------------------------------------------------------------------------------------------

    def _show_empty(self, empty: bool, text: str | None = None, heads_only: bool = False) -> None:
        """No snapshot to show (with the sentence why): the controls and maps go; the curves stay if there are
        any, and with `heads_only` (a Hugging Face model's step revisions) the heads over training stay."""
        if text:
            self.empty.setText(text)
        self.empty.setVisible(empty)
        self.controls.setVisible(not empty)
        # the curves are worth showing even without snapshots (e.g. en-hi's per-epoch history)
        curves = bool(self.loss_plot.listDataItems())
        self.curves_box.setVisible(curves or not empty)
        self.body.setVisible(not empty or curves or heads_only)
        self.lower.setTabVisible(0, not empty)  # the maps need a snapshot; the heads' tab says why it has none
        if heads_only:
            self.lower.setCurrentWidget(self.head_metrics)
        if empty:
            self._maps = []
            self.stop_play()

    def _draw(self) -> None:
        result = self.main.current_result()
        snap = self.current_snapshot()
        if result is None or snap is None:
            return
        kind = self.type_box.currentData() or CROSS
        layer, head = self.layer_box.currentIndex(), max(0, self.head_box.currentIndex())
        where = f"{ATTENTION_TITLES.get(kind, kind)}, layer {layer + 1}, head {head + 1}"
        final = snapshot_heatmap(result.trace, kind, layer, head, caption=f"{result.bundle.name} (final)")
        self.final_title.setText(f"<b>{html.escape(result.bundle.name)}</b> (the window's model) — {where}")
        self.final_map.set_heatmap(final)
        final_out = result.inputs.translation if result.inputs.decoder_input == "generated" else ""
        self.final_output.setText(f"<b>output</b>: {html.escape(final_out)}" if final_out else
                                  "<b>output</b>: (teacher forcing on the typed target)")
        self.snapshot_title.setText(f"<b>step {snap.step}</b> — {where}")
        run = self.current_run()
        if run is None:
            self.snapshot_map.set_heatmap(None)
            self.snapshot_output.setText("Running the snapshot…")
            self._maps = [final] if final is not None else []
            return
        caption = f"step {snap.step}" + (f" · valid loss {snap.valid_loss:.3f}" if snap.valid_loss is not None else "")
        shown = snapshot_heatmap(run.trace, kind, layer, head, caption=caption)
        self.snapshot_map.set_heatmap(shown)
        own = html.escape(run.output) if run.output.strip() else "(nothing: it ends at once)"
        self.snapshot_output.setText(f"<b>output at step {snap.step}</b>: {own}")
        self._maps = [m for m in (shown, final) if m is not None]

    # --- a run in progress (File › Train…) ------------------------------------------------------------------

    def show_live_curve(self, train_points, valid_points=(), accuracy_points=()) -> None:
        """Draw a training run in progress, as (step, value) pairs (training loss, validation loss, validation
        token accuracy), in place of the model's own curves. The next refresh for another model shows that
        model's curves again (the trained model's, once it opens)."""
        live = getattr(self, "_live", None)
        if live is None or live[0] not in self.loss_plot.listDataItems():
            self.loss_plot.clear()
            self.accuracy_plot.clear()
            dots = {"symbol": "o", "symbolSize": 6}
            self._live = live = (
                self.loss_plot.plot(pen=pg.mkPen("#1f77b4", width=2), name="train loss (training now)"),
                self.loss_plot.plot(pen=pg.mkPen("#ff7f0e", width=2), symbolBrush="#ff7f0e", name="valid loss",
                                    **dots),
                self.accuracy_plot.plot(pen=pg.mkPen("#2ca02c", width=2), symbolBrush="#2ca02c", **dots),
            )
            self._base = None  # whatever model the window shows, its curves are drawn afresh on the next refresh
        for item, points in zip(live, (train_points, valid_points, accuracy_points)):
            if points:
                x, y = zip(*points)
                item.setData(list(x), list(y))
        if self.empty.isVisible():
            self.empty.setText("Training in progress: its curves grow below; the model opens when it is done.")
        self.curves_box.setVisible(True)
        self.body.setVisible(True)

    # --- for tests ------------------------------------------------------------------------------------------

    def snapshot_output_text(self) -> str:
        run = self.current_run()
        return run.output if run is not None else ""
