"""Which input tokens the prediction at one decoder position depends on: Integrated Gradients (or gradient ×
input) of the log-probability of the token the model puts there, over the source tokens and the decoder-input
tokens, beside the cross-attention row that produced it. A click on an output row in the Output view opens it.
Numbers: scratchformer.analyses.attribute; maps and CSV: scratchformer.plotdata.analyses."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QSpinBox, QVBoxLayout, QWidget

from scratchformer.plotdata.analyses import attribution_csv, attribution_maps
from scratchformer.plotdata.heatmap import SEQUENTIAL, Heatmap

from ..widgets.heatmap import HeatmapWidget
from .analysis_base import AnalysisView


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
        self.method.addItem("Integrated Gradients", "ig")
        self.method.addItem("Gradient × input", "grad-input")
        self.steps = QSpinBox()
        self.steps.setRange(1, 1024)
        self.steps.setValue(64)
        self.steps.setToolTip("Integrated Gradients' points along the path from the baseline")
        self.baseline = QComboBox()
        self.baseline.addItem("zero baseline", "zero")
        self.baseline.addItem("padding baseline", "pad")
        self.position.setPrefix("position ")
        self.steps.setSuffix(" steps")
        self.baseline.setToolTip("What the path starts from: all-zero embeddings, or the padding token's")
        self.method.setToolTip("Integrated Gradients (complete: the parts add up to f(x) − f(baseline)), or the "
                               "one-step gradient × input")  # fmt: skip
        for widget in (self.position, self.method, self.steps, self.baseline):  # labelled by their own text
            self.bar.addWidget(widget)
        self.position.valueChanged.connect(lambda _v: self.recompute())
        self.method.currentIndexChanged.connect(lambda _i: self.recompute())
        self.steps.editingFinished.connect(self.recompute)
        self.baseline.currentIndexChanged.connect(lambda _i: self.recompute())
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
        self.main.tabs.setCurrentWidget(self)
        self.position.setValue(position)
        self.recompute()

    def show_body(self, shown: bool, text: str = "") -> None:
        super().show_body(shown, text)
        self.body.setVisible(shown)

    def request(self, result):
        return (id(result), self.main.current_batch(), self.position.value(), self.method.currentData(),
                self.steps.value(), self.baseline.currentData())  # fmt: skip

    def compute(self, result, key: tuple):
        from scratchformer.analyses import attribute

        _, batch, position, method, steps, baseline = key
        return attribute.compute(result.bundle, result.inputs, result.trace, position, method, steps, baseline, batch)

    def refresh(self) -> None:
        trace = self.main.current_trace()
        step = trace.find("tgt_embed.tokens") if trace is not None else None
        if step is not None:
            self.position.blockSignals(True)
            self.position.setRange(0, step.shape[-1] - 1)
            self.position.blockSignals(False)
        super().refresh()

    def draw(self, value) -> None:
        self.maps = attribution_maps(value)
        cross = self._cross_row(value)
        if cross is not None:
            self.maps.append(cross)
        for w, m in zip(self.widgets, self.maps):
            w.set_heatmap(m)
        for w in self.widgets[len(self.maps):]:
            w.setVisible(False)
        for w in self.widgets[: len(self.maps)]:
            w.setVisible(True)
        gap = abs(value.total - value.delta) / max(abs(value.delta), 1e-12)
        self.caption.setText(f"log P(“{value.token}”) at decoder position {value.position}: the attributions sum to "
                             f"{value.total:+.4f} against f(x) − f(baseline) = {value.delta:+.4f} "
                             f"(completeness within {gap:.1%}).")  # fmt: skip

    def _cross_row(self, value) -> Heatmap | None:
        """The last cross-attention's row at this position, heads averaged: what raw attention says beside it."""
        trace = self.main.current_trace()
        steps = [s for s in trace.attention_steps() if s.attention_type == "decoder.cross_attn"]
        if not steps:
            return None
        row = steps[-1].item(self.main.current_batch()).double().mean(0)[value.position]  # (S,)
        return Heatmap(row.float().numpy()[None], ["attention"], list(value.source_tokens), "", "src_pos", (0.0, 1.0),
                       SEQUENTIAL, f"Cross-attention of {steps[-1].sublayer} at position {value.position} "
                       "(heads averaged)", steps[-1].name)  # fmt: skip

    def csv_text(self) -> str:
        return attribution_csv(self.value) if self.value is not None else ""

    def current_heatmaps(self) -> list:
        return list(self.maps) if self.value is not None else []
