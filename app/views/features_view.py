"""Features: this run read through an attached sparse dictionary (Run › Attach dictionary…, `gui --dictionary`).

On the left, each token of the run with its strongest features (from the trace's `<step>.dict.features` step);
click a feature for its card on the right: the corpus's top activating contexts with the firing tokens shaded, the
histogram of its activations and its density, and the output tokens its decoder direction pushes up and down
(scratchformer.features.cards). Every feature's card is made in one pass over the corpus, in a job with a progress
bar and a Cancel (app/work/jobs.py), and kept on disk beside the dictionary; the table is made in a job too. Clamp
to 0 or to a value reruns the run with that feature clamped; the Compare tab then shows before and after.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.features.activations import default_corpus
from scratchformer.features.cards import MAX_INPUTS, CardSet, cards_for, dictionary_steps, strongest_per_token
from scratchformer.plotdata.feature_cards import card_plot

from ..work.jobs import JobRunner
from .base import View, placeholder
from .feature_card import CardScroll, CardWidget

TOP = 5  # features listed per token


def find_dictionary(bundle, folders: list[str], step: str):
    """(dictionary, folder) of the attached folder that reads `step` in this model (run in a job: it reads files)."""
    from scratchformer.features.folder import hook_step, load
    from scratchformer.features.points import readable_steps

    readable = readable_steps(bundle.model)
    for folder in folders:
        d = load(folder)
        if hook_step(bundle.model, d.info.at, readable) == step:
            return d, folder
    raise UserError(f"No attached dictionary reads {step}; attach it again (Run › Attach dictionary…).")


class FeaturesView(View):
    title = "Features"
    tooltip = "This run's strongest features of an attached sparse dictionary, and each feature's card"

    def __init__(self, window) -> None:
        super().__init__(window)
        self.rows = []  # this run's TokenFeatures of the dictionary shown
        self.cards: dict[tuple, CardSet] = {}  # (folder, corpus, model) → every feature's card
        self.feature: int | None = None
        self.max_inputs = MAX_INPUTS  # inputs of the corpus the cards read
        self._table_jobs = JobRunner("scratchformer-features-table", latest_only=True)
        self._card_jobs = JobRunner("scratchformer-feature-cards", latest_only=True)
        layout = QVBoxLayout(self)
        self.empty = placeholder("No dictionary is attached. Run › Attach the bundled dictionary reads en-hi's last "
                                 "decoder layer through the SAE it ships with; Run › Attach dictionary… opens any "
                                 "folder of a sparse dictionary (SAELens's layout, e.g. one made by `scratchformer "
                                 "features train`). Its features then show here, token by token.")  # fmt: skip
        layout.addWidget(self.empty)
        self.body = QWidget()
        layout.addWidget(self.body, 1)
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Dictionary on"))
        self.step_combo = QComboBox()
        self.step_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        bar.addWidget(self.step_combo, 1)
        bar.addWidget(QLabel("Cards over corpus"))
        self.corpus_edit = QLineEdit()
        self.corpus_edit.setPlaceholderText("task:en-hi, or a text / JSONL / CSV file")
        self.corpus_edit.editingFinished.connect(self._corpus_changed)
        bar.addWidget(self.corpus_edit, 1)
        body.addLayout(bar)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        body.addWidget(self.status)
        split = QSplitter(Qt.Orientation.Vertical)  # the tokens above the card: the card gets the width
        self.table = QTableWidget(0, 2 + TOP)
        self.table.setHorizontalHeaderLabels(["#", "token"] + [f"feature {i + 1}" for i in range(TOP)])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.cellClicked.connect(self._cell_clicked)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._table_menu)
        split.addWidget(self.table)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        progress_row = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        progress_row.addWidget(self.progress, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel_cards)
        progress_row.addWidget(self.cancel_button)
        rl.addLayout(progress_row)
        clamp_row = QHBoxLayout()
        self.clamp_zero = QPushButton("Clamp to 0")
        self.clamp_zero.setToolTip("Run again with this feature set to 0 at every position (ablation)")
        self.clamp_zero.clicked.connect(lambda: self.clamp(0.0))
        self.clamp_value = QDoubleSpinBox()
        self.clamp_value.setRange(-1000.0, 1000.0)
        self.clamp_value.setDecimals(2)
        self.clamp_value.setValue(5.0)
        self.clamp_button = QPushButton("Clamp to value")
        self.clamp_button.setToolTip("Run again with this feature set to the value at every position (steering)")
        self.clamp_button.clicked.connect(lambda: self.clamp(self.clamp_value.value()))
        self.unclamp = QPushButton("Clear clamps")
        self.unclamp.clicked.connect(lambda: self.main.set_clamps([]))
        for w in (self.clamp_zero, self.clamp_value, self.clamp_button, self.unclamp):
            clamp_row.addWidget(w)
        clamp_row.addStretch(1)
        rl.addLayout(clamp_row)
        self.card = CardWidget()
        self.card.export_requested.connect(self.ask_export_card)
        rl.addWidget(CardScroll(self.card), 1)
        split.addWidget(right)
        split.setSizes([170, 600])
        body.addWidget(split, 1)
        self.body.setVisible(False)
        self._set_clamp_enabled()

    # --- the run's table ---------------------------------------------------------------------------------------

    def refresh(self) -> None:
        result = self.main.current_result()
        steps = dictionary_steps(result.trace) if result is not None else []
        self.empty.setVisible(not steps)
        self.body.setVisible(bool(steps))
        if not steps:
            self.rows = []
            return
        if [self.step_combo.itemText(i) for i in range(self.step_combo.count())] != steps:
            self.step_combo.blockSignals(True)
            self.step_combo.clear()
            self.step_combo.addItems(steps)
            self.step_combo.blockSignals(False)
        if not self.corpus_edit.text().strip():
            self.corpus_edit.setText(self.default_corpus(result.bundle))
        step, batch, trace = self.step_combo.currentText(), self.main.current_batch(), result.trace
        self._table_jobs.start(lambda job: strongest_per_token(trace, step, batch, TOP),
                               on_result=lambda rows: self._show_rows(rows, result), on_error=self._say)  # fmt: skip

    @staticmethod
    def default_corpus(bundle) -> str:
        return default_corpus(bundle.name) or ""

    def _show_rows(self, rows, result) -> None:
        if result is not self.main.current_result():
            return
        self.rows = rows
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(str(row.position + 1)))
            self.table.setItem(r, 1, QTableWidgetItem(row.token))
            for c in range(TOP):
                text = f"{row.features[c][0]}  ({row.features[c][1]:.2f})" if c < len(row.features) else ""
                item = QTableWidgetItem(text)
                if c < len(row.features):
                    item.setData(Qt.ItemDataRole.UserRole, row.features[c][0])
                    item.setToolTip(f"feature {row.features[c][0]} = {row.features[c][1]:.4g} at "
                                    f"{row.token!r}; click for its card")  # fmt: skip
                self.table.setItem(r, 2 + c, item)
        self.table.resizeColumnsToContents()
        clamps = "; ".join(c.note() for c in self.main.clamps)
        self._say(f"{len(rows)} tokens; click a feature for its card." + (f" Clamped: {clamps}." if clamps else ""))

    def _cell_clicked(self, row: int, column: int) -> None:
        item = self.table.item(row, column)
        feature = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if feature is not None:
            self.show_feature(int(feature))

    # --- cards -----------------------------------------------------------------------------------------------

    def _key(self) -> tuple | None:
        result = self.main.current_result()
        corpus = self.corpus_edit.text().strip()
        if result is None or not self.step_combo.currentText():
            return None
        return (self.step_combo.currentText(), tuple(self.main.dictionaries), corpus, result.bundle.name,
                self.max_inputs)  # fmt: skip

    def show_feature(self, feature: int) -> None:
        """Show feature `feature`'s card; every card of the dictionary is made first when they are not at hand."""
        self.feature = feature
        self._set_clamp_enabled()
        key = self._key()
        if key is None:
            return
        if not key[2]:
            self._say("Type a corpus to read the cards from (task:NAME, or a text, JSONL or CSV file).")
            return
        if key in self.cards:
            self._draw_card()
            return
        result = self.main.current_result()
        step, folders, corpus, n = key[0], list(key[1]), key[2], key[4]

        def work(job):
            d, folder = find_dictionary(result.bundle, folders, step)
            return cards_for(result.bundle, d, step, corpus, folder, n, progress=job.progress, cancelled=job.cancelled)

        self._card_jobs.start(work, on_result=lambda cards: self._cards_made(key, cards), on_error=self._cards_failed,
                              on_progress=self._progress, doing="Making the feature cards")  # fmt: skip
        self.progress.setRange(0, 0)
        self.progress.setFormat("reading the corpus…")
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._say(f"Making every feature's card over {corpus} (once; they are kept beside the dictionary)…")

    def _progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat("input %v of %m")

    def _cards_made(self, key: tuple, cards: CardSet | None) -> None:
        self._idle()
        if cards is None:
            return
        self.cards[key] = cards
        self._say(f"Cards over {cards.inputs} inputs ({cards.tokens} tokens) of {cards.corpus}.")
        if key == self._key():
            self._draw_card()

    def _cards_failed(self, message: str) -> None:
        self._idle()
        self._say(message)

    def cancel_cards(self) -> None:
        """Stop making the cards (between two micro-batches); nothing is written."""
        self._card_jobs.cancel()
        self._idle()
        self._say("Cancelled; no card was made.")

    def _idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)

    def _draw_card(self) -> None:
        key = self._key()
        if key not in self.cards or self.feature is None:
            return
        try:
            self.card.show_card(card_plot(self.cards[key], self.feature))
        except UserError as exc:
            self._say(str(exc))

    def _corpus_changed(self) -> None:
        if self.feature is not None and self.body.isVisible():
            self.show_feature(self.feature)

    def current_cards(self) -> CardSet | None:
        key = self._key()
        return self.cards.get(key) if key is not None else None

    # --- clamping --------------------------------------------------------------------------------------------

    def _set_clamp_enabled(self) -> None:
        for w in (self.clamp_zero, self.clamp_button):
            w.setEnabled(self.feature is not None)
        self.clamp_zero.setText("Clamp to 0" if self.feature is None else f"Clamp {self.feature} to 0")

    def clamp(self, value: float) -> None:
        """Run again with the feature shown set to `value` at every position (with the other clamps kept)."""
        from scratchformer.features.attach import Clamp

        step = self.step_combo.currentText()
        if self.feature is None or not step:
            return
        kept = [c for c in self.main.clamps if not (c.step == step and c.feature == self.feature)]
        self.main.set_clamps([*kept, Clamp(step, self.feature, float(value))])

    # --- exports ---------------------------------------------------------------------------------------------

    def export_card(self, path: str) -> str:
        """Write the card shown to `path` (.png, .svg or .pdf); the path written."""
        from ..export.card_render import save_card

        if self.card.plot is None:
            raise UserError("No card is shown; click a feature first.")
        return str(save_card(self.card.plot, path))

    def export_csv(self, path: str) -> str:
        """Write this run's strongest features per token (one row per token) to `path`; the path written."""
        from scratchformer.exporting.feature_table import write_token_features

        if not self.rows:
            raise UserError("There is no token table to export; attach a dictionary and run first.")
        return str(write_token_features(path, self.rows))

    def ask_export_card(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the feature card", f"feature-{self.feature}.png",
                                              "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)")  # fmt: skip
        self._export(self.export_card, path)

    def _table_menu(self, pos) -> None:
        menu = QMenu(self)
        menu.addAction("Export the per-token features (CSV)…", self.ask_export_csv)
        menu.popup(self.table.viewport().mapToGlobal(pos))

    def ask_export_csv(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the per-token features", "features.csv",
                                              "CSV tables (*.csv)")  # fmt: skip
        self._export(self.export_csv, path)

    def _export(self, write, path: str) -> None:
        if not path:
            return
        try:
            self.main.show_message(f"Wrote {write(path)}.")
        except UserError as exc:
            self.main.show_error(str(exc))

    # --- the window's hooks ----------------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        self.status.setText(text)

    def is_busy(self) -> bool:
        return self._table_jobs.busy() or self._card_jobs.busy()

    def shutdown(self) -> None:
        self._table_jobs.shutdown()
        self._card_jobs.shutdown()
