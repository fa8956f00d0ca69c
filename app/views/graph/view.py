"""Graph: the attribution graph of one prediction of the current run through transcoder features (issue 45;
scratchformer.graph, docs/graphs.md) — which input tokens and which features, at which layers and positions, made
the logit, and through which others.

The graph is built in a job (app/work/jobs.py: progress, Cancel, the latest request only) through the model's
bundled transcoder set, the dictionaries attached to the run (Run › Attach dictionary…) or a set picked with
Transcoders…; it is drawn from scratchformer.plotdata.graph_layout (the export draws the same layout): x by
position (an encoder-decoder's source on the left, its decoder input on the right), y by layer, markers by influence,
edges by weight. The Nodes and Edges sliders prune the same graph again (the full adjacency is kept, so nothing is
recomputed but the pruning, in a job). Hover a node for its numbers and its strongest incoming contributions; click
a feature to see its card and to go to its step in the trace; Ctrl-click or Shift-drag to select nodes, then
Group… draws them as one named supernode whose edges are the sums of its members'.

This module holds the view's widgets, the build and its progress; its parts are mixins in modules of their own
beside it: source (which graph), prune (pruning and supernodes), select (drawing, hover, selection), card (a
feature's card, a node's step), qk (why attention moved it, with its panel in qk_panel), export (the picture and the
JSON) and progress (the progress bar, Cancel and the status line); work holds what the jobs do.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
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
    QVBoxLayout,
    QWidget,
)

from scratchformer.graph.influence import EDGE_THRESHOLD, NODE_THRESHOLD
from scratchformer.plotdata.graph_layout import Supernode

from ...widgets.graph_plot import GraphPlot
from ...work.jobs import JobRunner
from ..base import View, placeholder
from ..feature_card import CardScroll, CardWidget
from .card import GraphCardPart
from .export import GraphExports
from .progress import GraphProgress, StatusLine
from .prune import GraphPruning
from .qk import GraphQKPart
from .qk_panel import QKPanel, attentions_of
from .select import HINT, GraphSelection
from .source import GraphSource
from .work import Ask, Built, build, graph_changes

PRUNE_AFTER_MS = 150  # the slider prunes again this long after it stops moving
NO_RUN = "Run a model: its graph explains one prediction of the run through transcoder features."


def ask_name(parent, suggested: str) -> str | None:
    """The supernode's name (replaceable in tests); None when cancelled."""
    name, ok = QInputDialog.getText(parent, "Group into a supernode", "Name of the supernode:", text=suggested)
    return name if ok else None


class GraphView(GraphSource, GraphPruning, GraphSelection, GraphCardPart, GraphQKPart, GraphExports, GraphProgress,
                View):  # fmt: skip
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
        self._qk_jobs = JobRunner("scratchformer-graph-qk", latest_only=True)
        self._qk_replacement: tuple | None = None  # (GraphResult, the replacement model made again for its splits)
        self.edge: tuple[str, str] | None = None  # (source id, target id) of the drawn edge picked
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
        self.position_combo.activated.connect(self._position_picked)
        self.token_combo = QComboBox()
        self.token_combo.setToolTip("The token whose logit is explained: the most likely one, or another of the "
                                    "most likely ones at that position (listed once a graph is built)")  # fmt: skip
        self.token_combo.addItem("most likely token", None)
        self.token_combo.activated.connect(self._token_picked)
        self.versus_combo = QComboBox()
        self.versus_combo.setToolTip("Explain a logit difference: the explained token's logit minus this token's, "
                                     "why the model prefers the one to the other (— for the logit alone)")  # fmt: skip
        self.versus_combo.addItem("—", None)
        self.versus_combo.activated.connect(lambda _i: self.refresh())
        for combo in (self.choice_combo, self.position_combo, self.token_combo, self.versus_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(12 if combo in (self.token_combo, self.versus_combo) else 7)
        self.build_button = QPushButton("Build")
        self.build_button.setToolTip("Build the graph again (after a Cancel)")
        self.build_button.clicked.connect(self.rebuild)
        for w in (self.choice_combo, self.pick_button, QLabel("at"), self.position_combo, self.build_button):
            row.addWidget(w)
        row.addStretch(1)
        row = QHBoxLayout()  # which logit: a row of its own, so the view still fits a 1024-pixel window
        layout.addLayout(row)
        for w in (QLabel("Explaining"), self.token_combo, QLabel("versus"), self.versus_combo):
            row.addWidget(w)
        row.addStretch(1)
        row = QHBoxLayout()
        layout.addLayout(row)
        row.addWidget(QLabel("Nodes"))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(50, 100)
        self.slider.setValue(round(100 * NODE_THRESHOLD))
        self.slider.setMinimumWidth(70)
        self.slider.setToolTip("Pruning: keep the nodes that carry this share of the influence on the logit; the "
                               "graph is not built again")  # fmt: skip
        self.slider.valueChanged.connect(self._slider_moved)
        self.threshold_label = QLabel(f"{self.slider.value()} %")
        self.edge_slider = QSlider(Qt.Orientation.Horizontal)
        self.edge_slider.setRange(50, 100)
        self.edge_slider.setValue(round(100 * EDGE_THRESHOLD))
        self.edge_slider.setMinimumWidth(70)
        self.edge_slider.setToolTip("Pruning: among the kept nodes, keep the edges that carry this share of the "
                                    "influence on the logit (an edge's share of its target's inputs times the "
                                    "target's influence); the graph is not built again")  # fmt: skip
        self.edge_slider.valueChanged.connect(self._edge_slider_moved)
        self.edge_label = QLabel(f"{self.edge_slider.value()} %")
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
        for w in (self.slider, self.threshold_label, QLabel("Edges"), self.edge_slider, self.edge_label,
                  self.group_button, self.ungroup_button, self.export_button):  # fmt: skip
            row.addWidget(w)
        row.setStretch(1, 1)
        row.setStretch(4, 1)
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
        self.plot.edge_clicked.connect(self._edge_clicked)
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
        self.qk_button = QPushButton("Why attention?")
        self.qk_button.setToolTip("Split an attention head's score into what the graph's nodes put into its query and "
                                  "its key: at the selected edge (its target's position against its source's) or "
                                  "node (its position against the key the head attends to most)")  # fmt: skip
        self.qk_button.clicked.connect(self.why_attention)
        for w in (self.card_button, self.step_button, self.qk_button):
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
        self.qk_panel = QKPanel()
        self.qk_panel.setVisible(False)
        self.qk_panel.changed.connect(self.split_qk)
        self.qk_panel.node_picked.connect(self.pick_node)
        self.qk_panel.export_requested.connect(self._export_qk)
        self.qk_panel.close_requested.connect(lambda: self._show_qk(False))
        bl.addWidget(self.qk_panel, 1)
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
                  int(self.position_combo.currentData()), self.threshold(), self.edge_threshold(),
                  *graph_changes(result), token=self.token_combo.currentData(),
                  versus=self.versus_combo.currentData())  # fmt: skip
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
            self.groups, self.selected, self.edge = [], set(), None
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
        self.forget_qk()  # a new graph: the replacement kept for the splits was the last one's
        self.built = built
        self.qk_panel.set_graph(attentions_of(built.ask.bundle.model), built.result.tokens, built.result.graph.position)
        self._fill_tokens(built)
        self._show_body(True)
        self._draw(keep_range=same_view)
        if (built.threshold, built.edge_threshold) != (self.threshold(), self.edge_threshold()):
            self._prune_now()  # a slider moved while it was built

    def _failed(self, sentence: str) -> None:
        self._idle()
        self._forget()
        self._show_body(False, sentence)
        self._say(sentence, error=True)

    def _forget(self) -> None:
        self.built = None
        self.forget_qk()
        self._asked = None
        self.plot.clear_graph()
        self.card_scroll.setVisible(False)
        self.details_scroll.setMaximumHeight(16_777_215)  # (Qt's largest): the text has the room again
        self._card_node = None
        self._set_enabled()

    def _group_dialog(self) -> None:
        name = ask_name(self, f"group {len(self.groups) + 1}")
        if name is not None:
            self.group_selected(name)

    def _show_body(self, shown: bool, text: str = "") -> None:
        self.split.setVisible(shown)
        self.empty.setVisible(not shown)
        if text:
            self.empty.setText(text)
        self._set_enabled()

    def _set_enabled(self) -> None:
        has = self.built is not None
        node = self.selected_node() if has else None
        for w in (self.slider, self.edge_slider, self.export_button, self.group_button, self.ungroup_button):
            w.setEnabled(has)
        self.card_button.setEnabled(node is not None and node.kind == "feature")
        self.step_button.setEnabled(node is not None)
        self.qk_button.setEnabled(has)

    # --- the window's hooks ------------------------------------------------------------------------------------------

    def is_busy(self) -> bool:
        return (self._build_jobs.busy() or self._layout_jobs.busy() or self._card_jobs.busy() or self._qk_jobs.busy()
                or self._prune_timer.isActive())  # fmt: skip

    def shutdown(self) -> None:
        self._closing = True
        self._prune_timer.stop()
        self.plot.shutdown()
        for jobs in (self._build_jobs, self._layout_jobs, self._card_jobs, self._qk_jobs):
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
