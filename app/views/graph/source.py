"""The Graph view's part that says which graph: the transcoders it is read through (the bundled set, the attached
dictionaries, sets picked with Transcoders…), the decoder position explained, and why a run has no graph. A mixin of
GraphView (app/views/graph/view.py): its methods read the view's combos, `picked` and `main`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from scratchformer.plotdata import abbreviate

from .work import Choice


def ask_folder(parent) -> str | None:
    """A transcoder set's folder (replaceable in tests)."""
    return QFileDialog.getExistingDirectory(parent, "A transcoder set: one folder per feed-forward") or None


class GraphSource:
    """Which graph the view builds: the transcoder choices and the positions of the run shown."""

    def choices(self, result) -> list[Choice]:
        """The transcoders this run can be read through: the bundled set, the attached dictionaries, picked sets."""
        from scratchformer.features.bundled import bundled_transcoders

        out = []
        if bundled_transcoders(result.bundle.name) is not None:
            out.append(Choice("bundled"))
        if self.main.dictionaries:
            out.append(Choice("attached", tuple(self.main.dictionaries)))
        out += [Choice("folder", (f,)) for f in self.picked]
        return out

    def _fill_choices(self, result) -> Choice | None:
        choices = self.choices(result)
        current = self.choice_combo.currentData()
        if [self.choice_combo.itemData(i) for i in range(self.choice_combo.count())] != choices:
            self.choice_combo.blockSignals(True)
            self.choice_combo.clear()
            for c in choices:
                self.choice_combo.addItem(c.label(), c)
                self.choice_combo.setItemData(self.choice_combo.count() - 1, " + ".join(c.folders) or c.label(),
                                              Qt.ItemDataRole.ToolTipRole)  # fmt: skip
            self.choice_combo.setCurrentIndex(max(0, choices.index(current)) if current in choices else 0)
            self.choice_combo.blockSignals(False)
        return self.choice_combo.currentData()

    def _fill_positions(self, result) -> None:
        if self._run_id == id(result):
            return
        from scratchformer.graph.build import default_position

        self._run_id = id(result)
        self._most_likely()  # another run: its most likely token first
        tokens = list(result.inputs.target_tokens[0]) if result.inputs.target_tokens else []
        self.position_combo.blockSignals(True)
        self.position_combo.clear()
        for p, token in enumerate(tokens):
            self.position_combo.addItem(f"{p} “{abbreviate(token, 10)}”", p)
            self.position_combo.setItemData(p, f"The prediction made at decoder position {p}, which reads {token!r}",
                                            Qt.ItemDataRole.ToolTipRole)  # fmt: skip
        if tokens and result.bundle.config.has_decoder:
            self.position_combo.setCurrentIndex(min(default_position(result.bundle, result.inputs), len(tokens) - 1))
        self.position_combo.blockSignals(False)

    def _position_picked(self, _index: int) -> None:
        self._most_likely()  # another position: other tokens are likely there
        self.refresh()

    def _token_picked(self, _index: int) -> None:
        explained = self.token_combo.currentData()
        if explained is None and self.built is not None and self.built.result.likely:
            explained = self.built.result.likely[0][0]  # the most likely token
        if self.versus_combo.currentData() == explained:
            self.versus_combo.setCurrentIndex(0)  # a difference needs two tokens
        self.refresh()

    def _most_likely(self) -> None:
        """The token boxes back to their first entries: the most likely token, against none (the others come with
        the next graph)."""
        _refill(self.token_combo, [(None, "most likely token", "")], None)
        _refill(self.versus_combo, [(None, "—", "")], None)

    def _fill_tokens(self, built) -> None:
        """The token boxes after a build: the most likely token first (its logit is explained by default), then the
        next most likely at that position, each with its probability; "versus" offers the others than the one
        explained."""
        likely = built.result.likely
        if not likely:
            return

        def entry(data, what: str, tid: int, token: str, p: float) -> tuple:
            return data, f"“{abbreviate(token, 10)}” {p:.2g}", f"{what} {token!r} (id {tid}), probability {p:.3g} here"

        top = likely[0]
        _refill(self.token_combo, [entry(None, "Explain the logit of the most likely token,", *top)] +
                [entry(row[0], "Explain the logit of", *row) for row in likely[1:]], built.ask.token)  # fmt: skip
        explained = top[0] if built.ask.token is None else built.ask.token
        _refill(self.versus_combo, [(None, "—", "The logit alone, against no other token")] +
                [entry(row[0], "Explain the logit difference against", *row) for row in likely if row[0] != explained],
                built.ask.versus)  # fmt: skip

    def _problem(self, result) -> str | None:
        """Why this run has no graph to build, in one sentence (read on the UI thread: no file is opened)."""
        request, inputs = result.request, result.inputs
        batched = any(ids is not None and ids.shape[0] != 1 for ids in (inputs.src, inputs.tgt))
        if request.windows is not None or request.padded or batched:
            return ("A graph explains one prediction of one sentence: run one sentence, not a batch of windows or a "
                    "padded batch.")  # fmt: skip
        if not result.bundle.config.has_decoder or result.inputs.tgt is None:
            return f"{result.bundle.name} has no decoder and so predicts no token: a graph explains a predicted token."
        if self.choice_combo.currentData() is None:
            return (f"{result.bundle.name} ships no transcoder set: pick one with Transcoders… (a folder with one "
                    "transcoder per feed-forward, as `scratchformer features train --kind transcoder --every-layer` "
                    "writes it), or attach its transcoders (Run › Attach dictionary…).")  # fmt: skip
        return None

    def _pick_dialog(self) -> None:
        folder = ask_folder(self)
        if folder:
            self.use_transcoders(folder)

    def use_transcoders(self, folder: str) -> None:
        """Read the graph through the transcoder set in `folder` (checked when the graph is built)."""
        folder = str(folder)
        self.picked = [folder] + [f for f in self.picked if f != folder]
        result = self.main.current_result()
        if result is None:
            return
        self._fill_choices(result)
        wanted = Choice("folder", (folder,))
        items = [self.choice_combo.itemData(i) for i in range(self.choice_combo.count())]
        self.choice_combo.setCurrentIndex(items.index(wanted))
        self.refresh()


def _refill(combo, entries: list[tuple], picked) -> None:
    """A combo box holding `entries` (data, text, tooltip), `picked`'s entry current (the first when it has none),
    filled without telling anyone."""
    combo.blockSignals(True)
    combo.clear()
    for data, text, tip in entries:
        combo.addItem(text, data)
        if tip:
            combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
    combo.setCurrentIndex(max(0, combo.findData(picked)) if picked is not None else 0)
    combo.blockSignals(False)
