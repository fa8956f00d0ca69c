"""How Run continues a decoder-only model's text: new tokens, greedy or sampled, temperature, top-k, seed.

Shown in the input bar in place of the target field when the model is decoder-only (GPT-2 and the like); it only
holds the settings (scratchformer.running.generation.Continuation) that the next run reads.
"""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from scratchformer.running.generation import DEFAULT_NEW_TOKENS, Continuation

GREEDY, SAMPLE = "greedy", "sample"


class ContinuationControls(QWidget):
    """`continuation()` → the settings of the next run, or None when 0 new tokens are asked for."""

    def __init__(self) -> None:
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        self.new_tokens = QSpinBox()
        self.new_tokens.setRange(0, 4096)
        self.new_tokens.setValue(DEFAULT_NEW_TOKENS)
        self.new_tokens.setSpecialValueText("none")
        self.new_tokens.setToolTip("How many tokens Run adds after your text (none: the model reads your text only). "
                                   "A longer continuation is cut to the positions the model has left.")
        self.method = QComboBox()
        self.method.addItem("greedy", GREEDY)
        self.method.addItem("sample", SAMPLE)
        self.method.setToolTip("greedy: always the most likely next token; sample: draw it from the probabilities "
                               "(tempered, from the top-k), with a seed so the same run gives the same text")
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.05, 10.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setValue(1.0)
        self.temperature.setToolTip("Sampling divides the logits by T: below 1 sharper, above 1 flatter")
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 99_999)
        self.top_k.setValue(50)
        self.top_k.setSpecialValueText("all")
        self.top_k.setToolTip("Sample only from the k most likely tokens (all: the whole vocabulary)")
        self.seed = QSpinBox()
        self.seed.setRange(0, 99_999)
        self.seed.setToolTip("The sampling's seed: the same seed gives the same continuation")
        self.method.currentIndexChanged.connect(lambda _i: self._enable())
        self.new_tokens.valueChanged.connect(lambda _v: self._enable())
        self._labels: dict[QWidget, QLabel] = {}
        for text, widget in (("new", self.new_tokens), (None, self.method), ("T", self.temperature),
                             ("top-k", self.top_k), ("seed", self.seed)):  # fmt: skip
            if text:
                self._labels[widget] = QLabel(text)
                row.addWidget(self._labels[widget])
            row.addWidget(widget)
        row.addStretch(1)
        self._enable()

    def _enable(self) -> None:
        """Only what applies is shown (the input bar must fit a 1024-pixel window): the method once tokens are
        asked for, temperature, top-k and seed when sampling."""
        sampled = self.method.currentData() == SAMPLE and self.new_tokens.value() > 0
        self.method.setVisible(self.new_tokens.value() > 0)
        for widget in (self.temperature, self.top_k, self.seed):
            widget.setVisible(sampled)
            self._labels[widget].setVisible(sampled)

    def continuation(self) -> Continuation | None:
        if self.new_tokens.value() == 0:
            return None
        return Continuation(max_new=self.new_tokens.value(), sample=self.method.currentData() == SAMPLE,
                            temperature=self.temperature.value(), top_k=self.top_k.value() or None,
                            seed=self.seed.value())  # fmt: skip

    def set_continuation(self, how: Continuation | None) -> None:
        """Show these settings (None: no continuation)."""
        if how is None:
            self.new_tokens.setValue(0)
            return
        self.new_tokens.setValue(how.max_new)
        self.method.setCurrentIndex(self.method.findData(SAMPLE if how.sample else GREEDY))
        self.temperature.setValue(how.temperature)
        self.top_k.setValue(how.top_k or 0)
        self.seed.setValue(how.seed)
