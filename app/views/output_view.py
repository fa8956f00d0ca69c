"""The model's output: the top-k next tokens and their probabilities at every target position."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout

from scratchformer.plotdata import Heatmap, abbreviate, top_k_changes, top_k_table

from ..widgets.rows_table import Cell, RowsTable
from ..work.warmup import ReadyFirst, step_work
from .base import View, placeholder
from .compare_view import decoder_input_note


class OutputView(View):
    title = "Output"
    explains = "output"
    tooltip = "Top-k next-token probabilities for each target position"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        bar.addWidget(self.caption, 1)
        bar.addWidget(QLabel("k"))
        self.k_spin = QSpinBox()
        self.k_spin.setRange(1, 20)
        self.k_spin.setValue(5)
        self.k_spin.setToolTip("How many candidates to list per position")
        self.k_spin.valueChanged.connect(lambda _v: self.refresh())
        bar.addWidget(self.k_spin)
        layout.addLayout(bar)
        self.empty = placeholder("This model has no output layer over a vocabulary, so it predicts no tokens: it "
                                 "ends with one vector per token, the last encoder layer's output.")
        layout.addWidget(self.empty)
        self.table = RowsTable()
        self.table.cell_clicked.connect(lambda row, _col: self._attribute(row))
        self.table.setToolTip("Click a row to see which input tokens its prediction depends on (Attribution)")
        layout.addWidget(self.table, 1)
        self._map: Heatmap | None = None
        self._ready = ReadyFirst()  # the rows are made off the UI thread, the latest request only

    def refresh(self) -> None:
        trace, result = self.main.current_trace(), self.main.current_result()
        step = trace.find("generator.probs") if trace is not None else None
        self.empty.setVisible(step is None)
        self.table.setVisible(step is not None)
        if step is None:
            self._map = None
            self.caption.setText("")
            return
        batch, k = self.main.current_batch(), self.k_spin.value()
        changes = result.before is not None and result.before.find("generator.probs") is not None
        self._ready.run([], batch, lambda: _output_data(result, step, batch, k, changes),
                        lambda error, data: self._fill(result, batch, k, error, data))

    def _fill(self, result, batch: int, k: int, error: str, data) -> None:
        """On the UI thread: the rows made off it (top-k of up to 50,257 columns, the map's reduction, and every
        cell's text) go to the table, which draws only the cells on screen."""
        if error:
            self.main.show_error(error)
            return
        if data is None or result is not self.main.current_result():
            return
        self._map, headers, cells = data
        if result.before is not None and result.before.find("generator.probs") is not None:
            self.caption.setText(_changes_caption(result))
        else:
            self.caption.setText(
                "Row t: having read the decoder input up to and including token t, the model's most likely next "
                "tokens (bar = probability). Presets have random weights, so their guesses are near uniform."
            )
        self.table.set_rows(headers, cells)

    def _attribute(self, row: int) -> None:
        """A click on an output row: its predicted token attributed to the input tokens (Output › Attribution)."""
        view = next((v for v in self.main.views if v.title == "Attribution"), None)
        if view is not None and self.main.current_trace() is not None:
            view.show_position(row)

    def is_busy(self) -> bool:
        return self._ready.busy()

    def shutdown(self) -> None:
        self._ready.shutdown()

    def preparation(self, trace, batch: int) -> list:
        """Recomputed off the UI thread before this tab draws: with interventions, both runs' output
        probabilities (their top tokens before → after)."""
        result = self.main.current_result()
        if result is None or result.before is None:
            return []
        steps = [t.find("generator.probs") for t in (result.before, result.trace)]
        return step_work([s for s in steps if s is not None], batch)

    def current_heatmaps(self) -> list[Heatmap]:
        return [self._map] if self._map is not None else []

    def view_title(self) -> str:
        return "Output: top-k next tokens"


def _output_data(result, step, batch: int, k: int, changes: bool) -> tuple[Heatmap, list[str], list[list[Cell]]]:
    """(the output map, the table's headers, its cells) — made off the UI thread: a top-k over the vocabulary and
    the map's reduction of its columns take tens of milliseconds at 512 positions, the cells' texts as long."""
    hm = result.heatmap_for(step, batch, 0)
    headers = ["pos", "after input token"] + [f"#{i + 1}" for i in range(k)]
    if changes:
        return hm, headers, _change_cells(top_k_changes(result.before, result.trace, k, batch, result.vocab_labels))
    return hm, headers, _output_cells(top_k_table(result.trace, k, batch, result.vocab_labels))


def _row_start(r) -> list[Cell]:
    return [Cell(str(r.position)), Cell(abbreviate(r.input_token, 24), r.input_token)]


def _output_cells(rows) -> list[list[Cell]]:
    """Each position's top tokens with their probability, shaded by it (the darkest is the table's largest)."""
    top = max((p for r in rows for p in r.probs), default=1.0) or 1.0
    return [_row_start(r) + [
        Cell(f"{abbreviate(tok, 14)}   {p:.3g}", f"{tok!r} (id {tid}): p = {p:.6g}",
             (int(255 - 120 * (p / top)), 255 - int(60 * (p / top)), 255))
        for tok, tid, p in zip(r.tokens, r.ids, r.probs)] for r in rows]  # fmt: skip


def _change_cells(rows) -> list[list[Cell]]:
    """With interventions: each position's top tokens (of either run), probability before → after; red where
    the change made a token less likely, blue where more."""
    out = []
    for r in rows:
        cells = _row_start(r)
        for tok, tid, pb, pa in zip(r.tokens, r.ids, r.before, r.after):
            change = max(-1.0, min(1.0, pa - pb))
            shade = int(255 - 150 * abs(change))
            cells.append(Cell(f"{abbreviate(tok, 14)}   {pb:.3g} → {pa:.3g}",
                              f"{tok!r} (id {tid}): p = {pb:.6g} before, {pa:.6g} after",
                              (255, shade, shade) if change < 0 else (shade, shade, 255)))
        out.append(cells)
    return out


def _changes_caption(result) -> str:
    """With interventions: what was changed, and the decoded output of the model without and with the changes."""
    specs = "; ".join(i.spec() for i in result.trace.interventions)
    sides = result.request.sides
    if sides is not None:  # a patching sweep's cell: the corrupted run → the patched run
        lines = [f"<b>{html.escape(sides.before)} → {html.escape(sides.after.lower())}</b> "
                 f"({html.escape(sides.after_detail)}). {html.escape(decoder_input_note(result.inputs.decoder_input))}"]
        before, after = sides.before.lower(), sides.after.lower()
    else:
        lines = [f"<b>Before → after</b> the interventions ({html.escape(specs)}). "
                 f"{html.escape(decoder_input_note(result.inputs.decoder_input))}"]
        before, after = "before", "after"
    if result.before_output or result.after_output:
        lines.append(f"Decoded output {before}: <b>{html.escape(result.before_output or '(nothing)')}</b>")
        lines.append(f"Decoded output {after}: <b>{html.escape(result.after_output or '(nothing)')}</b>")
    return "<br>".join(lines)
