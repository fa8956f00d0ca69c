"""The Graph view's QK panel: why attention moved it. One head's score at one query and key position, split into
what the graph's nodes put into its query and its key (scratchformer.graph.qk.split_score): the largest
query-node × key-node products, the biases alone, and the rest as one row, so the rows add up to the score the model
computed; or each query node's (each key node's) whole share. The panel only shows and asks: the split is made in a
job of the view (app/views/graph/qk.py, work.qk_split). Clicking a node's cell selects that node in
the graph."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from scratchformer.plotdata import abbreviate

from ...widgets.steady_label import SteadyLabel
from .work import QKAsk, QKMade

MODES = (("products", "query node × key node"), ("query", "query nodes"), ("key", "key nodes"))
BIAS = "bias"  # the core's name for the biases' side of a product


@dataclass(frozen=True)
class Attention:
    """One attention sublayer of the model, as the panel offers it: its name in the trace ('decoder.1.cross_attn',
    layers from 0 as the graph counts them), its heads, and the sides its queries and keys are read from."""

    name: str
    heads: int
    query_side: str  # "encoder" | "decoder"
    key_side: str


def attentions_of(model) -> list[Attention]:
    """Every attention of the model, in the order they run (a walk over its modules: cheap, no model work)."""
    from scratchformer.patching.components import attention_modules

    out = []
    for name, module in attention_modules(model).items():
        side = name.split(".")[0]
        out.append(Attention(name, module.n_heads, side, "encoder" if module.cross else side))
    return out


@dataclass(frozen=True)
class TermRow:
    """One row of the table: a term of the score and the nodes it is the product (or share) of. `ids`: node ids,
    BIAS for a side's biases, '' for none; `kind`: 'term', 'bias' (the biases alone), 'rest' or 'total'."""

    term: float
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    kind: str = "term"


def short_name(node_id: str, full: str) -> str:
    """A node's name for a table cell: 'dec L0 F185 @0 “<s>”' for 'decoder layer 0 feature 185 at 0 “<s>”' (its
    id 'dec.0.f185@0'), 'enc embedding @1 “girl”', 'dec L1 error @0 “<s>”'; the full name goes in the tooltip."""
    side, _, rest = node_id.partition(".")
    token = full[full.find("“") :] if "“" in full else ""
    where, _, at = rest.partition("@")
    if where == "emb":
        return f"{side} embedding @{at} {token}".strip()
    layer, _, what = where.partition(".")
    if what == "err":
        return f"{side} L{layer} error @{at} {token}".strip()
    if what.startswith("f"):
        return f"{side} L{layer} F{what[1:]} @{at} {token}".strip()
    return full


def term_rows(made: QKMade, mode: str) -> tuple[tuple[str, ...], list[TermRow]]:
    """(column headers, rows) of a split shown as `mode` (see MODES). Every row but the last adds up to the
    split's total (the core checks that it is the score); the last row is the score itself."""
    s, names = made.split, made.names

    def name(node_id: str, side: str) -> str:
        return f"the {side}'s biases" if node_id == BIAS else names.get(node_id, node_id)

    if mode == "products":
        headers = ("Term", "Query node", "Key node")
        rows = [TermRow(t, (a, b), (name(a, "query"), name(b, "key"))) for a, b, t in s.pairs]
        bias = "the key's biases" + (" (and the position bias)" if any("position bias" in n for n in s.notes) else "")
        rows.append(TermRow(s.bias_term, (BIAS, BIAS), ("the query's biases", bias), "bias"))
        rest = "every other product (smaller ones)"
    else:
        side = mode
        headers = ("Share", "Query node" if side == "query" else "Key node")
        shares = s.by_query if side == "query" else s.by_key
        other = "key" if side == "query" else "query"
        rows = [TermRow(t, (a,), (name(a, side),)) for a, t in shares]
        rest = f"the other {side} nodes, and the {side}'s biases (with every {other} node and bias)"
    done = sum(r.term for r in rows)
    blank = ("",) * (len(headers) - 2)
    rows.append(TermRow(s.total - done, ("",) * (len(headers) - 1), (rest, *blank), "rest"))
    rows.append(TermRow(s.score, ("",) * (len(headers) - 1), (f"= the score (weight {s.weight:.3f})", *blank),
                        "total"))  # fmt: skip
    return headers, rows


class QKPanel(QWidget):
    """Which score (attention, head, query, key), how to show it, and the table of its terms."""

    changed = Signal()  # the score asked for changed: split again
    node_picked = Signal(str)  # a node's cell clicked: its id
    export_requested = Signal(str)  # "copy" | "csv" | "json"
    close_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.attentions: list[Attention] = []
        self.tokens: dict[str, list[str]] = {"encoder": [], "decoder": []}
        self.position = 0  # the decoder position the graph explains
        self.made: QKMade | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        layout.addLayout(row)
        self.attention_combo = self._combo("The attention sublayer whose score is split (layers from 0, as the "
                                           "graph counts them)", 18)  # fmt: skip
        self.attention_combo.activated.connect(lambda _i: self._attention_changed())
        self.head_combo = self._combo("The head: “strongest” is the one that attends most from the query to the "
                                      "key (to any key, when the key is the most attended)", 6)  # fmt: skip
        self.query_combo = self._combo("The query position: the one whose attention is explained", 6)
        self.key_combo = self._combo("The key position: “most attended” is the key this head attends to most", 6)
        for combo in (self.head_combo, self.query_combo, self.key_combo):
            combo.activated.connect(lambda _i: self.changed.emit())
        for w in (self.attention_combo, self.head_combo, QLabel("query"), self.query_combo, QLabel("key"),
                  self.key_combo):  # fmt: skip
            row.addWidget(w)
        row.addStretch(1)
        row = QHBoxLayout()
        layout.addLayout(row)
        title = QLabel("Why attention?")
        title.setStyleSheet("font-weight: bold;")
        self.mode_combo = self._combo("Each product of a query node and a key node, or each node's whole share (its "
                                      "products with every node of the other side and its biases)", 16)  # fmt: skip
        for mode, text in MODES:
            self.mode_combo.addItem(text, mode)
        self.mode_combo.activated.connect(lambda _i: self._fill_table())
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the table as CSV")
        self.copy_button.clicked.connect(lambda: self.export_requested.emit("copy"))
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("CSV (the table shown)…", lambda: self.export_requested.emit("csv"))
        menu.addAction("JSON (as `scratchformer graph --qk … --json`)…", lambda: self.export_requested.emit("json"))
        self.export_button.setMenu(menu)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close_requested.emit)
        row.addWidget(title)
        row.addStretch(1)
        for w in (QLabel("Show"), self.mode_combo, self.copy_button, self.export_button, self.close_button):
            row.addWidget(w)
        self.summary = SteadyLabel(word_wrap=True)
        layout.addWidget(self.summary)
        self.table = QTableWidget(0, 3)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)  # compact rows
        self.table.setWordWrap(False)
        self.table.cellClicked.connect(self._cell_clicked)
        layout.addWidget(self.table, 1)
        self._set_enabled()

    @staticmethod
    def _combo(tip: str, width: int) -> QComboBox:
        box = QComboBox()
        box.setToolTip(tip)
        box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        box.setMinimumContentsLength(width)
        return box

    # --- what can be asked -------------------------------------------------------------------------------------------

    def set_graph(self, attentions: list[Attention], tokens: dict[str, list[str]], position: int) -> None:
        """A new graph: its model's attentions, its tokens on each side, the position it explains. The table empties."""
        self.attentions, self.tokens, self.position = attentions, tokens, position
        self.attention_combo.clear()
        for a in attentions:
            self.attention_combo.addItem(a.name, a.name)
        self._attention_changed(emit=False)
        self.clear()

    def attention(self) -> Attention | None:
        name = self.attention_combo.currentData()
        return next((a for a in self.attentions if a.name == name), None)

    def aim(self, attention: str, head: int | None, query: int, key: int | None) -> None:
        """Set the controls to a score (head None: the strongest; key None: the most attended); emits nothing."""
        i = self.attention_combo.findData(attention)
        if i >= 0:
            self.attention_combo.setCurrentIndex(i)
            self._attention_changed(emit=False)
        for combo, value in ((self.head_combo, head), (self.query_combo, query), (self.key_combo, key)):
            j = combo.findData(value)
            combo.setCurrentIndex(max(j, 0))

    def ask(self) -> QKAsk | None:
        """The score the controls name, or None before a graph."""
        a, query = self.attention(), self.query_combo.currentData()
        if a is None or query is None:
            return None
        return QKAsk(a.name, self.head_combo.currentData(), int(query), self.key_combo.currentData())

    def _attention_changed(self, emit: bool = True) -> None:
        """Heads and positions of the attention chosen; the query stays where it is when that side has it."""
        a = self.attention()
        query = self.query_combo.currentData()
        self.head_combo.clear()
        self.query_combo.clear()
        self.key_combo.clear()
        if a is None:
            return
        self.head_combo.addItem("strongest", None)
        for h in range(a.heads):
            self.head_combo.addItem(f"head {h}", h)
        queries, keys = self.tokens.get(a.query_side, []), self.tokens.get(a.key_side, [])
        for p, token in enumerate(queries):
            self.query_combo.addItem(f"{p} “{abbreviate(token, 10)}”", p)
        self.key_combo.addItem("most attended", None)
        for p, token in enumerate(keys):
            self.key_combo.addItem(f"{p} “{abbreviate(token, 10)}”", p)
        default = self.position if a.query_side == "decoder" else 0
        keep = query if query is not None and 0 <= query < len(queries) else default
        self.query_combo.setCurrentIndex(max(0, min(keep, len(queries) - 1)))
        if emit:
            self.changed.emit()

    # --- what was made -----------------------------------------------------------------------------------------------

    def clear(self) -> None:
        self.made = None
        self.summary.setText("")
        self.table.setRowCount(0)
        self._set_enabled()

    def show_made(self, made: QKMade) -> None:
        self.made = made
        s = made.split
        side = next((a for a in self.attentions if a.name == s.attention), None)
        q_tok = self._token(side.query_side if side else "decoder", s.query)
        k_tok = self._token(side.key_side if side else "encoder", s.key)
        head = f"Head {s.head}" + (" (the one attending most there)" if made.ask.head is None else "")
        key = f"key {s.key} {k_tok}" + (" (its most attended)" if made.ask.key is None else "")
        notes = " ".join(s.notes)
        self.summary.setText(f"{head}: query {s.query} {q_tok} against {key} scores {s.score:.4f} (weight "
                             f"{s.weight:.3f}); the rows add up to it. The command: `scratchformer graph --qk "
                             f"{made.ask.spec(s.head, s.key)}`. {notes}".strip())  # fmt: skip
        self._fill_table()

    def _token(self, side: str, p: int) -> str:
        tokens = self.tokens.get(side, [])
        return f"“{tokens[p]}”" if 0 <= p < len(tokens) else ""

    def mode(self) -> str:
        return self.mode_combo.currentData()

    def rows(self) -> list[TermRow]:
        """The rows shown (empty before a split)."""
        return term_rows(self.made, self.mode())[1] if self.made is not None else []

    def _fill_table(self) -> None:
        self._set_enabled()
        if self.made is None:
            return
        headers, rows = term_rows(self.made, self.mode())
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = [QTableWidgetItem(f"{row.term:+.4f}")]
            cells[0].setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            for node_id, text in zip(row.ids, row.texts):
                named = node_id and node_id != BIAS
                item = QTableWidgetItem(short_name(node_id, text) if named else text)
                item.setData(Qt.ItemDataRole.UserRole, node_id)
                if named:
                    item.setToolTip(f"{text} ({node_id}): click to select it in the graph")
                cells.append(item)
            for c, item in enumerate(cells):
                if row.kind in ("rest", "total", "bias"):
                    font = QFont(item.font())
                    font.setBold(row.kind == "total")
                    font.setItalic(row.kind != "total")
                    item.setFont(font)
                self.table.setItem(r, c, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        for c in range(1, len(headers)):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.Stretch)

    def _cell_clicked(self, row: int, column: int) -> None:
        item = self.table.item(row, column)
        node_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if node_id and node_id != BIAS:
            self.node_picked.emit(node_id)

    def _set_enabled(self) -> None:
        for w in (self.copy_button, self.export_button):
            w.setEnabled(self.made is not None)

    # --- exports -----------------------------------------------------------------------------------------------------

    def csv_text(self) -> str:
        """The table shown as CSV: the term, then each node column's text and id."""
        if self.made is None:
            return ""
        headers, rows = term_rows(self.made, self.mode())
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        nodes = [h.lower().replace(" ", "_") for h in headers[1:]]
        writer.writerow([headers[0].lower(), *[x for n in nodes for x in (n, f"{n}_id")]])
        for row in rows:
            writer.writerow([repr(row.term), *[x for t, i in zip(row.texts, row.ids) for x in (t, i)]])
        return out.getvalue()

    def payload(self) -> dict | None:
        """What `scratchformer graph --qk … --json` prints for this split (its "qk" entry), with the nodes' names."""
        if self.made is None:
            return None
        return {**self.made.split.to_dict(), "names": dict(self.made.names)}
