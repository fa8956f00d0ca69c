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
        for combo, first in ((self.token_combo, "most likely token"), (self.versus_combo, "—")):
            combo.blockSignals(True)
            while combo.count() > 1:
                combo.removeItem(1)
            combo.setItemText(0, first)
            combo.setCurrentIndex(0)
            combo.blockSignals(False)

    def _fill_tokens(self, built) -> None:
        """The token box after a build: the most likely token first (its logit is explained by default), then the
        next most likely at that position, each with its probability."""
        likely = built.result.likely
        if not likely:
            return
        self.token_combo.blockSignals(True)
        self.token_combo.clear()
        _, top, p = likely[0]
        self.token_combo.addItem(f"“{abbreviate(top, 10)}” {p:.2g}", None)
        self.token_combo.setItemData(0, f"Explain the logit of the most likely token, {top!r}, probability {p:.3g} "
                                     "here", Qt.ItemDataRole.ToolTipRole)  # fmt: skip
        for tid, token, p in likely[1:]:
            self.token_combo.addItem(f"“{abbreviate(token, 10)}” {p:.2g}", tid)
            self.token_combo.setItemData(self.token_combo.count() - 1, f"Explain the logit of {token!r} (id {tid}), "
                                         f"probability {p:.3g} here", Qt.ItemDataRole.ToolTipRole)  # fmt: skip
        picked = built.ask.token
        self.token_combo.setCurrentIndex(max(0, self.token_combo.findData(picked)) if picked is not None else 0)
        self.token_combo.blockSignals(False)
        explained = picked if picked is not None else likely[0][0]
        self.versus_combo.blockSignals(True)
        self.versus_combo.clear()
        self.versus_combo.addItem("—", None)
        for tid, token, p in likely:
            if tid != explained:
                self.versus_combo.addItem(f"“{abbreviate(token, 10)}” {p:.2g}", tid)
                self.versus_combo.setItemData(self.versus_combo.count() - 1, f"Explain the logit difference against "
                                              f"{token!r} (id {tid}), probability {p:.3g} here",
                                              Qt.ItemDataRole.ToolTipRole)  # fmt: skip
        against = built.ask.versus
        self.versus_combo.setCurrentIndex(max(0, self.versus_combo.findData(against)) if against is not None else 0)
        self.versus_combo.blockSignals(False)

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
