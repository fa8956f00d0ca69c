"""The decoding timeline: generate the translation one token at a time and watch each new decoder row.

Each step shows the token fed in, the token that comes out, the new row's cross-attention over the source
(stacked under the earlier rows) and the top-k next-token distribution. A switch picks teacher forcing (the
typed target is fed in) or free-running generation (the model's own argmax is fed back). For a decoder-only model
the steps are the new tokens of the run's continuation of the text (greedy or sampled, as the input bar asked),
each with its self-attention row over everything read so far. The timeline is computed by
scratchformer.running.decoding.timeline (or scratchformer.running.generation.continuation_timeline) in a job
(app/work/jobs.py), never on the UI thread; a newer run or mode cancels the older job, whose timeline is then dropped.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from scratchformer.plotdata import Heatmap, abbreviate, guided_head, head_labels, timeline_heatmap
from scratchformer.running.decoding import Timeline, timeline
from scratchformer.running.generation import continuation_timeline

from ..widgets.heatmap import HeatmapWidget
from ..work.jobs import JobRunner
from .base import View, placeholder

TEACHER, FREE = "teacher", "free"
MODE_TEXT = {TEACHER: "teacher forcing", FREE: "free-running", "sampled": "sampled"}
PLAY_INTERVAL_MS = 700


def _probability(p: float) -> str:
    """0.245, or 2.1e-05 for the tiny ones (an untrained model spreads its mass over 50,000 tokens: not 0.000)."""
    return f"{p:.3f}" if p >= 0.001 or p == 0 else f"{p:.1e}"


class DecodingView(View):
    title = "Decoding"
    explains = "decoding"
    tooltip = "Generate the output one token at a time: each step's cross-attention and top-k next tokens"

    def __init__(self, window) -> None:
        super().__init__(window)
        self.timeline: Timeline | None = None
        self.position = 0  # the step shown (index into timeline.steps)
        self._jobs = JobRunner("scratchformer-decoding")
        self._key = None  # (result id, mode, k): what the current timeline was computed for
        self._map: Heatmap | None = None
        self._bundle = None
        self._continued = ""  # for a decoder-only model's continuation: how its tokens were chosen

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.mode_box = QComboBox()
        self.mode_box.addItem("Teacher forcing", TEACHER)  # short: the tab must fit a 1024-pixel window
        self.mode_box.addItem("Free-running", FREE)
        self.mode_box.setItemData(0, "Feed the typed target, one token per step", Qt.ItemDataRole.ToolTipRole)
        self.mode_box.setItemData(1, "Feed back the model's own most probable token", Qt.ItemDataRole.ToolTipRole)
        self.mode_box.setToolTip("Teacher forcing feeds the target you typed; free-running feeds each argmax back")
        self.mode_box.currentIndexChanged.connect(lambda _i: self.refresh())
        bar.addWidget(self.mode_box)
        self.first_button = QPushButton("⏮")
        self.first_button.setToolTip("Back to the first step")
        self.prev_button = QPushButton("◀")
        self.prev_button.setToolTip("Previous step")
        self.next_button = QPushButton("Next ▶")
        self.next_button.setToolTip("Generate the next token")
        self.play_button = QPushButton("⏯")
        self.play_button.setCheckable(True)
        self.play_button.setToolTip("Step through the whole decode")
        for button in (self.first_button, self.prev_button, self.next_button, self.play_button):
            button.setMinimumWidth(36 if button is not self.next_button else 64)  # not the style's 80 px each
            bar.addWidget(button)
        self.first_button.clicked.connect(lambda: self.go_to(0))
        self.prev_button.clicked.connect(lambda: self.go_to(self.position - 1))
        self.next_button.clicked.connect(self.next_step)
        self.play_button.toggled.connect(self._play_toggled)
        bar.addWidget(QLabel("layer"))
        self.layer_box = QComboBox()
        self.layer_box.setToolTip("Which decoder layer's attention to show (cross-attention; for a decoder-only "
                                  "model, self-attention)")
        self.layer_box.currentIndexChanged.connect(lambda _i: self._draw())
        bar.addWidget(self.layer_box)
        bar.addWidget(QLabel("head"))
        self.head_box = QComboBox()
        self.head_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.head_box.setToolTip("Which attention head to show (averaged: the mean over heads)")
        self.head_box.currentIndexChanged.connect(lambda _i: self._draw())
        bar.addWidget(self.head_box)
        bar.addStretch(1)
        layout.addLayout(bar)

        self.source_label = QLabel()
        self.source_label.setWordWrap(True)
        self.target_label = QLabel()
        self.target_label.setWordWrap(True)
        self.step_label = QLabel()
        self.step_label.setWordWrap(True)
        for label in (self.source_label, self.target_label, self.step_label):
            layout.addWidget(label)
        self.target_label.setToolTip("Click a token to see which input tokens its prediction depends on "
                                     "(Output › Attribution)")
        self.target_label.linkActivated.connect(lambda link: self.attribute_step(int(link.split(":")[1])))
        self.empty = placeholder("Run a model with a decoder to watch it generate one token at a time.")
        layout.addWidget(self.empty)

        self.body = QSplitter()
        self.heatmap = HeatmapWidget()
        self.connect_heatmap(self.heatmap)
        self.body.addWidget(self.heatmap)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(QLabel("Top-k next tokens at this step"))
        self.top_table = QTableWidget(0, 2)
        self.top_table.setHorizontalHeaderLabels(["token", "p"])
        self.top_table.verticalHeader().setVisible(False)
        self.top_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.top_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        right_layout.addWidget(self.top_table, 1)
        self.body.addWidget(right)
        self.body.setStretchFactor(0, 3)
        self.body.setStretchFactor(1, 1)
        layout.addWidget(self.body, 1)

        self.timer = QTimer(self)
        self.timer.setObjectName("decoding-play")
        self.timer.setInterval(PLAY_INTERVAL_MS)
        self.timer.timeout.connect(self._tick)
        window.installEventFilter(self)  # stop the timer and wait for the worker when the window closes
        self._show_empty(True)

    # --- what the window calls ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Recompute the timeline when the run or the mode changed; otherwise just redraw."""
        result = self.main.current_result()
        bundle = result.bundle if result is not None else None
        if bundle is None or not bundle.config.has_decoder or result.request.windows:
            self.timeline = None
            self._key = None
            self._show_empty(True, "Run a model with a decoder on one sentence to watch it generate "
                                   "one token at a time.")
            return
        self.mode_box.setVisible(bundle.config.has_encoder)  # a decoder-only model has no target to force
        if not bundle.config.has_encoder:
            self._refresh_continuation(result)
            return
        self._continued = ""
        mode = self.mode_box.currentData()
        if mode == TEACHER and not result.request.target.strip() and result.inputs.decoder_input == "generated":
            # the run's decoder read the model's own output: its timeline is the free-running one
            self.mode_box.blockSignals(True)
            self.mode_box.setCurrentIndex(self.mode_box.findData(FREE))
            self.mode_box.blockSignals(False)
            mode = FREE
        target = result.request.target.strip() if mode == TEACHER else None
        if mode == TEACHER and not target:
            self.timeline = None
            self._key = None
            self._show_empty(True, "Type a target sentence for teacher forcing, or switch to free-running.")
            return
        key = (id(result), mode)
        if key == self._key:
            self._draw()
            return
        self._key = key
        self._start(bundle, result.request.source, target)

    def _refresh_continuation(self, result) -> None:
        """A decoder-only model: step through the new tokens of the run's own continuation."""
        inputs = result.inputs
        if inputs.decoder_input != "generated" or not inputs.generated or inputs.continuation is None:
            self.timeline = None
            self._key = None
            self._show_empty(True, "This run read your text only. Ask for new tokens (“new”, beside Continue in "
                                   "the input bar) and press Run: the model continues the text, and this view "
                                   "steps through each new token.")
            return
        key = (id(result), "continued")
        if key == self._key:
            self._draw()
            return
        self._key = key
        self._continued = inputs.continuation.describe()
        ids = inputs.tgt[0].tolist()  # [start, text…, new tokens…]
        prompt, how, made = ids[1 : len(ids) - len(inputs.generated)], inputs.continuation, list(inputs.generated)
        bundle = result.bundle
        self._start_work(bundle, lambda: continuation_timeline(bundle, prompt, how, forced=made, k=8))

    def current_heatmaps(self) -> list[Heatmap]:
        return [self._map] if self._map is not None else []

    def view_title(self) -> str:
        return "Decoding timeline"

    def is_busy(self) -> bool:
        return self._jobs.busy()

    # --- stepping ------------------------------------------------------------------------------------------

    def go_to(self, position: int) -> None:
        if self.timeline is None or not self.timeline.steps:
            return
        self.position = max(0, min(position, len(self.timeline.steps) - 1))
        self._draw()

    def next_step(self) -> None:
        self.go_to(self.position + 1)

    def _play_toggled(self, on: bool) -> None:
        if on and self.timeline is not None:
            if self.position >= len(self.timeline.steps) - 1:
                self.position = -1
            self.timer.start()
        else:
            self.timer.stop()
            if self.play_button.isChecked():
                self.play_button.setChecked(False)

    def _tick(self) -> None:
        if self.timeline is None or self.position >= len(self.timeline.steps) - 1:
            self.play_button.setChecked(False)
            return
        self.next_step()

    # --- the worker ----------------------------------------------------------------------------------------

    def _start(self, bundle, source: str, target: str | None) -> None:
        self._start_work(bundle, lambda: timeline(bundle, source, target, k=8))

    def _start_work(self, bundle, work) -> None:
        self._jobs.cancel()  # a newer run or mode: what an older job makes is no longer wanted
        self._bundle = bundle
        self.play_button.setChecked(False)
        self.step_label.setText("Decoding…")
        self._jobs.start(lambda job: work(), on_result=self._on_done, on_error=self._on_failed)

    def _on_done(self, tl: Timeline) -> None:
        self.timeline = tl
        self.position = 0
        n_layers, n_heads = 0, 0
        if tl.steps:  # the rows drawn: cross-attention, or a decoder-only model's self-attention
            first = tl.steps[0]
            rows = first.cross_attention if first.cross_attention is not None else first.self_attention
            n_layers, n_heads = rows.shape[:2]
        # default: the layer that aligns best (chosen on validation data at training time), else the last one
        chosen = self._bundle.config.extra.get("alignment_layer", n_layers - 1)
        self._fill_box(self.layer_box, ["all averaged"] + [str(i + 1) for i in range(n_layers)],
                       int(chosen) + 1 if n_layers else 0)
        # a head trained on the gold alignment (training's --align-weight) is shown first, and says so
        guided = guided_head(self._bundle.config)
        if guided is not None and guided[0] != int(chosen):
            guided = None  # only the layer shown first says which of its heads is guided
        self._fill_box(self.head_box, ["averaged"] + head_labels(n_heads, guided), guided[1] + 1 if guided else 0)
        self._show_empty(False)
        self._draw()

    def _on_failed(self, message: str) -> None:
        self.timeline = None
        self._show_empty(True, message)
        if hasattr(self.main, "show_error"):
            self.main.show_error(message)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt name)
        if obj is self.main and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Stop playing and wait for any decode in progress (no thread may outlive the window)."""
        self.timer.stop()
        self._jobs.shutdown()

    # --- drawing -------------------------------------------------------------------------------------------

    @staticmethod
    def _fill_box(box: QComboBox, items: list[str], default: int) -> None:
        if [box.itemText(i) for i in range(box.count())] == items:
            return
        box.blockSignals(True)
        box.clear()
        box.addItems(items)
        box.setCurrentIndex(min(default, len(items) - 1))
        box.blockSignals(False)

    def _show_empty(self, empty: bool, text: str | None = None) -> None:
        if text:
            self.empty.setText(text)
        self.empty.setVisible(empty)
        self.body.setVisible(not empty)
        for label in (self.source_label, self.target_label, self.step_label):
            label.setVisible(not empty)
        if empty:
            self._map = None
            self.timer.stop()

    def attribute_step(self, index: int) -> None:
        """A click on an output token: the input tokens its prediction depends on (Output › Attribution). The
        attribution reads the window's run, so the run's decoder must have read the same tokens up to it."""
        tl, result = self.timeline, self.main.current_result()
        view = next((v for v in self.main.views if v.title == "Attribution"), None)
        if tl is None or result is None or view is None or not 0 <= index < len(tl.steps):
            return
        step = tl.steps[index]
        read = result.trace.target_tokens[min(self.main.current_batch(), len(result.trace.target_tokens) - 1)] \
            if result.trace.target_tokens else []
        wanted = [s.input_token for s in tl.steps[: index + 1]]
        if read[: len(wanted)] != wanted:
            self.main.show_error(
                f"Attribution reads the run in the window, whose decoder did not read {' '.join(wanted)!r} up to "
                f"this token; switch to Teacher forcing, or run with this output as the target.")
            return
        view.show_position(step.position)

    def _draw(self) -> None:
        tl = self.timeline
        if tl is None or not tl.steps:
            return
        step = tl.steps[self.position]
        unknown = set(tl.unknown_words)
        src = []
        for token in tl.source_tokens:
            text = html.escape(token)
            src.append(f"<span style='color:#c00; text-decoration:underline' title='not in the vocabulary'>"
                       f"{text}</span>" if token == "<unk>" else text)
        note = (f" &nbsp; <span style='color:#c00'>Unknown words (read as &lt;unk&gt;): "
                f"{html.escape(', '.join(sorted(unknown)))}</span>") if unknown else ""
        self.source_label.setText(f"<b>{'text' if self._continued else 'source'}</b>: {' '.join(src)}{note}")
        out = []
        for i, s in enumerate(tl.steps[: self.position + 1]):  # each token a link: a click attributes it
            text = html.escape(s.token)
            style = "color:#1a1a1a; text-decoration:none" + ("; background:#ffe08a; font-weight:bold"
                                                             if i == self.position else "")
            out.append(f"<a href='token:{i}' style='{style}'>{text}</a>")
        if self._continued:
            self.target_label.setText(f"<b>continuation</b> ({html.escape(self._continued)}): {' '.join(out)}")
        else:
            self.target_label.setText(f"<b>output</b> ({MODE_TEXT.get(tl.mode, tl.mode)}): {' '.join(out)}")
        p = dict(step.top_k).get(step.token)
        p_text = f"p = {_probability(p)}" if p is not None else "not in the top-k"
        forced = {TEACHER: " (forced)", "sampled": " (drawn)"}.get(tl.mode, "")
        self.step_label.setText(
            f"step {self.position + 1} of {len(tl.steps)} — position {step.position}: reads "
            f"<b>{html.escape(step.input_token)}</b> → emits <b>{html.escape(step.token)}</b>{forced}, {p_text}")
        layer = self.layer_box.currentIndex() - 1
        head = self.head_box.currentIndex() - 1
        self._map = timeline_heatmap(tl, self.position, None if layer < 0 else layer, None if head < 0 else head)
        self.heatmap.set_heatmap(self._map)
        self.top_table.setRowCount(len(step.top_k))
        for i, (token, prob) in enumerate(step.top_k):
            item = QTableWidgetItem(abbreviate(token, 20))
            item.setToolTip(token)
            if token == step.token:
                item.setBackground(QColor("#ffe08a"))
            self.top_table.setItem(i, 0, item)
            self.top_table.setItem(i, 1, QTableWidgetItem(_probability(prob)))
        self.prev_button.setEnabled(self.position > 0)
        self.first_button.setEnabled(self.position > 0)
        self.next_button.setEnabled(self.position < len(tl.steps) - 1)
