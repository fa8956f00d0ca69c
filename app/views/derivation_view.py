"""How this number was made: one cell of one step, derived from the cells and parameters it reads.

A click on a cell of the Step view's map (or a row of its token table) opens it here: the cell's value, the
formula, the same formula with this run's numbers, the result recomputed from them, its largest terms, and the
inputs it read. Each input is a link: it goes to that step with those cells outlined on the map, where a click
derives them in turn; ◀ Back returns along the chain. The derivation runs off the UI thread (it may rerun a
sublayer of a long, lazily traced run): a job (app/work/jobs.py) that keeps only the latest request.
"""

from __future__ import annotations

import html

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout

from scratchformer.analyses.derive.result import Derivation, num

from ..widgets.cell_links import show_cells
from ..work.jobs import JobRunner
from .base import View, placeholder

HINT = ("Click a cell of any map in the Step view (or a row of the token table) to see how its number was made: "
        "the formula with this run's numbers, the inputs it read, and the value recomputed from them.")
ATTENTION_PAIR_KINDS = ("scores", "scaled_scores", "masked_scores", "attention_weights")
HISTORY = 32  # derivations kept for ◀ Back


class DerivationView(View):
    title = "How this number was made"
    tooltip = "Click a cell in the Step view: its formula with this run's numbers, its inputs, the value recomputed"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.back_button = QPushButton("◀ Back")
        self.back_button.setToolTip("The derivation shown before this one")
        self.back_button.clicked.connect(self.back)
        self.map_button = QPushButton("Show on the map")
        self.map_button.setToolTip("Go to this step in the Step view with this cell outlined")
        self.map_button.clicked.connect(self.show_on_map)
        self.neuron_button = QPushButton("Q·K neuron view")
        self.neuron_button.setToolTip("This query and key in the neuron view: q, k, their products, the softmax")
        self.neuron_button.clicked.connect(self.open_neuron_view)
        self.sum_button = QPushButton("Weighted sum")
        self.sum_button.setToolTip("This query's output drawn as the weighted sum of every key's value")
        self.sum_button.clicked.connect(self.open_weighted_sum)
        for b in (self.back_button, self.map_button, self.neuron_button, self.sum_button):
            bar.addWidget(b)
        bar.addStretch(1)
        layout.addLayout(bar)
        self.empty = placeholder(HINT)
        layout.addWidget(self.empty)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(lambda url: self.follow(url.toString()))
        layout.addWidget(self.browser, 1)
        self.status = QLabel("")
        self.status.setStyleSheet("color: #555;")
        layout.addWidget(self.status)
        self.derivation: Derivation | None = None
        self._run = None  # the run the derivation belongs to
        self._history: list[tuple[str, tuple[int, ...]]] = []
        self._jobs = JobRunner("scratchformer-derivation", latest_only=True)  # a newer click replaces an older one
        self._show()

    # --- asking ------------------------------------------------------------------------------------------------

    def derive(self, step_name: str, index: tuple[int, ...], remember: bool = True) -> None:
        """Derive a cell of the current run off the UI thread and show it (switching to this view)."""
        result = self.main.current_result()
        if result is None:
            return
        if remember and self.derivation is not None and self._run is result:
            self._history = (self._history + [(self.derivation.step, self.derivation.index)])[-HISTORY:]
        self.main.tabs.setCurrentWidget(self)
        from scratchformer.analyses import derive  # the rules load with the first click, not at launch

        index = tuple(index)
        self._jobs.start(lambda job: derive.compute(result.bundle, result.trace, step_name, index),
                         on_result=lambda derivation: self._done(result, derivation), on_error=self._failed,
                         doing=f"Deriving {step_name}")
        self.status.setText(f"Deriving {step_name} {list(index)}…")

    def _done(self, result, derivation: Derivation | None) -> None:
        if derivation is None:
            self._failed("The derivation gave no result.")
            return
        if result is not self.main.current_result():
            return  # the run changed while deriving
        self.derivation, self._run = derivation, result
        self.status.setText("")
        self._show()

    def _failed(self, sentence: str) -> None:
        self.status.setText("")
        self.main.show_error(sentence)

    def is_deriving(self) -> bool:
        return self._jobs.busy()

    def is_busy(self) -> bool:
        return self.is_deriving()

    def shutdown(self) -> None:
        self._jobs.shutdown()

    def back(self) -> None:
        if self._history:
            name, index = self._history.pop()
            self.derive(name, index, remember=False)

    # --- links -------------------------------------------------------------------------------------------------

    def follow(self, link: str) -> None:
        """'cells:<group>' outlines an input step's cells on its map; 'derive:<step>:<i,j,…>' derives one cell."""
        kind, _, rest = link.partition(":")
        if kind == "cells" and self.derivation is not None:
            name, cells = self.derivation.input_groups()[int(rest)]
            show_cells(self.main, name, cells)
        elif kind == "derive":
            name, _, index = rest.rpartition(":")
            self.derive(name, tuple(int(i) for i in index.split(",")))

    def show_on_map(self) -> None:
        if self.derivation is not None:
            show_cells(self.main, self.derivation.step, [self.derivation.index])

    def _attention_view(self, title: str):
        return next((v for v in self.main.views if v.title == title), None)

    def open_neuron_view(self) -> None:
        d = self.derivation
        view = self._attention_view("Q·K neuron view")
        if d is None or view is None:
            return
        step = self.main.current_trace()[d.step]
        _, head, query, key = d.index
        self.main.tabs.setCurrentWidget(view)
        view.show_pair(step.sublayer, head, query, key)

    def open_weighted_sum(self) -> None:
        d = self.derivation
        view = self._attention_view("Weighted sum")
        if d is None or view is None:
            return
        step = self.main.current_trace()[d.step]
        head = d.index[1] if step.kind in ("context", *ATTENTION_PAIR_KINDS) else 0
        self.main.tabs.setCurrentWidget(view)
        view.show_query(step.sublayer, head, d.index[2])

    # --- drawing -----------------------------------------------------------------------------------------------

    def refresh(self) -> None:
        if self._run is not None and self._run is not self.main.current_result():
            self.derivation, self._run, self._history = None, None, []  # another run: its cells are gone
        self._show()

    def _show(self) -> None:
        d = self.derivation
        self.empty.setVisible(d is None)
        self.browser.setVisible(d is not None)
        self.back_button.setEnabled(bool(self._history))
        self.map_button.setEnabled(d is not None)
        trace = self.main.current_trace()
        kind = trace[d.step].kind if d is not None and trace is not None and trace.find(d.step) else ""
        self.neuron_button.setVisible(kind in ATTENTION_PAIR_KINDS and self._attention_view("Q·K neuron view")
                                      is not None)  # fmt: skip
        self.sum_button.setVisible(kind in ("context", "attention_weights") and self._attention_view("Weighted sum")
                                   is not None)  # fmt: skip
        if d is not None and trace is not None:
            self.browser.setHtml(derivation_html(trace, d))

    def current_heatmaps(self) -> list:
        return []


def derivation_html(trace, d: Derivation) -> str:
    """The derivation as rich text: value and check, formula, expression, note, terms, and the inputs as links."""
    from scratchformer.analyses.derive import explain_index

    e = html.escape
    ok = d.agrees()
    check = ("<span style='color:#1b7f3b'>✓ equals the value in the trace</span>" if ok else
             "<span style='color:#b00020'>✗ differs from the value in the trace</span>")
    parts = [
        f"<h3 style='margin:0'>{e(d.title)}</h3>",
        f"<p style='color:#555;margin-top:2px'>{e(d.step)} · {e(explain_index(trace, d.step, d.index))}</p>",
        f"<p style='font-size:15pt;margin:6px 0'><b>{e(num(d.value))}</b></p>",
        f"<p><b>Formula</b><br><code>{e(d.formula)}</code></p>",
        f"<p><b>With this run's numbers</b><br>{e(d.expression)}</p>",
        f"<p><b>Recomputed</b> {e(num(d.recomputed))} {check}</p>",
    ]
    if d.note:
        parts.append(f"<p>{e(d.note)}</p>")
    if d.terms:
        biggest = max((abs(t.value) for t in d.terms if t.value == t.value and abs(t.value) != float("inf")),
                      default=1.0) or 1.0  # fmt: skip
        rows = []
        for t in d.terms:
            finite = t.value == t.value and abs(t.value) != float("inf")
            width = int(120 * abs(t.value) / biggest) if finite else 0
            colour = "#3b6fb6" if t.value >= 0 else "#c2452d"
            bar = f"<table cellspacing=0 cellpadding=0><tr><td bgcolor='{colour}' width={max(width, 1)} height=8>" \
                  "</td></tr></table>" if width else ""
            rows.append(f"<tr><td>{e(t.label)}</td><td align=right>&nbsp;{e(num(t.value))}&nbsp;</td><td>{bar}</td>"
                        "</tr>")
        parts.append("<p><b>Terms</b></p><table cellspacing=2>" + "".join(rows) + "</table>")
    parts.append("<p><b>Inputs it read</b> (click to see them on their map)</p><ul>")
    for k, (name, cells) in enumerate(d.input_groups()):
        step = trace.find(name)
        where = e(step.title if step is not None else name)
        count = f"{len(cells)} cells" if len(cells) > 1 else "1 cell"
        derive_one = (f" · <a href='derive:{name}:{','.join(map(str, cells[0]))}'>derive it</a>"
                      if len(cells) == 1 else "")
        parts.append(f"<li><a href='cells:{k}'>{count} of {where}</a> <span style='color:#666'>({e(name)})</span>"
                     f"{derive_one}</li>")
    params: dict[str, int] = {}
    for c in d.inputs:
        if c.param is not None:
            params[c.param] = params.get(c.param, 0) + 1
    for name, n in params.items():
        parts.append(f"<li>{n} entr{'ies' if n > 1 else 'y'} of the parameter <code>{e(name)}</code></li>")
    if d.unlisted:
        parts.append(f"<li>{d.unlisted} more cells, not listed one by one</li>")
    if not d.input_groups() and not params:
        parts.append("<li>nothing from the trace: this number comes straight from the text or a closed form</li>")
    parts.append("</ul>")
    return "".join(parts)
