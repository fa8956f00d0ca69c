"""The strip under the inputs that says, after a run, what the decoder reads — in large type when it is the model's
own translation — whether the model is untrained, and offers the model's example when it knows few of the words.
When the weights or the steps hold NaN or ±∞ it says which, in one sentence, with a button to that first step."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from scratchformer.running.examples import Example

UNTRAINED = "Untrained: random weights, attention carries no meaning yet."
SHOWN_DEPARTURES = 5  # the banner names this many departures from the paper; the tooltip has them all


def decoder_caption(mode: str, n_target: int, windows: tuple[int, int] | None = None, how: str = "") -> str:
    """One sentence on what the decoder steps read in this run (`how`: how a continuation was chosen)."""
    if mode == "continued":
        return (f"The model's continuation of your text ({how or 'greedy'}). The decoder steps below read your text "
                f"and this continuation behind the start token: {n_target} rows, row t predicts token t+1.")
    if mode == "generated":
        return (f"The model's own translation (greedy decoding). The decoder steps below read it behind the start "
                f"token: {n_target} rows, row t predicts token t+1.")
    if mode == "typed":
        return (f"Teacher forcing: the decoder reads your target behind the start token ({n_target} rows); "
                "row t predicts token t+1.")
    if mode == "prompt":
        return (f"A decoder-only model: the decoder reads your text behind the start token ({n_target} rows); "
                "row t predicts token t+1.")
    if mode == "start_only":
        return "The decoder reads the start token alone: one row, which predicts the first token."
    if mode == "windows" and windows is not None:
        s, b = windows
        return f"The walkthrough's batch: {b} windows of {s} tokens; the decoder reads each one shifted right."
    return ""


class RunBanner(QWidget):
    """Hidden until a run; `example_chosen(Example)` when the user takes the offered example."""

    example_chosen = Signal(object)
    nonfinite_step_requested = Signal(str)  # the name of the first step whose values are not finite

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("runBanner")
        outer = QHBoxLayout(self)
        outer.setContentsMargins(10, 2, 10, 4)
        outer.setSpacing(12)
        text_box = QVBoxLayout()
        text_box.setSpacing(0)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.caption.setStyleSheet("color: #555;")
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.translation = QLabel()
        self.translation.setTextFormat(Qt.TextFormat.PlainText)
        self.translation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.translation.font()
        font.setPointSizeF(max(15.0, font.pointSizeF() * 1.7))
        font.setBold(True)
        self.translation.setFont(font)
        self.translation.setStyleSheet("color: #14457a;")
        self.translation.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.departures = QLabel()
        self.departures.setWordWrap(True)
        self.departures.setStyleSheet("color: #7a4b00;")
        self.departures.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        text_box.addWidget(self.translation)
        text_box.addWidget(self.caption)
        text_box.addWidget(self.departures)
        self.nonfinite_row = QWidget()  # NaN or ±∞ in the weights or the steps: which, and a way to the first step
        row = QHBoxLayout(self.nonfinite_row)
        row.setContentsMargins(0, 2, 0, 0)
        self.nonfinite = QLabel()
        self.nonfinite.setWordWrap(True)
        self.nonfinite.setTextFormat(Qt.TextFormat.PlainText)
        self.nonfinite.setStyleSheet("color: #8a1c12; font-weight: bold;")
        self.nonfinite.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row.addWidget(self.nonfinite, 1)
        self.nonfinite_button = QPushButton("Go to first non-finite step")
        self.nonfinite_button.clicked.connect(self._go_to_nonfinite)
        row.addWidget(self.nonfinite_button)
        self._nonfinite_step: str | None = None
        self.nonfinite_row.setVisible(False)
        text_box.addWidget(self.nonfinite_row)
        outer.addLayout(text_box, 1)
        self.untrained = QLabel(UNTRAINED)
        self.untrained.setStyleSheet(
            "background: #fdecea; color: #8a1c12; border: 1px solid #f1b0a8; border-radius: 3px; padding: 3px 6px;"
        )
        outer.addWidget(self.untrained)
        self.offer = QPushButton()
        self.offer.setToolTip("Replace the source with this model's example and run it (Ctrl+Z in the source "
                              "field brings your text back; it is also under Examples › Your recent inputs)")
        self.offer.clicked.connect(self._take_offer)
        outer.addWidget(self.offer)
        self._offered: Example | None = None
        self.setVisible(False)

    def show_run(self, mode: str, translation: str, n_target: int, untrained: bool,
                 windows: tuple[int, int] | None = None, departures: list[str] | None = None, how: str = "") -> None:
        """`departures`: how the model differs from the 2017 paper (scratchformer.transformer.departures); none, no
        line.
        `how`: for a decoder-only model's continuation, how its tokens were chosen (greedy, or sampled …)."""
        shown = list(departures or [])
        if len(shown) > SHOWN_DEPARTURES:  # T5 has a dozen: the rest are in the tooltip
            shown = shown[:SHOWN_DEPARTURES] + [f"and {len(departures) - SHOWN_DEPARTURES} more (hover to read them)"]
        self.departures.setText("Departures from the 2017 paper: " + "; ".join(shown) if departures else "")
        self.departures.setToolTip("\n".join(f"• {d}" for d in departures or []))
        self.departures.setVisible(bool(departures))
        big = {"generated": translation, "continued": "… " + translation.strip()}.get(mode, "")
        self.translation.setText(big)
        self.translation.setVisible(bool(big))
        self.caption.setText(decoder_caption(mode, n_target, windows, how))
        self.caption.setVisible(bool(self.caption.text()))
        self.untrained.setVisible(untrained)
        self.setVisible(bool(big or self.caption.text() or untrained or self._offered or departures))

    def show_nonfinite(self, sentence: str, step: str | None = None, where: str = "") -> None:
        """Say what holds NaN or ±∞ (`sentence`, scratchformer.recording.nonfinite.NonFinite.sentence()) and offer to go
        to the first step whose values are not finite (`step`, its name; `where`, its breadcrumb). "" hides the line."""
        self._nonfinite_step = step
        self.nonfinite.setText(f"⚠ {sentence}" if sentence else "")
        self.nonfinite.setToolTip(
            "A checkpoint whose weights hold NaN or ±∞ still opens, so you can see where its numbers break. "
            "Heatmaps draw NaN in magenta, +∞ in orange and −∞ that no mask explains in cyan (a mask's −∞ is grey).")
        self.nonfinite_button.setVisible(step is not None)
        self.nonfinite_button.setToolTip(f"Show step {where or step}" if step else "")
        self.nonfinite_row.setVisible(bool(sentence))
        if sentence:
            self.setVisible(True)

    def _go_to_nonfinite(self) -> None:
        if self._nonfinite_step is not None:
            self.nonfinite_step_requested.emit(self._nonfinite_step)

    def offer_example(self, example: Example | None, model: str = "", known: int = 0, words: int = 0) -> None:
        """Offer `example` because the model knows only `known` of the text's `words` words (None: no offer)."""
        self._offered = example
        if example is not None:
            self.offer.setText(f"{model} knows {known} of these {words} words — try its example: "
                               f"“{example.menu_text(40)}”")
            self.setVisible(True)
        self.offer.setVisible(example is not None)

    def _take_offer(self) -> None:
        example, self._offered = self._offered, None
        self.offer.setVisible(False)
        if example is not None:
            self.example_chosen.emit(example)

    def translation_text(self) -> str:
        return self.translation.text()
