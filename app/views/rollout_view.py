"""Attention rollout and flow (Abnar & Zuidema 2020) beside the raw attention of the last layer they end in, with
a number for how far the two agree: does the last layer's attention already say where the output's information
came from? Numbers: scratchformer.analyses.rollout; maps, agreement and CSV: scratchformer.plotdata.analyses."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QSplitter

from scratchformer.plotdata.analyses import rollout_beside_raw, rollout_csv

from ..widgets.heatmap import HeatmapWidget
from .analysis_base import AnalysisView

WHICH = {"cross": "decoder → source", "encoder": "encoder", "decoder": "decoder"}


class RolloutView(AnalysisView):
    title = "Rollout"
    tooltip = "Attention rollout or flow: each position's relevance over the input tokens, beside raw attention"
    explains = "rollout"
    empty_text = "Run a model with attention to follow it back to the input tokens."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.method = QComboBox()
        self.method.addItem("Rollout", "rollout")
        self.method.addItem("Flow", "flow")
        self.method.setToolTip("Rollout multiplies the layers' attention (with the residual as 0.5·I); flow solves a "
                               "max-flow problem per pair of positions")  # fmt: skip
        self.method.currentIndexChanged.connect(lambda _i: self.recompute())
        self.which = QComboBox()
        self.which.setToolTip("Which attention to follow back")
        self.which.currentIndexChanged.connect(lambda _i: self._redraw())
        for label, widget in (("Method", self.method), ("Follow", self.which)):
            self.bar.addWidget(QLabel(label))
            self.bar.addWidget(widget)
        self.agreement = QLabel()
        self.agreement.setToolTip("1 − the mean total variation distance between the rows of the two maps: 1 when "
                                  "the raw attention already says what rollout says, 0 when they share nothing")
        self.bar.addWidget(self.agreement)
        self.finish_bar()
        self.which.setMinimumContentsLength(15)  # "decoder → source" whole
        self.body = QSplitter(Qt.Orientation.Horizontal)
        self.left, self.right = HeatmapWidget(), HeatmapWidget()
        for w in (self.left, self.right):
            self.connect_heatmap(w)
            self.body.addWidget(w)
        self.layout_.addWidget(self.body, 1)
        self.maps: list = []
        self.pictures: dict = {}  # which → (rollout map, raw map, agreement), made with the rollout
        self.show_body(False, self.empty_text)

    def show_body(self, shown: bool, text: str = "") -> None:
        super().show_body(shown, text)
        self.body.setVisible(shown)

    def request(self, result):
        return (id(result), self.main.current_batch(), self.method.currentData())

    def compute(self, result, key: tuple, job):
        from scratchformer.analyses import rollout

        _, batch, method = key
        value = rollout.compute(result.bundle, result.trace, method, batch)
        # the raw maps beside it read attention steps a lazy trace may recompute: here, off the UI thread too
        pictures = {which: rollout_beside_raw(value, result.trace, which, batch=batch) for which in WHICH
                    if getattr(value, which) is not None}  # fmt: skip
        return value, pictures

    def draw(self, value) -> None:
        self.value, self.pictures = value
        value = self.value
        chosen = self.which.currentData()
        self.which.blockSignals(True)
        self.which.clear()
        for key, label in WHICH.items():
            if getattr(value, key) is not None:
                self.which.addItem(label, key)
        index = self.which.findData(chosen)
        self.which.setCurrentIndex(max(index, 0))
        self.which.blockSignals(False)
        self._redraw()

    def _redraw(self) -> None:
        which = self.which.currentData()
        if self.value is None or which is None:
            return
        left, right, agree = self.pictures[which]
        self.maps = [left, right]
        self.left.set_heatmap(left)
        self.right.set_heatmap(right)
        self.agreement.setText(f"agreement {agree:.2f}")
        self.caption.setText(f"{left.title}: each row's relevance over the input tokens, every layer followed back; "
                             f"beside it what the last layer's heads (averaged) attend to. Agreement {agree:.2f} "
                             "(1 = the same rows).")  # fmt: skip

    def csv_text(self) -> str:
        return rollout_csv(self.value) if self.value is not None else ""

    def current_heatmaps(self) -> list:
        return list(self.maps) if self.value is not None else []
