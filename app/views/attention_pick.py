"""What the Q·K neuron view and the weighted sum share: a bar to pick an attention sublayer, a head, a query
position (and, for the neuron view, a key position), and the off-UI-thread recompute of that sublayer's steps
when a lazy trace did not keep them.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from scratchformer.plotdata.neuron import AttentionPick, attention_sublayers

from ..work.warmup import step_work

STEPS = ("q", "k", "v", "scores", "scaled_scores", "position_bias", "mask", "masked_scores", "weights", "context")


def sublayer_title(name: str) -> str:
    """'decoder.1.cross_attn' → 'decoder layer 2 · cross-attention'."""
    stack, layer, kind = (name.split(".") + ["", ""])[:3]
    what = {"self_attn": "masked self-attention" if stack == "decoder" else "self-attention",
            "cross_attn": "cross-attention"}.get(kind, kind)  # fmt: skip
    return f"{stack} layer {int(layer) + 1} · {what}" if layer.isdigit() else name


class PickBar(QWidget):
    """Attention sublayer, head, query (and key) choosers; `changed` when the user picks another."""

    changed = Signal()

    def __init__(self, with_key: bool) -> None:
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.sublayer = QComboBox()
        self.sublayer.setToolTip("Which attention sublayer")
        self.head = QSpinBox()
        self.head.setToolTip("Which head (1 = the first)")
        self.query = QComboBox()
        self.query.setToolTip("The query position: the token whose row of attention is shown")
        self.key = QComboBox() if with_key else None
        widgets = [("Attention", self.sublayer), ("Head", self.head), ("Query", self.query)]
        if self.key is not None:
            self.key.setToolTip("The key position the query is compared with")
            widgets.append(("Key", self.key))
        for label, widget in widgets:
            if isinstance(widget, QComboBox):  # long token or sublayer names must not widen the window
                widget.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
                widget.setMinimumContentsLength(10 if widget is self.sublayer else 4)
            row.addWidget(QLabel(label))
            row.addWidget(widget, 2 if widget is self.sublayer else 1)
        self._filling = False
        self._trace = None
        self._batch = 0
        self.sublayer.currentIndexChanged.connect(lambda _i: self._sublayer_changed())
        for box in (self.query, self.key):
            if box is not None:
                box.currentIndexChanged.connect(lambda _i: self._emit())
        self.head.valueChanged.connect(lambda _v: self._emit())

    def _emit(self) -> None:
        if not self._filling:
            self.changed.emit()

    def fill(self, trace, batch: int, pick: AttentionPick | None, key: int | None) -> None:
        """The choices of this run, selecting `pick` (kept within range) or the first attention."""
        self._filling = True
        try:
            self._trace, self._batch = trace, batch
            names = attention_sublayers(trace)
            if [self.sublayer.itemData(i) for i in range(self.sublayer.count())] != names:
                self.sublayer.clear()
                for n in names:
                    self.sublayer.addItem(sublayer_title(n), n)
            if pick is not None and pick.sublayer in names:
                self.sublayer.setCurrentIndex(names.index(pick.sublayer))
            self._fill_positions(pick, key)
        finally:
            self._filling = False

    def _fill_positions(self, pick: AttentionPick | None, key: int | None) -> None:
        name = self.sublayer.currentData()
        if name is None or self._trace is None:
            return
        weights = self._trace[f"{name}.weights"]
        _, heads, queries, keys = weights.shape
        self.head.setRange(1, heads)
        if pick is not None:
            self.head.setValue(min(pick.head, heads - 1) + 1)
        boxes = [(self.query, weights.dims[2], queries, pick.query if pick is not None else None)]
        if self.key is not None:
            boxes.append((self.key, weights.dims[3], keys, key))
        for box, dim, n, chosen in boxes:
            labels = self._trace.labels(dim, self._batch) or []
            items = [f"{p} · {labels[p] if p < len(labels) else dim}" for p in range(n)]
            if [box.itemText(i) for i in range(box.count())] != items:
                before = box.currentIndex()
                box.clear()
                box.addItems(items)
                box.setCurrentIndex(min(max(before, 0), n - 1))
            if chosen is not None:
                box.setCurrentIndex(min(chosen, n - 1))

    def _sublayer_changed(self) -> None:
        if self._filling:
            return
        self._filling = True
        try:
            self._fill_positions(self.pick(), self.key.currentIndex() if self.key is not None else None)
        finally:
            self._filling = False
        self.changed.emit()

    def pick(self) -> AttentionPick | None:
        name = self.sublayer.currentData()
        if name is None:
            return None
        return AttentionPick(name, self._batch, self.head.value() - 1, max(self.query.currentIndex(), 0))

    def chosen_key(self) -> int:
        return max(self.key.currentIndex(), 0) if self.key is not None else 0


def default_pick(window, trace) -> AttentionPick | None:
    """The current step's attention sublayer (or the model's first), the current head, the last query."""
    step = window.current_step()
    names = attention_sublayers(trace)
    if not names:
        return None
    name = step.sublayer if step is not None and step.attention_type and step.sublayer in names else names[0]
    batches, heads, queries, _ = trace[f"{name}.weights"].shape
    return AttentionPick(name, min(window.current_batch(), batches - 1), min(window.current_head(), heads - 1),
                         queries - 1)


def batch_of(window, trace, sublayer: str) -> int:
    """The window's batch item, within this sublayer's batch."""
    return min(max(window.current_batch(), 0), trace[f"{sublayer}.weights"].shape[0] - 1)


def preparation(trace, pick: AttentionPick | None, batch: int) -> list:
    """What the window recomputes off the UI thread before the view draws: the picked sublayer's steps."""
    return step_work(pick_steps(trace, pick.sublayer), batch) if pick is not None else []


def pick_steps(trace, sublayer: str) -> list:
    """The trace steps of one attention sublayer that the two pictures read."""
    return [s for s in (trace.find(f"{sublayer}.{part}") for part in STEPS) if s is not None]
