"""Patching: which heads, positions and feed-forwards carry the clean answer (activation patching, attribution
patching beside it, path patching), for the current run's model and sentence.

A corrupted input (one word of the source changed, or a typed sentence of the same token length) gives a second
run; each component's activation is copied from the clean run into the corrupted one and the metric at the last
decoder position says how much of the clean answer comes back: effect = (m_patched − m_corrupt) / (m_clean −
m_corrupt). The sweep runs in a job (app/work/jobs.py: progress, Cancel, the latest request only); numbers:
scratchformer.analyses.sweep, maps, CSV and the explanation: scratchformer.plotdata.sweep.

A click on a cell runs that cell's patched run in the window — the corrupted input with the cell's activation
taken from the clean run (scratchformer.patching.replay) — and opens Compare on it, its two sides named for what
they are: the corrupted run and the patched run. The view then reads m back from the patched run's own logits and
sets it beside the cell's number, so every number on the map can be traced to the run that made it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from scratchformer.analyses.sweep import checked_rows
from scratchformer.errors import UserError
from scratchformer.exporting.files import write_csv
from scratchformer.patching.attribution import DISAGREE
from scratchformer.patching.replay import cell_patch, corrupted_inputs
from scratchformer.plotdata import Heatmap
from scratchformer.plotdata.sweep import explanation, head_maps, path_maps, point_maps, sweep_csv

from ..export.actions import save_numbers
from ..widgets.heatmap import HeatmapWidget
from ..widgets.memory_status import budget_bytes
from ..work.jobs import JobRunner
from ..work.worker import Sides
from .base import View, placeholder
from .patching_controls import PatchingControls
from .patching_work import Made, Replay, make_pairs_sweep, make_sweep, path_cell_patch, replayed_metric

MIN_ROW_PX = 6  # GPT-2 small's 144 heads per position: a map 974 pixels high, scrolled
MAP_CHROME_PX = 110  # a map widget's title (two lines), column axis and read-out line
MIN_MAP_PX = 120  # three rows of small maps (en-hi's heads, both methods) still fit a 900-pixel window
FAMILIES = (("heads", "heads"), ("residual stream", "resid"), ("feed-forward", "mlp"),
            ("path from the sender", "path"))  # fmt: skip
NO_PATH = ("Choose a sender head under Path and press Sweep: this map then shows the sender's path into every later "
           "head's q, k or v.")  # fmt: skip
ASK = ("Pick a word of the source and the word that replaces it (or type a corrupted sentence of the same token "
       "length), then press Sweep: every head, residual-stream point and feed-forward output is patched from the "
       "clean run into the corrupted one.")  # fmt: skip


def map_height(hm: Heatmap) -> int:
    """The least height of a map's widget: MIN_ROW_PX per row, plus its title, axes and read-out line."""
    return max(MIN_MAP_PX, hm.values.shape[0] * MIN_ROW_PX + MAP_CHROME_PX)


class PatchingView(View):
    title = "Patching"
    explains = "patching"
    tooltip = ("Activation patching from a clean run into a corrupted one: which heads, positions and feed-forwards "
               "bring the clean answer back")  # fmt: skip

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.controls = PatchingControls()
        self.controls.replacement.returnPressed.connect(self.sweep)
        self.controls.sentence.returnPressed.connect(self.sweep)
        layout.addWidget(self.controls)
        bar = QHBoxLayout()
        layout.addLayout(bar)  # before its widgets: each is then owned by the view at once (see PatchingControls)
        self.sweep_button = QPushButton("Sweep")
        self.sweep_button.setToolTip("Patch every component from the clean run into the corrupted one (in the "
                                     "background)")  # fmt: skip
        self.sweep_button.clicked.connect(self.sweep)
        self.pairs_button = QPushButton("Pairs file…")
        self.pairs_button.setToolTip("Sweep every pair of a JSONL or CSV pairs file (source, corrupt or corrupt_word, "
                                     "optional target, answer, wrong): the maps show each component's mean effect")
        self.pairs_button.clicked.connect(self._pairs_dialog)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.family = QComboBox()
        for text, data in FAMILIES:
            self.family.addItem(text, data)
        self.family.setToolTip("Which components' maps to show")
        self.family.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.family.setMinimumContentsLength(11)
        self.family.currentIndexChanged.connect(lambda _i: self._draw())
        self.top_k = QSpinBox()
        self.top_k.setRange(1, 100)
        self.top_k.setValue(10)
        self.top_k.setPrefix("top ")
        self.check_button = QPushButton("Check for real")
        self.check_button.setToolTip("Patch attribution patching's largest estimates (top k) for real and set the "
                                     "two side by side")  # fmt: skip
        self.check_button.clicked.connect(self.check_top)
        self.back_button = QPushButton("Back to clean")
        self.back_button.setToolTip("Run the input fields' sentence again, without the patch")
        self.back_button.clicked.connect(lambda: self.main.run())
        self.back_button.setVisible(False)
        self.save_button = QPushButton("Save CSV…")
        self.save_button.setToolTip("Every patched component's effect (and estimate) as a CSV file")
        self.save_button.clicked.connect(self._save_dialog)
        self.show_label = QLabel("Show:", self)
        for w in (self.sweep_button, self.show_label, self.family, self.top_k, self.check_button):
            bar.addWidget(w)
        bar.addStretch(1)
        bar.addWidget(self.save_button)
        state = QHBoxLayout()
        layout.addLayout(state)  # while a sweep runs: its progress and Cancel; on a patched run: the way back
        self.progress.setMaximumWidth(160)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        for w in (self.pairs_button, self.progress, self.cancel_button, self.back_button):  # (the bar above is full:
            state.addWidget(w)  # the view fits the 1024-pixel window's middle column)
        state.addWidget(self.status, 1)
        self.caption = QLabel("")
        self.caption.setWordWrap(True)
        self.caption.setStyleSheet("color: #333;")
        layout.addWidget(self.caption)
        self.replay_label = QLabel("")
        self.replay_label.setWordWrap(True)
        self.replay_label.setVisible(False)
        layout.addWidget(self.replay_label)
        self.empty = placeholder(ASK)
        layout.addWidget(self.empty)
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.scroll = QScrollArea()  # the maps fill the view; a tall one (GPT-2's 144 heads per position) scrolls
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(self.grid_host)
        layout.addWidget(self.scroll, 1)
        self.widgets: list[HeatmapWidget] = []
        self._places: dict[int, tuple | None] = {}  # widget → (row, column) in the grid
        self.maps: list[Heatmap] = []
        self.made: Made | None = None
        self._replay: Replay | None = None
        self._lookup: dict[tuple, tuple] = {}  # (step, head, position) → (grid, index) of the sweep
        self._jobs = JobRunner("scratchformer-patching", latest_only=True)  # a newer request cancels the older
        self._checks = JobRunner("scratchformer-patching-replay", latest_only=True)
        self.main.worker.worker.finished.connect(self._run_arrived)  # queued: the model thread emits it
        self._set_enabled()

    # --- the sweep ---------------------------------------------------------------------------------------------

    def clean_input(self, result) -> tuple:
        """(RunRequest, source, target, start_only) of the clean run to sweep: the window's run, or while the
        window shows one of this view's patched runs, the clean run of the sweep that made it."""
        like = result.request
        if like.prepared is not None and self.made is not None:
            a = self.made.ask
            return self.made.like, a.source, a.target, a.start_only
        if like.windows is not None or like.padded:
            raise UserError("A sweep compares two sentences: run one sentence, not a batch of windows or a padded "
                            "batch.")  # fmt: skip
        return like, like.source, like.target, like.start_only

    def sweep(self) -> None:
        """Start a sweep of the form's inputs (a newer one cancels this one)."""
        result = self.main.current_result()
        if result is None:
            self._say("Run a model first.", error=True)
            return
        try:
            like, source, target, start_only = self.clean_input(result)
            ask = self.controls.ask(source, target, start_only)
        except UserError as exc:
            self._say(str(exc), error=True)
            return
        bundle, budget = result.bundle, budget_bytes(self.main.settings)
        self._start(lambda job: make_sweep(bundle, ask, like, budget, job), self._made,
                    f"Patching every component of {bundle.name} from the clean run into the corrupted one…")

    def _pairs_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Sweep a pairs file", "", "Pairs (*.jsonl *.csv);;All files (*)")
        if path:
            self.sweep_pairs_file(path)

    def sweep_pairs_file(self, path: str) -> None:
        """Sweep every pair of the file at `path` with the form's metric, method and grid (in the background); the
        maps then show the mean effect over the pairs, and a click replays the cell on the first pair."""
        result = self.main.current_result()
        if result is None:
            self._say("Run a model first.", error=True)
            return
        like = result.request
        ask = self.controls.pairs_ask(like.start_only)
        bundle, budget = result.bundle, budget_bytes(self.main.settings)
        self._start(lambda job: make_pairs_sweep(bundle, path, ask, like, budget, job), self._made,
                    f"Patching every component of {bundle.name} for each pair of {Path(path).name}…")

    def check_top(self) -> None:
        made = self.made
        if made is None or made.sweep.method == "exact":
            self._say("Checking needs attribution patching's estimates: pick attribution or both, and sweep.",
                      error=True)  # fmt: skip
            return
        k, budget = self.top_k.value(), budget_bytes(self.main.settings)
        grids = [made.sweep.heads, made.sweep.positions, made.sweep.mlp]
        self._start(lambda job: checked_rows(made.pair, grids, k, budget),
                    lambda rows: self._checked(made, rows), f"Patching the {k} largest estimates for real…")

    def _start(self, work, done, text: str) -> None:
        self._jobs.start(work, on_result=done, on_error=self._failed, on_progress=self._progressed,
                         doing="The sweep")  # fmt: skip
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._say(text)

    def cancel(self) -> None:
        """Stop the sweep in progress (it ends between two batches of patched runs; its news is dropped)."""
        if self._jobs.busy():
            self._jobs.cancel()
            self._idle()
            self._say("Cancelled.")

    def _progressed(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat("batch %v of %m")

    def _idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)

    def _failed(self, sentence: str) -> None:
        self._idle()
        self._say(sentence, error=True)
        self.main.show_error(sentence)

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #b00020; font-weight: bold;" if error else "")
        self.status.setText(text)

    def _made(self, made: Made | None) -> None:
        self._idle()
        if made is None:
            return
        self.made = made
        s = made.sweep
        n = len(s.heads.components) + len(s.positions.components) + len(s.mlp.components)
        how = {"exact": "patched", "attribution": "estimated", "both": "patched and estimated"}[s.method]
        if made.pairs:
            self._say(f"{n} components {how} for each of {made.pairs} pairs of {Path(made.pairs_file).name} in "
                      f"{made.seconds:.2f} s; the maps show the mean effect. Hover a cell for it; click it to see the "
                      f"first pair's patched run (“{made.ask.source}” → “{made.text}”) in Compare.")  # fmt: skip
        else:
            self._say(f"{n} components {how} in {made.seconds:.2f} s: “{made.ask.source}” (clean) → “{made.text}” "
                      "(corrupted). Hover a cell for its effect; click it to see its patched run in Compare.")
        self._caption()
        self._draw()
        self.main.refresh_explanation()
        self.main.show_message(f"Patching sweep of {made.like.model}: {n} components in {made.seconds:.2f} s.")

    def _checked(self, made: Made, rows: list[dict]) -> None:
        self._idle()
        made.sweep.checked = rows
        if made is self.made:
            self._say(f"The {len(rows)} largest estimates patched for real; {sum(r['disagree'] for r in rows)} "
                      f"differ by more than {DISAGREE:g}.")  # fmt: skip
            self._caption()

    def _caption(self) -> None:
        s = self.made.sweep
        parts = [f"m_clean = {s.m_clean:.4g}, m_corrupt = {s.m_corrupt:.4g}: {s.metric.describe()} at the last "
                 "decoder position. Effect 1: the clean m restored; 0: nothing (the explanation panel says more)."]
        parts += list(s.notes)
        if s.path is not None:
            p = s.path
            parts.append(f"Path {p.sender} → {p.receiver}: effect {p.path:+.3f} through the receiver (directly to "
                         f"the logits {p.direct:+.3f}; in all, patching the sender alone {p.total:+.3f}).")
            if self.made.paths is not None:
                parts.append(f"Show › path from the sender maps its path into every head's {self.made.paths.part}.")
        if s.checked:
            marks = "; ".join(f"{'✗' if c['disagree'] else '✓'} {c['component']}: estimate {c['estimate']:+.3f}, "
                              f"patched {c['effect']:+.3f}" for c in s.checked)  # fmt: skip
            parts.append(f"Checked by real patching: {marks}.")
        if self.made.like.interventions:
            parts.append("The sweep patches the model without the Interventions list's changes.")
        self.caption.setText(" ".join(parts))

    # --- the maps ------------------------------------------------------------------------------------------------

    def _family_maps(self, which: str | None) -> list[Heatmap]:
        s, family = self.made.sweep, self.family.currentData()
        return head_maps(s, which) if family == "heads" else point_maps(s, family, which)

    def _path_maps(self) -> list[Heatmap]:
        p = self.made.paths
        if p is None:
            return []
        return path_maps(p.sender, p.part, p.receivers, p.effects.numpy(), p.readable,
                         self.made.sweep.metric.describe())  # fmt: skip

    def _draw(self) -> None:
        path = self.family.currentData() == "path"
        if self.made is None:
            self.maps = []
        elif path:  # exact path patching only: one map per attention type
            self.maps = self._path_maps()
        elif self.made.sweep.method == "both":  # the estimate beside the exact sweep, map by map, titled so
            pairs = zip(self._family_maps("exact"), self._family_maps("attribution"))
            self.maps = [replace(m, title=m.title.replace("Patching ", f"{how} of ", 1)) for two in pairs
                         for m, how in zip(two, ("Exact patching", "Attribution estimate"))]  # fmt: skip
        else:
            self.maps = self._family_maps(None)
        if self.made is not None:
            s = self.made.sweep
            self._lookup = {(c.step, c.head, c.position): (g, i) for g in (s.heads, s.positions, s.mlp)
                            for i, c in enumerate(g.components)}  # fmt: skip
        columns = 2 if self.made is not None and self.made.sweep.method == "both" and not path else 1
        while len(self.widgets) < len(self.maps):
            w = HeatmapWidget()
            i = len(self.widgets)
            w.clicked.connect(lambda r, c, i=i: self.clicked(i, r, c))
            w.describe = lambda r, c, i=i: self.describe(i, r, c)
            self.connect_heatmap(w)
            self.widgets.append(w)
        for c in range(2):  # equal columns (the estimate as wide as the exact sweep beside it), equal rows
            self.grid.setColumnStretch(c, 1 if c < columns else 0)
        rows = -(-len(self.maps) // columns)
        for r in range(max(rows, self.grid.rowCount())):
            self.grid.setRowStretch(r, 1 if r < rows else 0)
        for i, w in enumerate(self.widgets):
            shown = i < len(self.maps)
            place = (i // columns, i % columns) if shown else None
            if self._places.get(i) != place:  # moved only when the layout changes (one or two columns)
                self.grid.removeWidget(w)
                if place is not None:
                    self.grid.addWidget(w, *place)
                self._places[i] = place
            w.setVisible(shown)
            # each row at least MIN_ROW_PX high: a map with many rows makes the scroll area scroll
            w.setMinimumHeight(map_height(self.maps[i]) if shown else 0)
            w.set_heatmap(self.maps[i] if shown else None)
            flags = self.maps[i].outlined if shown else None  # the disagreements, as the exports outline them
            w.set_highlight([tuple(int(x) for x in rc) for rc in np.argwhere(flags)] if flags is not None else [])
        self.empty.setText(NO_PATH if path and self.made is not None else ASK)
        self.empty.setVisible(not self.maps)
        self.save_button.setEnabled(self.made is not None)
        self._set_enabled()

    def _set_enabled(self) -> None:
        self.check_button.setEnabled(self.made is not None and self.made.sweep.method != "exact")
        self.save_button.setEnabled(self.made is not None)

    def cell(self, i: int, row: int, col: int) -> dict | None:
        if not 0 <= i < len(self.maps) or row < 0 or col < 0:
            return None
        cells = self.maps[i].extra["cells"]
        return cells[row][col] if row < len(cells) and col < len(cells[row]) else None

    def describe(self, i: int, row: int, col: int) -> str:
        """The hover text: what the cell patched, its effect and the metric it stands for."""
        hm, cell = self.maps[i], self.cell(i, row, col)
        if cell is None:
            return f"{hm.row_labels[row]} · {hm.col_labels[col]}: nothing is patched here"
        s = self.made.sweep
        value = float(hm.values[row, col])
        if cell.get("path"):
            m = s.m_corrupt + value * (s.m_clean - s.m_corrupt)
            return (f"Path {cell['path']} → {cell['label']}: effect {value:+.4f}, m = {m:.4g} — the sender's write "
                    "alone, read by this input of this head alone. Click: Compare shows that run.")  # fmt: skip
        grid, k = self._lookup[(cell["step"], cell["head"], cell["position"])]
        if hm.extra["grid"] == "exact":
            m = s.m_corrupt + value * (s.m_clean - s.m_corrupt)
            text = (f"{cell['label']}: effect {value:+.4f}, m = {m:.4g} (clean {s.m_clean:.4g}, corrupted "
                    f"{s.m_corrupt:.4g})")  # fmt: skip
        else:
            text = f"{cell['label']}: estimated effect {value:+.4f} (attribution patching)"
        if s.method == "both":
            other = grid.estimates if hm.extra["grid"] == "exact" else grid.effects
            name = "estimate" if hm.extra["grid"] == "exact" else "exact"
            far = " — they disagree" if bool(grid.disagree()[k]) else ""
            text += f"; {name} {float(other[k]):+.4f}{far}"
        return text + ". Click: Compare shows this patched run."

    def clicked(self, i: int, row: int, col: int) -> None:
        """Run the cell's patched run in the window and open Compare on it, at the cell's step and head."""
        cell, made = self.cell(i, row, col), self.made
        if cell is None or made is None:
            return
        value, which = float(self.maps[i].values[row, col]), self.maps[i].extra["grid"]
        if cell.get("path"):  # pass A runs the model: a job, then the run of pass B
            self.replay_label.setText(f"Running the path from {cell['path']} into {cell['label']}…")
            self.replay_label.setVisible(True)
            self._checks.start(lambda job: path_cell_patch(made.pair, cell["path"], cell),
                               on_result=lambda patch: self._replay_cell(made, cell, value, which, patch),
                               on_error=self._failed, doing="Path patching's first pass")  # fmt: skip
            return
        self.replay_label.setText(f"Running the corrupted input with {cell['label']} patched from the clean run…")
        self.replay_label.setVisible(True)
        self._replay_cell(made, cell, value, which, cell_patch(made.pair, cell))

    def _replay_cell(self, made: Made, cell: dict, value: float, which: str, patch) -> None:
        """Run the corrupted input with the cell's patch in the window, and open Compare on it."""
        if cell.get("path"):
            what = (f"{cell['label']} reading the path from {cell['path']} alone (path patching's second pass: the "
                    "sender's clean write, every other head and feed-forward held at the corrupted run)")
        else:
            what = f"{cell['label']} taken from the clean run “{made.ask.source}”"
        note = (f"Patched run: the corrupted input “{made.text}” with {what} (Patching view); Run goes back to the "
                "fields' input.")
        inputs = replace(corrupted_inputs(made.pair.bundle, made.clean, made.corrupt), notes=[note])
        self._replay = Replay(inputs, cell, value, which, made)
        self.main.run_prepared(made.like, inputs, (patch,), made.text, cell["step"], cell["head"],
                               f"Running “{made.text}” with {what}; Compare shows it beside the corrupted run.",
                               Sides("Corrupted run", "Patched run", what))  # fmt: skip
        from .compare_view import CompareView

        compare = next((v for v in self.main.views if isinstance(v, CompareView)), None)
        if compare is not None:
            self.main.tabs.setCurrentWidget(compare)

    @Slot(int, object)
    def _run_arrived(self, _generation: int, result) -> None:
        """A run came in: if it is the cell's patched run, read its m from its logits (in a job)."""
        replay = self._replay
        if replay is None or result.request.prepared is not replay.inputs:
            return
        metric = replay.made.pair.metric
        self._checks.start(lambda job: replayed_metric(result, metric), on_result=lambda m: self._replayed(replay, m),
                           on_error=self._failed, doing="Reading the patched run's metric")  # fmt: skip

    def _replayed(self, replay: Replay, m: float) -> None:
        s = replay.made.sweep
        gap = s.m_clean - s.m_corrupt
        effect = (m - s.m_corrupt) / gap if gap else 0.0
        replay.measured = (m, effect)
        what = {"exact": "the map's effect", "path": "the path map's effect"}.get(replay.which,
                                                                                 "attribution patching estimated")
        text = (f"Compare shows {replay.cell['label']} patched into the corrupted run: its logits give m = {m:.4g}, "
                f"so effect = (m − m_corrupt) / (m_clean − m_corrupt) = {m - s.m_corrupt:.4g} / {gap:.4g} = "
                f"{effect:+.4f}; {what}: {replay.value:+.4f}.")  # fmt: skip
        self.replay_label.setText(text)
        self.replay_label.setVisible(True)
        self.main.show_message(text)

    # --- the window's hooks ----------------------------------------------------------------------------------------

    def refresh(self) -> None:
        result = self.main.current_result()
        if result is None:
            return
        ours = result.request.prepared is not None
        self.back_button.setVisible(ours)
        if not ours and result.request.windows is None:
            self.controls.fill(result.bundle.model, result.request.source)
        made = self.made
        if made is not None and not ours and (result.request.source, result.request.model) != (made.ask.source,
                                                                                              made.like.model):
            self._say("These maps were made on an earlier input or model; press Sweep for this run.")

    def is_busy(self) -> bool:
        return self._jobs.busy() or self._checks.busy()

    def shutdown(self) -> None:
        self._jobs.shutdown()
        self._checks.shutdown()

    def explain_facts(self) -> dict:
        return {"patching": explanation(self.made.sweep)} if self.made is not None else {}

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self.maps)

    def figure_columns(self) -> int:
        """Exports lay the maps out as the view does: each estimate beside its exact map."""
        both = self.made is not None and self.made.sweep.method == "both" and self.family.currentData() != "path"
        return 2 if both else 1

    def view_title(self) -> str:
        return f"Patching: {self.family.currentText()}"

    def csv_text(self) -> str:
        if self.made is None:
            return ""
        return sweep_csv(self.made.sweep, self.made.paths.csv_rows() if self.made.paths is not None else None)

    def save_csv(self, path: str | Path) -> Path:
        return write_csv(path, self.csv_text())

    def _save_dialog(self) -> None:
        save_numbers(self.main, "Save the sweep", "patching-sweep.csv", "CSV (*.csv)", self.save_csv)
