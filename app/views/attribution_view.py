"""Which input tokens the prediction at one decoder position depends on: Integrated Gradients (or gradient ×
input) of the log-probability of the token the model puts there, over the source tokens and the decoder-input
tokens, beside the cross-attention row that produced it. A click on an output row in the Output view opens it.
Numbers: scratchformer.analyses.attribute; maps and CSV: scratchformer.plotdata.analyses."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QPushButton, QSpinBox, QVBoxLayout, QWidget

from scratchformer.plotdata.analyses import attribution_csv, attribution_maps
from scratchformer.plotdata.heatmap import SEQUENTIAL, Heatmap

from ..widgets.heatmap import HeatmapWidget
from .analysis_base import AnalysisView

ASK = ("Pick a decoder position and press Attribute, or click a row in Output › Output: Integrated Gradients runs "
       "the model once per step, so it starts only when asked.")


def _cross_row(trace, value, batch: int) -> Heatmap | None:
    """The last cross-attention's row at this position, heads averaged: what raw attention says beside it."""
    steps = [s for s in trace.attention_steps() if s.attention_type == "decoder.cross_attn"]
    if not steps:
        return None
    row = steps[-1].item(batch).double().mean(0)[value.position]  # (h, T, S) → (S,)
    return Heatmap(row.float().numpy()[None], ["attention"], list(value.source_tokens), "", "src_pos", (0.0, 1.0),
                   SEQUENTIAL, f"Cross-attention of {steps[-1].sublayer} at position {value.position} "
                   "(heads averaged)", steps[-1].name)  # fmt: skip


class AttributionView(AnalysisView):
    title = "Attribution"
    tooltip = "Integrated Gradients of one output token over the source and decoder-input tokens"
    explains = "attribution"
    empty_text = "Run a model with an output layer to attribute a prediction to its input tokens."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.position = QSpinBox()
        self.position.setToolTip("The decoder position whose predicted token is attributed")
        self.method = QComboBox()
        self.method.addItem("IG", "ig")
        self.method.addItem("grad × input", "grad-input")
        self.steps = QSpinBox()
        self.steps.setRange(1, 1024)
        self.steps.setValue(64)
        self.steps.setToolTip("Integrated Gradients' points along the path from the baseline on the first try; "
                              "doubled while the attributions miss completeness by more than 1%")
        self.baseline = QComboBox()
        self.baseline.addItem("zeros", "zero")
        self.baseline.addItem("padding", "pad")
        self.position.setPrefix("pos ")
        self.steps.setSuffix(" steps")
        self.baseline.setToolTip("What the path starts from: all-zero embeddings, or the padding token's")
        self.method.setToolTip("Integrated Gradients (complete: the parts add up to f(x) − f(baseline)), or the "
                               "one-step gradient × input")  # fmt: skip
        self.go_button = QPushButton("Attribute")
        self.go_button.setToolTip("Compute the attribution of the token predicted at this position (it runs the model "
                                  "once per step, so it starts only when asked)")  # fmt: skip
        self.go_button.clicked.connect(self._ask)
        for widget in (self.position, self.method, self.steps, self.baseline, self.go_button):  # labelled by text
            self.bar.addWidget(widget)
        self._asked_run = None  # the run an attribution was asked for: it runs only when asked
        self.position.valueChanged.connect(lambda _v: self._changed())
        self.method.currentIndexChanged.connect(lambda _i: self._changed())
        self.steps.editingFinished.connect(self._changed)
        self.baseline.currentIndexChanged.connect(lambda _i: self._changed())
        self.finish_bar()
        self.body = QWidget()
        maps = QVBoxLayout(self.body)
        maps.setContentsMargins(0, 0, 0, 0)
        self.widgets = [HeatmapWidget() for _ in range(3)]  # source, decoder input, cross-attention
        for w in self.widgets:
            self.connect_heatmap(w)
            maps.addWidget(w, 1)
        self.layout_.addWidget(self.body, 1)
        self.maps: list[Heatmap] = []
        self.show_body(False, self.empty_text)

    def show_position(self, position: int) -> None:
        """Attribute the token predicted at this decoder position (the Output view's row click)."""
        self._asked_run = self.main.current_result()
        self.main.tabs.setCurrentWidget(self)
        self.position.setValue(position)
        self.recompute()

    def _ask(self) -> None:
        self._asked_run = self.main.current_result()
        self.recompute()

    def _changed(self) -> None:
        if self._asked_run is not None and self._asked_run is self.main.current_result():
            self.recompute()  # once asked, a changed control computes again

    def show_body(self, shown: bool, text: str = "") -> None:
        super().show_body(shown, text)
        self.body.setVisible(shown)

    def request(self, result):
        return (id(result), self.main.current_batch(), self.position.value(), self.method.currentData(),
                self.steps.value(), self.baseline.currentData())  # fmt: skip

    def compute(self, result, key: tuple, job):
        from scratchformer.analyses import attribute

        _, batch, position, method, steps, baseline = key
        value = attribute.compute(result.bundle, result.inputs, result.trace, position, method, steps, baseline,
                                  batch, progress=job.progress, cancelled=job.cancelled)  # fmt: skip
        if value is None:
            return None  # a newer request took its place: nothing of this one is shown
        return value, _cross_row(result.trace, value, batch)  # the row reads a step: off the UI thread too

    def progressed(self, steps: int, gap: float) -> None:
        """IG fell short of completeness with `steps` points: say so while the next try runs."""
        self.caption.setText(f"Integrated Gradients with {steps} steps missed completeness by {gap:.1%}; refining "
                             f"with {2 * steps} steps…")

    def refresh(self) -> None:
        trace = self.main.current_trace()
        step = trace.find("tgt_embed.tokens") if trace is not None else None
        if step is not None:
            self.position.blockSignals(True)
            self.position.setRange(0, step.shape[-1] - 1)
            self.position.blockSignals(False)
        if self.main.current_result() is None or self._asked_run is not self.main.current_result():
            self.value, self._key, self.maps = None, None, []
            self.caption.setText("")
            self.show_body(False, ASK)
            return
        super().refresh()

    def draw(self, value) -> None:
        self.value, cross = value
        value = self.value
        self.maps = attribution_maps(value)
        if cross is not None:
            self.maps.append(cross)
        for w, m in zip(self.widgets, self.maps):
            w.set_heatmap(m)
        for w in self.widgets[len(self.maps):]:
            w.setVisible(False)
        for w in self.widgets[: len(self.maps)]:
            w.setVisible(True)
        how = f"; {value.steps_text()}" if value.method == "ig" else ""
        self.caption.setText(f"log P(“{value.token}”) at decoder position {value.position}: the attributions sum to "
                             f"{value.total:+.4f} against f(x) − f(baseline) = {value.delta:+.4f} "
                             f"(completeness within {value.gap:.1%}{how}).")  # fmt: skip

    def csv_text(self) -> str:
        return attribution_csv(self.value) if self.value is not None else ""

    def current_heatmaps(self) -> list:
        return list(self.maps) if self.value is not None else []
