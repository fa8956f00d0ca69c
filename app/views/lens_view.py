"""The logit lens: every point of the decoder's residual stream (after the embeddings and after each sublayer)
read through the model's final norm and output layer. The map gives, per point and decoder position, the
probability of the token the model finally emits there; the table lists each point's top tokens at the position
the scrubber picks. An encoder-only model with a masked-LM head is read the same way over its encoder, per source
position, through that head. Numbers: scratchformer.analyses.lens; maps and CSV: scratchformer.plotdata.analyses."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView, QLabel, QSlider, QSplitter, QTableWidget, QTableWidgetItem

from scratchformer.plotdata import abbreviate
from scratchformer.plotdata.analyses import lens_csv, lens_map, lens_table

from ..widgets.heatmap import HeatmapWidget
from .analysis_base import AnalysisView


class LensView(AnalysisView):
    title = "Logit lens"
    tooltip = ("What the model would predict at every point of the decoder's residual stream (an encoder's, "
               "through its masked-LM head)")
    explains = "lens"
    empty_text = "Run a model with an output layer to read its residual stream through it."
    SIDES = {"decoder": "Decoder position", "encoder": "Source position"}

    def __init__(self, window) -> None:
        super().__init__(window)
        self.side_label = QLabel(self.SIDES["decoder"])
        self.bar.addWidget(self.side_label)
        self.scrubber = QSlider(Qt.Orientation.Horizontal)
        self.scrubber.setToolTip("Which position the table lists (a click on a map column picks it too)")
        self.scrubber.setMinimumWidth(120)
        self.scrubber.valueChanged.connect(lambda _v: self._fill_table())
        self.bar.addWidget(self.scrubber, 1)
        self.position_label = QLabel()
        self.bar.addWidget(self.position_label)
        self.finish_bar()
        self.body = QSplitter(Qt.Orientation.Vertical)
        self.map = HeatmapWidget()
        self.connect_heatmap(self.map)
        self.map.clicked.connect(lambda _r, c: self.scrubber.setValue(c))
        self.body.addWidget(self.map)
        self.table = QTableWidget()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.body.addWidget(self.table)
        self.layout_.addWidget(self.body, 1)
        self.show_body(False, self.empty_text)

    def show_body(self, shown: bool, text: str = "") -> None:
        super().show_body(shown, text)
        self.body.setVisible(shown)

    def compute(self, result, key: tuple, job):
        from scratchformer.analyses import lens  # the analyses load with the view's first use, not at launch

        return lens.compute(result.bundle, result.trace, batch=key[1])

    def draw(self, value) -> None:
        self.map.set_heatmap(lens_map(value))
        self.scrubber.blockSignals(True)
        self.scrubber.setRange(0, max(len(value.positions) - 1, 0))
        self.scrubber.setValue(len(value.positions) - 1)
        self.scrubber.blockSignals(False)
        self.side_label.setText(self.SIDES[value.stack])
        last = value.final_probs[-1]
        if value.stack == "encoder":
            text = (f"{len(value.steps)} points of the encoder × {len(value.positions)} source positions, each read "
                    "through the masked-LM head. The last point is the head's own output, its guess for the token "
                    f"at each position (P of its choice {float(last.min()):.3g} … {float(last.max()):.3g}); earlier "
                    "rows show how soon each guess appears.")  # fmt: skip
        else:
            text = (f"{len(value.steps)} points × {len(value.positions)} decoder positions. The last point is the "
                    f"model's own output (P of its choice {float(last.min()):.3g} … {float(last.max()):.3g}); "
                    "earlier rows show how soon each choice appears.")  # fmt: skip
        self.caption.setText(text + (" " + " ".join(value.notes) if value.notes else ""))
        self._fill_table()

    def _fill_table(self) -> None:
        lens = self.value
        if lens is None:
            return
        j = self.scrubber.value()
        reads, emits = abbreviate(lens.positions[j], 12), abbreviate(lens.emitted[j], 12)
        if lens.stack == "encoder":
            self.position_label.setText(f"{j}: holds “{reads}”, the head predicts “{emits}”")
        else:
            self.position_label.setText(f"{j}: reads “{reads}”, emits “{emits}”")
        rows = lens_table(lens, j)
        k = len(rows[0][2]) if rows else 0
        self.table.setUpdatesEnabled(False)
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(3 + k)
        chosen = "P(predicted)" if lens.stack == "encoder" else "P(emitted)"
        self.table.setHorizontalHeaderLabels(["point", chosen, "rank"] + [f"#{i + 1}" for i in range(k)])
        for i, (label, step, top, p, rank) in enumerate(rows):
            cells = [label, f"{p:.3g}", str(rank)] + [f"{abbreviate(t, 12)}  {q:.3g}" for t, q in top]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(step if c == 0 else text)
                self.table.setItem(i, c, item)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setUpdatesEnabled(True)

    def csv_text(self) -> str:
        return lens_csv(self.value) if self.value is not None else ""

    def current_heatmaps(self) -> list:
        return [self.map.heatmap] if self.value is not None and self.map.heatmap is not None else []
