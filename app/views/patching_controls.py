"""The Patching view's form: the corrupted input (one word of the source changed, or a typed sentence), the metric
(logit difference of two tokens, or the log-probability of one), per-position heads, the method (exact,
attribution patching, or both side by side) and an optional path (sender head → receiver head's q, k or v, or the
logits). `ask()` reads it into a SweepAsk, plain values that the sweep's job reads off the UI thread."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import QCheckBox, QComboBox, QGridLayout, QHBoxLayout, QLabel, QLineEdit, QWidget

from scratchformer.errors import UserError

CHANGE_WORD, TYPED = "word", "typed"
METHODS = (("exact patching", "exact"), ("attribution patching", "attribution"), ("both, side by side", "both"))


@dataclass(frozen=True)
class SweepAsk:
    """What to sweep: the clean run's text and decoder-input rule, the corrupted text's recipe, the metric, the
    grid and the method, and the path (None: none)."""

    source: str
    target: str
    start_only: bool
    corrupt_source: str | None  # a typed corrupted sentence, or
    corrupt_word: str | None  # "I=WORD": word I of the source replaced
    answer: str | None
    wrong: str | None
    metric: str  # "logit-diff" or "logprob"
    per_position: bool
    method: str  # "exact", "attribution", "both"
    path: tuple[str, str] | None  # (sender head, receiver input or "logits")
    path_part: str = "q"  # the receivers' input that the sender's path map reads (q, k or v)


def head_names(model) -> list[tuple[str, str]]:
    """(label, name) of every head in the order they run: ('decoder layer 2 cross-attention head 1',
    'decoder.1.cross_attn.head0'); names count from 0 as the command line's do, labels from 1 as the window's."""
    from scratchformer.patching.components import attention_modules
    from scratchformer.patching.interventions import head_name

    out = []
    for name, module in attention_modules(model).items():
        stack, layer, kind = name.split(".")
        what = "cross-attention" if kind == "cross_attn" else "self-attention"
        out += [(f"{stack} layer {int(layer) + 1} {what} head {h + 1}", head_name(f"{stack}.{kind}", int(layer), h))
                for h in range(module.n_heads)]  # fmt: skip
    return out


def _combo(items, tip: str, width: int = 8) -> QComboBox:
    box = QComboBox()
    for text, data in items:
        box.addItem(text, data)
    box.setToolTip(tip)
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(width)
    return box


def _edit(placeholder: str, tip: str) -> QLineEdit:
    edit = QLineEdit()
    edit.setPlaceholderText(placeholder)
    edit.setToolTip(tip)
    return edit


class PatchingControls(QWidget):
    """Three rows: the corrupted input; the metric, grid and method; the path. (No attribute may take the name of
    a QWidget virtual: one called `metric` hid QPaintDevice.metric, and Qt crashed asking the form's DPI.)"""

    def __init__(self) -> None:
        super().__init__()
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(3)
        self.labels: list[QLabel] = []
        # the corrupted input
        self.how = _combo([("change one word", CHANGE_WORD), ("type a sentence", TYPED)],
                          "Make the corrupted input by changing one word of the source, or type it whole "
                          "(it must read as the same number of tokens)", 13)  # fmt: skip
        self.word = _combo([], "The source word to change", 8)
        self.replacement = _edit("replacement word", "The word that takes its place (e.g. girl → boy)")
        self.sentence = _edit("the corrupted sentence, as many tokens as the source",
                              "The corrupted input, typed whole; it must read as the same number of tokens")
        self.how.currentIndexChanged.connect(lambda _i: self._show_how())
        self._row(grid, 0, "Corrupt:", (self.how, self.word, "→", self.replacement, self.sentence), (3, 4))
        # the metric, the grid and the method
        self.metric_kind = _combo([("logit difference", "logit-diff"), ("log-probability", "logprob")],
                                  "m at the last decoder position: logit[answer] − logit[wrong], or log P(answer)",
                                  10)  # fmt: skip
        self.answer = _edit("clean run's top token", "The clean answer: one token (GPT-2's often start with a "
                            "space, ' Mary'), or id:N; empty: the clean run's top token")  # fmt: skip
        self.wrong = _edit("corrupted run's top token", "The token it is compared with; empty: the corrupted run's "
                           "top token")  # fmt: skip
        self.metric_kind.currentIndexChanged.connect(
            lambda _i: self.wrong.setEnabled(self.metric_kind.currentData() == "logit-diff"))
        self.per_position = QCheckBox("per position")
        self.per_position.setToolTip("Patch each head at each position alone (rows: layer·head, columns: positions)")
        self.method = _combo(METHODS, "Exact activation patching (batched), attribution patching (one backward pass: "
                             "an estimate), or both, with the cells where they disagree outlined", 10)  # fmt: skip
        self._row(grid, 1, "Metric:", (self.metric_kind, self.answer, "vs", self.wrong, self.per_position,
                                       self.method), (1, 3))  # fmt: skip
        # the path
        self.path_sender = _combo([("no path patching", None)], "Path patching: the sender head", 12)
        self.path_receiver = _combo([("logits", "logits")], "The receiver: a later head's q, k or v input, or the "
                                    "logits", 12)  # fmt: skip
        self.path_part = _combo([("q", "q"), ("k", "k"), ("v", "v")], "Which input of the receiver head reads the "
                                "sender (and of every head, in the path map)", 2)  # fmt: skip
        self.path_receiver.currentIndexChanged.connect(lambda _i: self._show_path())
        self.path_sender.currentIndexChanged.connect(lambda _i: self._show_path())
        self._row(grid, 2, "Path:", (self.path_sender, "→", self.path_receiver, self.path_part), (0, 2))
        grid.setColumnStretch(1, 1)
        self._filled_for = None
        self._show_how()
        self._show_path()

    def _row(self, grid: QGridLayout, at: int, title: str, widgets: tuple, stretch: tuple) -> QHBoxLayout:
        """One row of the form: its title, then the widgets (a text becomes a label, made with the form as its
        parent)."""
        labels = [QLabel(text, self) for text in (title, *(w for w in widgets if isinstance(w, str)))]
        self.labels += labels
        grid.addWidget(labels[0], at, 0)
        row = QHBoxLayout()
        grid.addLayout(row, at, 1)
        texts = iter(labels[1:])
        for w in widgets:
            row.addWidget(next(texts) if isinstance(w, str) else w)
        for i in stretch:
            row.setStretch(i, 1)
        return row

    def _show_how(self) -> None:
        typed = self.how.currentData() == TYPED
        self.sentence.setVisible(typed)
        for w in (self.word, self.replacement):
            w.setVisible(not typed)

    def _show_path(self) -> None:
        on = self.path_sender.currentData() is not None
        self.path_receiver.setEnabled(on)
        self.path_part.setEnabled(on)  # the receiver's input, and the one the sender's map into every head reads

    def fill(self, model, source: str) -> None:
        """The source's words and the model's heads (kept when they are the same as before)."""
        words = source.split()
        key = (id(model), tuple(words))
        if key == self._filled_for:
            return
        self._filled_for = key
        kept = self.word.currentIndex()
        self.word.clear()
        for i, word in enumerate(words):
            self.word.addItem(f"{i + 1}: {word}", i)
        self.word.setCurrentIndex(min(max(kept, 1 if len(words) > 1 else 0), len(words) - 1))
        heads = head_names(model)
        for box, first in ((self.path_sender, ("no path patching", None)), (self.path_receiver, ("logits", "logits"))):
            was = box.currentData()
            box.clear()
            box.addItem(*first)
            for label, name in heads:
                box.addItem(label, name)
            box.setCurrentIndex(max(0, box.findData(was)))
        self._show_path()

    def ask(self, source: str, target: str, start_only: bool) -> SweepAsk:
        """The form as a SweepAsk for this clean input; one UserError sentence when it is not filled in."""
        corrupt_source = corrupt_word = None
        if self.how.currentData() == TYPED:
            corrupt_source = self.sentence.text().strip()
            if not corrupt_source:
                raise UserError("Type the corrupted sentence first (as many tokens as the source).")
        else:
            word = self.replacement.text().strip()
            if self.word.count() == 0 or not word:
                raise UserError("Pick a word of the source and type the word that replaces it.")
            corrupt_word = f"{self.word.currentData()}={word}"
        metric = self.metric_kind.currentData()
        path = None
        if self.path_sender.currentData() is not None:
            receiver = self.path_receiver.currentData()
            if receiver != "logits":
                receiver = f"{receiver}.{self.path_part.currentData()}"
            path = (self.path_sender.currentData(), receiver)
        return SweepAsk(source, target, start_only, corrupt_source, corrupt_word, _token(self.answer),
                        _token(self.wrong) if metric == "logit-diff" else None, metric,
                        self.per_position.isChecked(), self.method.currentData(), path,
                        self.path_part.currentData())  # fmt: skip

    def pairs_ask(self, start_only: bool) -> SweepAsk:
        """The form's metric, grid, method and answer tokens for a pairs file's sweep (each pair brings its own
        sentences and corruption; a pair's own answer and wrong tokens win; no path)."""
        metric = self.metric_kind.currentData()
        return SweepAsk("", "", start_only, None, None, _token(self.answer),
                        _token(self.wrong) if metric == "logit-diff" else None, metric,
                        self.per_position.isChecked(), self.method.currentData(), None)  # fmt: skip

    def set_word(self, index: int, replacement: str) -> None:
        """Change word `index` (from 0) of the source for `replacement` (tests, lessons)."""
        self.how.setCurrentIndex(self.how.findData(CHANGE_WORD))
        self.word.setCurrentIndex(self.word.findData(index))
        self.replacement.setText(replacement)

    def set_sentence(self, text: str) -> None:
        self.how.setCurrentIndex(self.how.findData(TYPED))
        self.sentence.setText(text)


def _token(field) -> str | None:
    """A metric token as typed, its leading space kept (GPT-2's ' Mary' is another token than 'Mary'); None when
    the field is blank."""
    text = field.text()
    return text if text.strip() else None
