"""Graph: the attribution graph of one prediction of the current run through transcoder features (issue 45;
scratchformer.graph, docs/graphs.md) — which input tokens and which features, at which layers and positions, made
the logit, and through which others.

The graph is built in a job (app/work/jobs.py: progress, Cancel, the latest request only) through the model's
bundled transcoder set, the dictionaries attached to the run (Run › Attach dictionary…) or a set picked with
Transcoders…; it is drawn from scratchformer.plotdata.graph_layout (the export draws the same layout): x by
position (an encoder-decoder's source on the left, its decoder input on the right), y by layer, markers by influence,
edges by weight. The Nodes slider prunes the same graph again (the full adjacency is kept, so nothing is
recomputed but the pruning, in a job). Hover a node for its numbers and its strongest incoming contributions; click a
feature to see its card and to go to its step in the trace; Ctrl-click or Shift-drag to select nodes, then Group…
draws them as one named supernode whose edges are the sums of its members'.
"""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSlider,
    QSplitter,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.exporting.files import atomic_write_bytes
from scratchformer.plotdata import abbreviate
from scratchformer.plotdata.graph_layout import Supernode, graph_payload, node_text

from ..export.actions import save_numbers
from ..widgets.graph_plot import GraphPlot
from ..widgets.steady_label import SteadyLabel
from ..work.jobs import JobRunner
from .base import View, placeholder
from .feature_card import CardScroll, CardWidget
from .graph_work import EDGE_THRESHOLD, Ask, Built, Choice, build, cards_of, feature_step, relayout

PRUNE_AFTER_MS = 150  # the slider prunes again this long after it stops moving
HINT = ("Hover a node for its numbers; click a feature for its card and its step; Ctrl-click or Shift-drag to select "
        "nodes, then Group… makes them one supernode.")  # fmt: skip
NO_RUN = "Run a model: its graph explains one prediction of the run through transcoder features."


class StatusLine(SteadyLabel):
    """The view's status: at least two lines high, so that a new message seldom changes its height — a new height
    re-lays out the view, and the plot, resized, paints every edge again."""

    def __init__(self) -> None:
        super().__init__(word_wrap=True)

    def _needed_height(self) -> int:
        return max(super()._needed_height(), 2 * self.label.fontMetrics().height())


def ask_name(parent, suggested: str) -> str | None:
    """The supernode's name (replaceable in tests); None when cancelled."""
    name, ok = QInputDialog.getText(parent, "Group into a supernode", "Name of the supernode:", text=suggested)
    return name if ok else None


def ask_folder(parent) -> str | None:
    """A transcoder set's folder (replaceable in tests)."""
    return QFileDialog.getExistingDirectory(parent, "A transcoder set: one folder per feed-forward") or None


class GraphView(View):
    title = "Graph"
    explains = "graph"
    tooltip = ("The attribution graph of one prediction through transcoder features: which features, at which "
               "layers and positions, made it")  # fmt: skip

    def __init__(self, window) -> None:
        super().__init__(window)
        self.built: Built | None = None
        self.groups: list[Supernode] = []
        self.selected: set[str] = set()  # ids of the drawn nodes selected (a group's: 'group:NAME')
        self.picked: list[str] = []  # transcoder set folders picked with Transcoders…
        self._asked: tuple | None = None  # the key of the graph built or being built
        self._run_id: int | None = None  # the run the position list was made for
        self._cards: dict[tuple, object] = {}  # (step, choice, corpus) → CardSet
        self._card_node: tuple[str, int] | None = None  # (ffn step, feature) of the card shown or being made
        self._build_jobs = JobRunner("scratchformer-graph", latest_only=True)
        self._layout_jobs = JobRunner("scratchformer-graph-layout", latest_only=True)
        self._card_jobs = JobRunner("scratchformer-graph-cards", latest_only=True)
        self._closing = False
        self._hover = -1  # the node under the mouse
        self.hover_text = ""  # what hovering it says
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        row = QHBoxLayout()
        layout.addLayout(row)
        self.choice_combo = QComboBox()
        self.choice_combo.setToolTip("The transcoders the graph reads: the bundled set, the dictionaries attached "
                                     "to the run (Run › Attach dictionary…), or a set opened with Transcoders…")
        self.choice_combo.activated.connect(lambda _i: self.refresh())
        self.pick_button = QPushButton("Transcoders…")
        self.pick_button.setToolTip("Pick a transcoder set: a folder with one transcoder per feed-forward, as "
                                    "`scratchformer features train --kind transcoder --every-layer` writes it")
        self.pick_button.clicked.connect(self._pick_dialog)
        self.position_combo = QComboBox()
        self.position_combo.setToolTip("The decoder position whose prediction is explained: the logit of the token "
                                       "the model puts next there")  # fmt: skip
        self.position_combo.activated.connect(lambda _i: self.refresh())
        for combo in (self.choice_combo, self.position_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(7)
        self.build_button = QPushButton("Build")
        self.build_button.setToolTip("Build the graph again (after a Cancel)")
        self.build_button.clicked.connect(self.rebuild)
        for w in (self.choice_combo, self.pick_button, QLabel("at"), self.position_combo, self.build_button):
            row.addWidget(w)
        row.addStretch(1)
        row = QHBoxLayout()
        layout.addLayout(row)
        row.addWidget(QLabel("Nodes"))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(50, 100)
        self.slider.setValue(80)
        self.slider.setMinimumWidth(70)
        self.slider.setToolTip("Pruning: keep the nodes that carry this share of the influence on the logit (the "
                               f"edges keep {EDGE_THRESHOLD:.0%} among them); the graph is not built again")
        self.slider.valueChanged.connect(self._slider_moved)
        self.threshold_label = QLabel("80 %")
        self.group_button = QPushButton("Group…")
        self.group_button.setToolTip("Draw the selected nodes as one named supernode (its edges: the sums of theirs)")
        self.group_button.clicked.connect(self._group_dialog)
        self.ungroup_button = QPushButton("Ungroup")
        self.ungroup_button.setToolTip("Draw the selected supernodes' nodes again")
        self.ungroup_button.clicked.connect(self.ungroup_selected)
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("Picture (PNG, SVG, PDF)…", self._export_picture_dialog)
        menu.addAction("JSON (as `scratchformer graph --json`)…", self._export_json_dialog)
        self.export_button.setMenu(menu)
        for w in (self.slider, self.threshold_label, self.group_button, self.ungroup_button, self.export_button):
            row.addWidget(w)
        row.setStretch(1, 1)
        row = QHBoxLayout()
        layout.addLayout(row)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(130)
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.status = StatusLine()
        for w in (self.progress, self.cancel_button):
            row.addWidget(w)
        row.addWidget(self.status, 1)
        self.empty = placeholder(NO_RUN)
        layout.addWidget(self.empty)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.plot = GraphPlot()
        self.plot.hovered.connect(self._hovered)
        self.plot.clicked.connect(self._clicked)
        self.plot.banded.connect(self._banded)
        self.split.addWidget(self.plot)
        below = QWidget()
        bl = QVBoxLayout(below)
        bl.setContentsMargins(0, 0, 0, 0)
        buttons = QHBoxLayout()
        self.card_button = QPushButton("Card")
        self.card_button.setToolTip("The selected feature's card: its top contexts over the corpus, its activations, "
                                    "the tokens it pushes up and down")  # fmt: skip
        self.card_button.clicked.connect(self.show_card)
        self.step_button = QPushButton("Go to its step")
        self.step_button.setToolTip("Show the selected node's step in the trace (the Step view)")
        self.step_button.clicked.connect(self.go_to_step)
        for w in (self.card_button, self.step_button):
            buttons.addWidget(w)
        buttons.addStretch(1)
        bl.addLayout(buttons)
        self.details = QLabel(HINT)
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.details_scroll = QScrollArea()  # the selected node's text: a few lines, scrolled when the card is shown
        self.details_scroll.setWidgetResizable(True)
        self.details_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.details_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.details_scroll.setWidget(self.details)
        bl.addWidget(self.details_scroll, 1)
        self.card = CardWidget()
        self.card.export_requested.connect(self._export_card_dialog)
        self.card_scroll = CardScroll(self.card)
        self.card_scroll.setVisible(False)
        bl.addWidget(self.card_scroll, 1)
        self.split.addWidget(below)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([400, 150])
        self.split.setChildrenCollapsible(False)
        layout.addWidget(self.split, 1)
        self._prune_timer = QTimer(self)
        self._prune_timer.setObjectName("scratchformer-graph-prune")
        self._prune_timer.setSingleShot(True)
        self._prune_timer.setInterval(PRUNE_AFTER_MS)
        self._prune_timer.timeout.connect(self._prune_now)
        self._show_body(False)
        self._set_enabled()

    # --- which graph ---------------------------------------------------------------------------------------------

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

    def refresh(self) -> None:
        """Build the graph of the current run when it, the transcoders or the position changed (a step change only
        asks again, and finds it built)."""
        result = self.main.current_result()
        if result is None:
            self._show_body(False, NO_RUN)
            return
        self._fill_choices(result)
        self._fill_positions(result)
        problem = self._problem(result)
        if problem is not None:
            if self._asked is not None or self.built is not None or self.status.text() != problem:
                self._forget()
                self._show_body(False, problem)
                self._say(problem, error=True)
            return
        ask = Ask(result.bundle, result.inputs, id(result), self.choice_combo.currentData(),
                  int(self.position_combo.currentData()), self.threshold())  # fmt: skip
        if ask.key() == self._asked:
            return
        self._start_build(ask)

    def rebuild(self) -> None:
        """Build again what the controls say (Build: after a Cancel, or to read a changed transcoder set again)."""
        self._asked = None
        self._cards.clear()
        self.refresh()

    def _start_build(self, ask: Ask) -> None:
        self._asked = ask.key()
        self._layout_jobs.cancel()
        self._prune_timer.stop()
        fresh = self.built is None or self.built.ask.key()[0] != ask.run_id
        if fresh:
            self.groups, self.selected = [], set()
        groups = list(self.groups)
        self._build_jobs.start(lambda job: build(ask, groups, job), on_result=self._built, on_error=self._failed,
                               on_progress=self._progressed, doing="Building the graph")  # fmt: skip
        self._working(f"Building the graph of {ask.bundle.name}'s prediction at decoder position "
                      f"{ask.position} through the {ask.choice.label()}…")  # fmt: skip

    def _built(self, built: Built | None) -> None:
        self._idle()
        if built is None or self._closing:
            return
        same_view = self.built is not None and self.built.ask.key() == built.ask.key()
        self.built = built
        self._show_body(True)
        self._draw(keep_range=same_view)
        if built.threshold != self.threshold():  # the slider moved while it was built
            self._prune_now()

    def _failed(self, sentence: str) -> None:
        self._idle()
        self._forget()
        self._show_body(False, sentence)
        self._say(sentence, error=True)

    def _forget(self) -> None:
        self.built = None
        self._asked = None
        self.plot.clear_graph()
        self.card_scroll.setVisible(False)
        self.details_scroll.setMaximumHeight(16_777_215)  # (Qt's largest): the text has the room again
        self._card_node = None
        self._set_enabled()

    # --- pruning and grouping ----------------------------------------------------------------------------------------

    def graph_of(self, result) -> tuple | None:
        """(GraphResult, the Nodes slider's threshold) of the graph this view built for the run `result`, or None:
        what File › Export › Interactive page… puts into the page."""
        built = self.built
        if built is None or built.ask.run_id != id(result):
            return None
        return built.result, built.threshold

    def threshold(self) -> float:
        return self.slider.value() / 100

    def set_threshold(self, value: float) -> None:
        """Move the Nodes slider to `value` (0.5 … 1); the graph is pruned again shortly after."""
        self.slider.setValue(round(value * 100))

    def _slider_moved(self, value: int) -> None:
        self.threshold_label.setText(f"{value} %")
        if self.built is not None and not self._closing:
            self._prune_timer.start()

    def _prune_now(self) -> None:
        self._relayout(f"Pruning again at {self.threshold():.0%} of the influence…")

    def _relayout(self, text: str) -> None:
        built = self.built
        if built is None or self._closing:
            return
        threshold, groups = self.threshold(), list(self.groups)
        self._layout_jobs.start(lambda job: relayout(built, threshold, groups, job), on_result=self._laid_out,
                                on_error=self._failed, doing="Laying the graph out")  # fmt: skip
        self._working(text)

    def _laid_out(self, built: Built | None) -> None:
        self._idle()
        if built is None or self._closing or self.built is None or built.ask.key() != self.built.ask.key():
            return
        self.built = built
        self._draw(keep_range=True)

    def group_selected(self, name: str) -> bool:
        """Draw the selected nodes as one supernode called `name` (a selected supernode's members join it); False,
        and one sentence, when it cannot be."""
        lay = self.built.layout if self.built is not None else None
        name = name.strip()
        if lay is None:
            return False
        members: list[str] = []
        merged = []
        for nid in sorted(self.selected):
            i = lay.index_of(nid)
            if i is None or lay.kinds[i] == "logit":
                continue
            if lay.kinds[i] == "group":
                merged.append(nid.removeprefix("group:"))
            members += [self.built.result.graph.nodes[j].id for j in lay.members[i]]
        if len(members) < 2:
            self._say("Select two nodes or more first (Ctrl-click them, or Shift-drag a box around them); the logit "
                      "stays on its own.", error=True)  # fmt: skip
            return False
        if not name:
            self._say("A supernode needs a name.", error=True)
            return False
        if any(g.name == name for g in self.groups if g.name not in merged):
            self._say(f"There is a supernode called “{name}” already; give this one another name.", error=True)
            return False
        self.groups = [g for g in self.groups if g.name not in merged] + [Supernode(name, tuple(members))]
        self.selected = {f"group:{name}"}
        self._relayout(f"Grouping {len(members)} nodes into “{name}”…")
        return True

    def ungroup_selected(self) -> None:
        """Draw the selected supernodes' members again (every supernode when none is selected)."""
        names = {nid.removeprefix("group:") for nid in self.selected if nid.startswith("group:")}
        if not self.groups:
            self._say("There is no supernode to ungroup.")
            return
        names = names or {g.name for g in self.groups}
        self.groups = [g for g in self.groups if g.name not in names]
        self.selected -= {f"group:{n}" for n in names}
        self._relayout(f"Ungrouping {', '.join(sorted(names))}…")

    def _group_dialog(self) -> None:
        name = ask_name(self, f"group {len(self.groups) + 1}")
        if name is not None:
            self.group_selected(name)

    # --- drawing, hover, selection -----------------------------------------------------------------------------------

    def _draw(self, keep_range: bool) -> None:
        built = self.built
        lay = built.layout
        self._hover = -1
        self.plot.draw(lay, keep_range)
        self.plot.select({i for i, nid in enumerate(lay.ids) if nid in self.selected})
        self.selected = {lay.ids[i] for i in self.plot.selected}
        g = built.result.graph
        kept = int(built.kept.nodes.sum())
        n_feat = sum(1 for k in lay.kinds if k == "feature")
        capped = f" (the {len(lay.edge_weight)} strongest drawn)" if lay.edges_kept > len(lay.edge_weight) else ""
        groups = f"; {len(lay.groups)} supernode{'s' if len(lay.groups) != 1 else ''}" if lay.groups else ""
        notes = " ".join(f"Note: {n}" for n in built.result.notes)
        self._say(f"The logit of “{g.token}” at decoder position {g.position}: {kept} of {len(g.nodes)} nodes kept "
                  f"({n_feat} features drawn) carrying {100 * built.kept.kept_influence:.1f} % of the influence, "
                  f"{lay.edges_kept} edges{capped}{groups}; replacement score {built.result.replacement:.3f}, "
                  f"completeness {built.result.completeness:.3f}; built in {built.result.seconds:.2f} s. "
                  f"{notes}".strip())  # fmt: skip
        self._show_details()
        self._set_enabled()
        self.main.refresh_explanation()

    def describe(self, i: int) -> str:
        """What hovering drawn node i says (scratchformer.plotdata.graph_layout.node_text)."""
        b = self.built
        return node_text(b.result, b.kept, b.layout, i)

    def _hovered(self, i: int) -> None:
        """A node's text in a tooltip by the mouse, its first line in the inspector's hover line."""
        if self.built is None or i == self._hover:
            return
        self._hover = i
        if i < 0:
            QToolTip.hideText()
            return
        self.hover_text = self.describe(i)
        QToolTip.showText(QCursor.pos(), self.hover_text, self.plot)
        self.main.show_hover(self.hover_text.splitlines()[0])

    def _show_details(self) -> None:
        """The selected node's text (one selected), or how many are selected, or the hint."""
        lay = self.built.layout if self.built is not None else None
        chosen = [lay.index_of(nid) for nid in sorted(self.selected)] if lay is not None else []
        chosen = [i for i in chosen if i is not None]
        if len(chosen) == 1:
            self.details.setText(self.describe(chosen[0]))
        elif chosen:
            self.details.setText(f"{len(chosen)} nodes selected: Group… draws them as one supernode.")
        else:
            self.details.setText(HINT)

    def select(self, nodes: list[int], add: bool = False, toggle: bool = False) -> None:
        """Select drawn nodes (layout indices): instead of the selection, or added to it, or toggled in it."""
        lay = self.built.layout if self.built is not None else None
        if lay is None:
            return
        ids = {lay.ids[i] for i in nodes if 0 <= i < len(lay)}
        self.selected = (self.selected ^ ids) if toggle else (self.selected | ids) if add else ids
        self.plot.select({i for i, nid in enumerate(lay.ids) if nid in self.selected})
        self._show_details()
        self._set_enabled()

    def _clicked(self, i: int, ctrl: bool) -> None:
        if self.built is None:
            return
        if i < 0:
            if not ctrl:
                self.select([])
            return
        self.select([i], toggle=ctrl)

    def _banded(self, nodes: list[int], add: bool) -> None:
        if self.built is not None:
            self.select(nodes, add=add)

    def selected_node(self):
        """The one graph node selected (scratchformer.graph.attribution.Node), or None."""
        lay = self.built.layout if self.built is not None else None
        if lay is None or len(self.selected) != 1:
            return None
        i = lay.index_of(next(iter(self.selected)))
        if i is None or lay.kinds[i] == "group":
            return None
        return self.built.result.graph.nodes[lay.members[i][0]]

    # --- the card and the step of a feature --------------------------------------------------------------------------

    def corpus(self) -> str:
        """The corpus the cards read: the Features view's field when it names one, else the model's own task."""
        from scratchformer.features.activations import default_corpus

        from .features_view import FeaturesView

        features = next((v for v in self.main.views if isinstance(v, FeaturesView)), None)
        typed = features.corpus_edit.text().strip() if features is not None else ""
        return typed or default_corpus(self.main.current_bundle().name) or ""

    def show_card(self) -> None:
        """The selected feature's card (every card of its transcoder is made once, in a job, and kept on disk)."""
        node, built = self.selected_node(), self.built
        if node is None or node.kind != "feature":
            self._say("Click a feature first: its card shows what it reads and writes.", error=True)
            return
        bundle, corpus = self.main.current_bundle(), self.corpus()
        key = (node.step, built.ask.choice, corpus)
        self._card_node = (node.step, node.feature)
        self.details_scroll.setMaximumHeight(110)  # the card takes the room below
        if key in self._cards:
            self._draw_card(key)
            return
        self._card_jobs.start(lambda job: cards_of(bundle, built, node.step, corpus, job),
                              on_result=lambda cards: self._cards_made(key, cards), on_error=self._failed_card,
                              on_progress=self._progressed, doing="Making the feature cards")  # fmt: skip
        self._working(f"Making every card of the transcoder of {node.step} over {corpus} (once; they are kept beside "
                      "it)…")  # fmt: skip

    def _cards_made(self, key: tuple, cards) -> None:
        self._idle()
        if cards is None:
            return
        self._cards[key] = cards
        self._draw_card(key)

    def _failed_card(self, sentence: str) -> None:
        self._idle()
        self._say(sentence, error=True)

    def _draw_card(self, key: tuple) -> None:
        from scratchformer.plotdata.feature_cards import card_plot

        if self._card_node is None or self._card_node[0] != key[0]:
            return
        try:
            self.card.show_card(card_plot(self._cards[key], self._card_node[1]))
        except UserError as exc:
            self._say(str(exc), error=True)
            return
        self.card_scroll.setVisible(True)
        self._say(f"The card of feature {self._card_node[1]} of the transcoder of {key[0]}, over {key[2]}.")

    def node_step(self, node) -> str | None:
        """The trace step a node's numbers come from: a feature's features step (or the step its transcoder reads),
        an error's feed-forward output, an embedding's token + position as the layers read them (the last step of
        its side's embedding), the logit's logits; None when the run has no such step."""
        result = self.main.current_result()
        if node is None or result is None:
            return None
        if node.kind == "embedding":
            prefix = "src_embed." if node.side == "encoder" else "tgt_embed."
            names = [n for n in result.trace.names() if n.startswith(prefix)]
            return names[-1] if names else None
        if node.kind == "logit":
            return "generator.logits" if result.trace.find("generator.logits") is not None else None
        if not node.step:
            return None
        if node.kind == "feature":
            return feature_step(result.trace, result.bundle, node.step, self.built.ask.choice, self.main.dictionaries)
        return node.step

    def go_to_step(self) -> None:
        """Show the selected node's step in the Step view."""
        from .step_view import StepView

        node = self.selected_node()
        step = self.node_step(node)
        if step is None:
            self._say("Click a node first: its step in the trace is where its numbers are.", error=True)
            return
        if not self.main.go_to_step(step):
            return
        view = next((v for v in self.main.views if isinstance(v, StepView)), None)
        if view is not None:
            self.main.tabs.setCurrentWidget(view)
        where = f"feature {node.feature}, position {node.position}" if node.kind == "feature" else \
            f"position {node.position}"  # fmt: skip
        self.main.show_message(f"{step}: the graph's {node.kind} node is {where} there.")

    # --- progress, cancel, status ------------------------------------------------------------------------------------

    def _working(self, text: str) -> None:
        self.progress.setRange(0, 0)
        self.progress.setFormat("")
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._say(text)

    def _progressed(self, *news) -> None:
        if len(news) == 2 and all(isinstance(n, int) for n in news):  # the cards: (inputs read, all inputs)
            self.progress.setRange(0, news[1])
            self.progress.setValue(news[0])
            self.progress.setFormat("input %v of %m")
        elif news:
            self.progress.setRange(0, 0)
            self.progress.setFormat(str(news[0]))

    def _idle(self) -> None:
        if self._build_jobs.busy() or self._layout_jobs.busy() or self._card_jobs.busy():
            return
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)

    def cancel(self) -> None:
        """Stop what is being made (its result is dropped when it ends); the graph drawn, if any, stays."""
        building = self._build_jobs.busy()
        for jobs in (self._build_jobs, self._layout_jobs, self._card_jobs):
            jobs.cancel()
        self._prune_timer.stop()
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        if building:
            self._asked = None  # Build (or the next change) asks again
            self._say("Cancelled; nothing new is drawn. Build builds the graph again.")
        else:
            self._say("Cancelled.")

    def _say(self, text: str, error: bool = False) -> None:
        self.status.label.setStyleSheet("color: #b00020; font-weight: bold;" if error else "")
        self.status.setText(text)

    def _show_body(self, shown: bool, text: str = "") -> None:
        self.split.setVisible(shown)
        self.empty.setVisible(not shown)
        if text:
            self.empty.setText(text)
        self._set_enabled()

    def _set_enabled(self) -> None:
        has = self.built is not None
        node = self.selected_node() if has else None
        for w in (self.slider, self.export_button, self.group_button, self.ungroup_button):
            w.setEnabled(has)
        self.card_button.setEnabled(node is not None and node.kind == "feature")
        self.step_button.setEnabled(node is not None)

    # --- exports -----------------------------------------------------------------------------------------------------

    def current_picture(self):
        """fmt → the picture's bytes (.png, .svg, .pdf), drawn from the layout shown; None before a graph is drawn.
        File › Export › Current view and the clipboard use it (app/export/actions.py)."""
        if self.built is None:
            return None
        from ..export.graph_render import graph_bytes

        layout = self.built.layout
        return lambda fmt: graph_bytes(layout, fmt)

    def export_picture(self, path: str | Path) -> Path:
        """Write the graph shown to `path` (.png, .svg or .pdf)."""
        from ..export.graph_render import save_graph

        if self.built is None:
            raise UserError("There is no graph to export yet; run a model with transcoders first.")
        return save_graph(self.built.layout, path)

    def export_json(self, path: str | Path) -> Path:
        """Write what `scratchformer graph --json` prints for the graph shown (at the slider's pruning), with its
        supernodes, to `path`."""
        if self.built is None:
            raise UserError("There is no graph to export yet; run a model with transcoders first.")
        payload = graph_payload(self.built.result, self.built.kept, self.built.layout.groups)
        path = Path(path)
        atomic_write_bytes(path, (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8"), overwrite=True)
        return path

    def _stem(self) -> str:
        g = self.built.result.graph if self.built is not None else None
        return f"graph-{self.main.current_bundle().name}-position-{g.position}" if g is not None else "graph"

    def _export_picture_dialog(self) -> None:
        save_numbers(self.main, "Export the graph", f"{self._stem()}.png", "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)",
                     self.export_picture, ("png", "svg", "pdf"))  # fmt: skip

    def _export_json_dialog(self) -> None:
        save_numbers(self.main, "Export the graph as JSON", f"{self._stem()}.json", "JSON (*.json)", self.export_json,
                     ("json",))  # fmt: skip

    def _export_card_dialog(self) -> None:
        from ..export.card_render import save_card

        if self.card.plot is None:
            return
        save_numbers(self.main, "Export the feature card", "feature-card.png", "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)",
                     lambda path: save_card(self.card.plot, path), ("png", "svg", "pdf"))  # fmt: skip

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

    # --- the window's hooks ------------------------------------------------------------------------------------------

    def is_busy(self) -> bool:
        return (self._build_jobs.busy() or self._layout_jobs.busy() or self._card_jobs.busy()
                or self._prune_timer.isActive())  # fmt: skip

    def shutdown(self) -> None:
        self._closing = True
        self._prune_timer.stop()
        self.plot.shutdown()
        for jobs in (self._build_jobs, self._layout_jobs, self._card_jobs):
            jobs.shutdown()

    def view_title(self) -> str:
        return self.built.layout.title if self.built is not None else self.title

    def explain_facts(self) -> dict:
        built = self.built
        if built is None:
            return {}
        g, r = built.result.graph, built.result
        return {"graph": f"The logit of “{g.token}” ({float(g.real[g.logit_index]):.3f}) at decoder position "
                         f"{g.position}; {int(built.kept.nodes.sum())} of {len(g.nodes)} nodes kept at "
                         f"{built.threshold:.0%} carry {100 * built.kept.kept_influence:.1f} % of the influence; "
                         f"replacement score {r.replacement:.3f}, completeness {r.completeness:.3f}."}
