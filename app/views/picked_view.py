"""What the Q·K neuron view and the weighted sum share: a bar to pick an attention sublayer, a head, a query (and a
key), a placeholder, a summary line in this pick's numbers, and a body. The numbers are made off the UI thread for
the latest pick (warmup.ReadyFirst), after the sublayer's steps are recomputed if a lazy trace did not keep them.

A subclass gives `make(trace, pick, key)` (off the UI thread; raises UserError for a pick outside the run),
`draw(value) → maps` and `text(value)` (the summary, also the explanation panel's numbers)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout

from scratchformer.errors import UserError
from scratchformer.plotdata.neuron import AttentionPick

from ..work.warmup import ReadyFirst
from .attention_pick import PickBar, batch_of, default_pick, pick_steps, preparation, sublayer_title
from .base import View, placeholder


class PickedView(View):
    with_key = False  # the neuron view picks a key too
    empty_text = ""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.layout_ = QVBoxLayout(self)
        self.layout_.setContentsMargins(6, 6, 6, 6)
        self.bar = PickBar(with_key=self.with_key)
        self.bar.changed.connect(self._picked)
        self.layout_.addWidget(self.bar)
        self.empty = placeholder(self.empty_text)
        self.layout_.addWidget(self.empty)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.layout_.addWidget(self.summary)
        self.value = None  # what `make` gave for the pick shown
        self._maps: list = []
        self._pick: AttentionPick | None = None  # what the user asked for (the bar, or show_pick)
        self._key: int | None = None  # None: the key the query attends to most
        self._run = None  # the run the pick belongs to
        self._ready = ReadyFirst()

    # --- what subclasses give -----------------------------------------------------------------------------------
    def make(self, trace, pick: AttentionPick, key: int | None):
        raise NotImplementedError

    def draw(self, value) -> list:
        raise NotImplementedError

    def text(self, value) -> str:
        raise NotImplementedError

    def headline(self, value) -> str:
        raise NotImplementedError

    def body_widgets(self) -> list:
        """The widgets shown only with a value."""
        return []

    # --- choosing -----------------------------------------------------------------------------------------------
    def show_pick(self, sublayer: str, head: int, query: int, key: int | None = None) -> None:
        self._pick = AttentionPick(sublayer, self.main.current_batch(), head, query)
        self._key, self._run = key, self.main.current_result()
        self.refresh()

    def _picked(self) -> None:
        self._pick = self.bar.pick()
        self._key = self.bar.chosen_key() if self.with_key else None
        self.refresh()

    # --- drawing ------------------------------------------------------------------------------------------------
    def preparation(self, trace, batch: int) -> list:
        return preparation(trace, self._pick or default_pick(self.main, trace), batch)

    def refresh(self) -> None:
        result, trace = self.main.current_result(), self.main.current_trace()
        if trace is not None and (result is not self._run or self._pick is None):  # another run: the current step
            self._pick, self._key, self._run = default_pick(self.main, trace), None, result
        if trace is None or self._pick is None:
            self._show(None)
            return
        self._pick.batch = batch_of(self.main, trace, self._pick.sublayer)
        pick, key = self._pick, self._key

        def work():
            try:
                return self.make(trace, pick, key)
            except UserError as exc:  # a pick outside the run: one sentence
                return exc

        self._ready.run(pick_steps(trace, pick.sublayer), pick.batch, work,
                        lambda error, found: self._made(trace, pick, error, found))  # fmt: skip

    def _made(self, trace, pick: AttentionPick, error: str, found) -> None:
        if error or isinstance(found, UserError):
            self.main.show_error(error or str(found))
            if found is not None:
                self._pick = None
            return
        if trace is not self.main.current_trace() or pick is not self._pick or found is None:
            return  # another run or pick came meanwhile
        self._key = getattr(found, "key", None)
        self.bar.fill(trace, pick.batch, pick, self._key)
        self._show(found)

    def _show(self, value) -> None:
        self.value = value
        self.empty.setVisible(value is None)
        for w in (self.bar, self.summary, *self.body_widgets()):
            w.setVisible(value is not None)
        if value is None:
            self._maps = []
            return
        self._maps = self.draw(value)
        lines = "<br>".join(html.escape(line) for line in self.text(value).splitlines())
        self.summary.setText(f"<b>{html.escape(self.headline(value))}</b><br>{lines}")
        self.main.refresh_explanation()

    def where(self, pick: AttentionPick) -> str:
        return f"{sublayer_title(pick.sublayer)}, head {pick.head + 1}"

    def is_busy(self) -> bool:
        return self._ready.busy()

    def shutdown(self) -> None:
        self._ready.shutdown()

    def explain_facts(self) -> dict:
        return {self.explains: self.text(self.value)} if self.value is not None else {}

    def current_heatmaps(self) -> list:
        return list(self._maps)
