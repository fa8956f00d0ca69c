"""The main window: inputs on top, diagram | views | inspector in the middle, the stepper at the bottom.

The window owns the state every view draws from (the current run, step, batch item and head) and exposes it
to the views and the exporters: current_result(), current_trace(), current_bundle(), current_step(),
current_batch(), current_head(), current_view(). Model work goes to a WorkerThread; nothing here runs the model.
Its parts live beside it: input_bar (fields and pickers), stepper (the bottom bar and the step keys), inspector,
menus (the menu bar and its dialogs); the window wires them together.
"""

from __future__ import annotations

import importlib

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QProgressBar,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.loading.bundle import default_model_name, examples_of
from scratchformer.loading.memory import size_text
from scratchformer.plotdata import Heatmap, block_key, block_steps
from scratchformer.recording.trace import Step, step_path
from scratchformer.running.examples import Example
from scratchformer.transformer.departures import departures

from .compare.model_diff import ModelComparison
from .panels import menus, teaching
from .panels.diagram import ArchitectureDiagram
from .panels.explain_panel import STEP_TITLE, TAB_TITLE, ExplainPanel, ExplanationFailed, explanation_html, tab_html
from .panels.input_bar import InputBar
from .panels.inspector import Inspector
from .panels.interventions_panel import InterventionsPanel, add_head_actions
from .panels.run_banner import RunBanner
from .panels.side_panel import SidePanel
from .panels.stepper import StepKeys, StepperBar
from .panels.view_tabs import ViewTabs
from .startup.settings import AppSettings
from .views import view_groups
from .views.base import View
from .widgets.draw_queue import draw_queue
from .widgets.memory_status import MemoryStatus, ask_budget, budget_bytes
from .work.gc_guard import collect_at_safe_points, freeze_startup_objects
from .work.jobs import JobRunner
from .work.prebuild import Prebuild
from .work.warmup import STATS_AHEAD, neighbour_work, run_all, stats_work, step_work
from .work.worker import RunResult, WorkerThread

DIAGRAM_AFTER_MS = 20  # a new run's diagram comes this long after its first step (a zero timer shared its turn)


def short_shape(step: Step) -> str:
    return " × ".join(str(n) for n in step.shape)


class MainWindow(QMainWindow):
    def __init__(self, settings: AppSettings | None = None, persist: bool = True) -> None:
        collect_at_safe_points()  # before any widget exists: the collector never runs inside a Qt call (gc_guard)
        super().__init__()
        self.settings = settings or AppSettings()
        self.persist = persist  # False for --screenshot: leave the user's settings alone
        self.setWindowTitle("scratchformer — step through the Transformer")
        self.resize(1400, 900)
        self._result: RunResult | None = None
        self._index = -1  # current step (trace index)
        self._visible: list[int] = []  # step indices shown in the current detail mode
        self._batch = 0
        self._head = 0
        self._pending_step: str | None = None
        self._pending_generation = 0
        self._dirty: set[int] = set()
        self._recompute = JobRunner("scratchformer-recompute")  # what the next drawing reads, one job at a time
        self._after_warm = None  # the drawing to do once it is done
        self._prefetcher = JobRunner("scratchformer-prefetch")  # the neighbouring steps, while the user looks
        # a prefetch waits for this turn's painting (_prefetch_after_paint)
        self._prefetch_timer = QTimer(self)
        self._prefetch_timer.setObjectName("scratchformer-prefetch-soon")
        self._prefetch_timer.setSingleShot(True)
        self._prefetch_timer.setInterval(0)
        self._prefetch_timer.timeout.connect(self._prefetch)
        self._stats = JobRunner("scratchformer-stats")  # the inspector's statistics of a large step (_show_inspector)
        self.page_jobs = JobRunner("scratchformer-page")  # File › Export › Interactive page… (export/page_export.py)
        self._diagram_timer = QTimer(self)  # a new run's diagram, on the turn after its first step (_show_diagram)
        self._diagram_timer.setObjectName("scratchformer-diagram-soon")
        self._diagram_timer.setSingleShot(True)
        self._diagram_timer.setInterval(DIAGRAM_AFTER_MS)
        self._diagram_timer.timeout.connect(self._show_diagram)
        self._message_before_warm = ""
        self._closing = False
        self._history: list[str] = self.settings.get("history")  # "source\ttarget", most recent first
        self.prebuild = Prebuild(self)  # the views' many plots, built ahead while the window waits
        self.dictionaries: list[str] = []  # folders of sparse dictionaries attached to every run (Run › Attach …)
        self.clamps: list = []  # scratchformer.features.attach.Clamp: features set to a value (the Features view)
        self._attach_trial: tuple[int, str] | None = None  # (generation, folder) of a run that tries a new one
        self.lesson_panel = None  # the lesson dock (app/lessons/lesson_panel.py), made when a lesson is first opened
        self.worker = WorkerThread(self)
        self.worker.worker.finished.connect(self._on_finished)
        self.worker.worker.failed.connect(self._on_failed)

        self.input_bar = InputBar(self)
        bar = self.input_bar  # its widgets keep their names on the window
        self.source_edit, self.target_edit, self.load_button = bar.source_edit, bar.target_edit, bar.load_button
        self.model_combo, self.device_combo, self.run_button = bar.model_combo, bar.device_combo, bar.run_button
        self.notes_label, self.windows_label = bar.notes_label, bar.windows_label
        self.banner = RunBanner()
        self.banner.example_chosen.connect(self.use_example)
        self.banner.nonfinite_step_requested.connect(self.go_to_step)
        self._build_centre()
        self.comparison = ModelComparison(self)  # Run › Compare with…: A against a second model (model_diff.py)
        self.stepper = StepperBar(self)
        st = self.stepper
        self.play_timer, self.speed_combo, self.detail_combo = st.play_timer, st.speed_combo, st.detail_combo
        self.first_button, self.prev_button, self.play_button = st.first_button, st.prev_button, st.play_button
        self.next_button, self.last_button = st.next_button, st.last_button
        self.slider, self.counter, self.crumb = st.slider, st.counter, st.crumb
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.input_bar)
        layout.addWidget(self.banner)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.comparison.bar)
        layout.addWidget(self.stepper)
        self.setCentralWidget(central)
        self._build_status()
        self.interventions_panel = InterventionsPanel(self)  # a dock, shown once a head is changed
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.interventions_panel)
        self.interventions_panel.hide()
        self.interventions_panel.changed.connect(self._interventions_changed)
        self.export_actions = menus.build_menus(self)
        self._restore()
        self.keys = StepKeys(self)
        self._update_controls()
        freeze_startup_objects()  # later collections skip the libraries and widgets (see gc_guard)

    # --- construction ----------------------------------------------------------------------------------------

    def _build_centre(self) -> None:
        self.diagram = ArchitectureDiagram()
        self.diagram.block_clicked.connect(self.go_to_block)
        # The views, in their groups (app/views/view_groups.py); window.tabs indexes them as one flat list.
        self.tabs = ViewTabs()
        self.views: list[View] = []
        for title, classes in view_groups.GROUPS:
            g = self.tabs.add_group(title, " · ".join(cls.title for cls in classes))
            for cls in classes:
                view = cls(self)
                self.views.append(view)
                self.tabs.add_view(g, view, cls.title, cls.tooltip)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.inspector_panel = Inspector()
        self.inspector, self.hover_label = self.inspector_panel.text, self.inspector_panel.hover_label
        self.explain_panel = ExplainPanel()
        self.explain_panel.step_link.connect(lambda i: self.go_to(i))
        self.explain_panel.failed.connect(self.show_error)
        self.side = SidePanel(self.explain_panel, self.inspector_panel)  # explanation above the inspector, or tabs
        diagram_host = QWidget()
        dl = QVBoxLayout(diagram_host)
        dl.setContentsMargins(0, 0, 0, 0)
        diagram_title = QLabel("<b>Architecture</b> — click a block to go there")
        diagram_title.setWordWrap(True)  # a narrow panel wraps the line instead of widening the window
        dl.addWidget(diagram_title)
        dl.addWidget(self.diagram, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(diagram_host)
        self.splitter.addWidget(self.tabs)
        self.splitter.addWidget(self.side)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([330, 720, 350])
        self.splitter.setChildrenCollapsible(False)

    def _build_status(self) -> None:
        self.message = QLabel("Ready.")
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.statusBar().addWidget(self.message, 1)
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(120)
        self.busy.setVisible(False)
        self.statusBar().addPermanentWidget(self.busy)
        self.model_info = QLabel()
        self.model_info.setStyleSheet("color: #555;")
        self.statusBar().addPermanentWidget(self.model_info)
        self.memory_status = MemoryStatus()
        self.memory_status.show_trace(None, budget_bytes(self.settings))
        self.statusBar().addPermanentWidget(self.memory_status)

    # --- settings --------------------------------------------------------------------------------------------

    def _restore(self) -> None:
        s = self.settings
        self.source_edit.setText(s.get("source"))
        self.target_edit.setText(s.get("target"))
        self.input_bar.start_only.setChecked(s.get("start_only"))
        self.input_bar.fill_models(s.get("opened_models"), s.get("model") or default_model_name())
        if not self.source_edit.text().strip():  # first launch: the model's first example
            examples = examples_of(self.model_spec())
            if examples:
                self._apply_example(examples[0])
        device = s.get("device")
        if self.device_combo.findText(device) >= 0:
            self.device_combo.setCurrentText(device)
        self.detail_combo.setCurrentIndex(max(0, self.detail_combo.findData(s.get("detail"))))
        speed = self.speed_combo.findData(s.get("speed_ms"))
        self.speed_combo.setCurrentIndex(speed if speed >= 0 else 1)
        self.play_timer.setInterval(int(self.speed_combo.currentData()))
        self.tabs.setCurrentIndex(min(max(0, s.get("tab")), self.tabs.count() - 1))
        geometry = s.get_bytes("geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        splitter = s.get_bytes("splitter")
        if splitter is not None:
            self.splitter.restoreState(splitter)

    def save_settings(self) -> None:
        s = self.settings
        s.set("source", self.source_edit.text()[:5000])
        s.set("target", self.target_edit.text()[:5000])
        s.set("start_only", self.input_bar.start_only.isChecked())
        s.set("model", self.model_spec())
        s.set("device", self.device_combo.currentText())
        s.set("detail", self.detail_combo.currentData())
        s.set("speed_ms", int(self.speed_combo.currentData()))
        s.set("tab", self.tabs.currentIndex())
        s.set("geometry", self.saveGeometry())
        s.set("splitter", self.splitter.saveState())
        s.sync()

    # --- inputs and runs -------------------------------------------------------------------------------------

    def model_spec(self) -> str:
        return self.input_bar.model_spec()

    def set_model(self, spec: str) -> None:
        """Select a model by name or path, adding a path to the list if it is not there yet."""
        self.input_bar.set_model(spec)

    @property
    def precision(self) -> str:
        """How a Hugging Face folder's weights open at the next Run: "stored" while Run › Open model folders in
        their stored precision is ticked, else "float32"."""
        return "stored" if self.stored_precision_action.isChecked() else "float32"

    def set_stored_precision(self, on: bool) -> None:
        """Run › Open model folders in their stored precision was ticked or unticked: say when it takes effect."""
        self.show_message("Model folders open in their stored precision at the next Run." if on else
                          "Model folders open in float32 at the next Run.")  # fmt: skip

    def set_device(self, device: str) -> None:
        self.input_bar.set_device(device)

    def open_model_dialog(self) -> None:
        """Open…: the cached Hugging Face models of families that open, a folder, or an id
        (app.panels.open_model_dialog)."""
        from .panels.open_model_dialog import OpenModelDialog

        dialog = OpenModelDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(self.open_model)
        dialog.open()

    def open_model(self, path: str, run: bool = True) -> None:
        """Add a model folder or cached Hugging Face id to the model list and run it (errors appear in the status
        bar)."""
        opened = [p for p in self.settings.get("opened_models") if p != path]
        if self.persist:
            self.settings.set("opened_models", ([path] + opened)[:8])
        self.set_model(path)
        if run:
            self.run()

    def set_windows(self, windows: tuple[int, int] | None) -> None:
        """Read the source as the walkthrough's batch: (S, B) windows of S tokens, or None for one input."""
        self.input_bar.set_windows(windows)

    def open_text_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a text file", "", "Text files (*.txt *.md);;All files (*)")
        if path:
            self.load_text_file(path)

    def load_text_file(self, path: str, windows: tuple[int, int] | None | str = "ask", run: bool = True) -> bool:
        """Read a UTF-8 text file into the source. windows: (S, B), None (one input) or "ask" (a dialog for
        long texts). Bad files (missing, binary, not UTF-8, too big) give one sentence in the status bar."""
        max_len = self._result.bundle.config.max_len if self._result is not None else None
        try:
            loaded = self.input_bar.load_text_file(path, windows, max_len)
        except UserError as exc:
            self.show_error(str(exc))
            return False
        if loaded is None:  # the batching dialog was cancelled
            return False
        self.show_message(loaded)
        if run:
            self.run()
        return True

    def run(self, padded: bool = False) -> None:
        """Queue a run of the current inputs; a newer run supersedes one still in progress. `padded`: a small
        padded batch built from the sentence (the Masks tab's button)."""
        source = self.source_edit.text()
        if not source.strip():
            self.show_error("The source text is empty; type a sentence first.")
            return
        model = self.model_spec()
        if not model:
            self.show_error("No model is selected; pick one from the list or open a model folder.")
            return
        self.stop_play()
        if self._result is not None and model != self._result.request.model:
            self.interventions_panel.clear(quietly=True)  # another model: the heads changed were the old one's
            self.dictionaries, self.clamps = [], []  # and the dictionaries read the old model's steps
        self._pending_generation = self.worker.submit(
            model=model,
            device=self.device_combo.currentText(),
            source=source,
            target=self.target_edit.text(),
            windows=self.input_bar.windows,
            start_only=self.input_bar.start_only.isChecked(),
            padded=padded and self.input_bar.windows is None,
            memory_budget=budget_bytes(self.settings),
            interventions=tuple(self.interventions_panel.enabled()),
            continuation=self.input_bar.continuation(),
            precision=self.precision,
            dictionaries=tuple(self.dictionaries),
            clamps=tuple(self.clamps),
        )
        self._remember(source, self.target_edit.text())
        self._queue_prebuild()  # while the run is in flight
        self.busy.setVisible(True)
        self.show_message(f"Running {model} on {self.device_combo.currentText()}…")

    def run_prepared(self, like, inputs, interventions: tuple, source: str, step: str | None = None,
                     head: int | None = None, message: str = "", sides=None) -> None:  # fmt: skip
        """Run inputs made elsewhere (a patching sweep's corrupted input, app/views/patching_view.py) with these
        interventions, on the model, device and precision of the run `like` (a RunRequest); the Compare view then
        shows the run without them beside the run with them, named by `sides` (app.work.worker.Sides; None: before and
        after). The input fields keep their text, so Run goes back to it. `step` and `head`: where to go once the
        run is in."""
        self.stop_play()
        self._pending_step = step
        if head is not None:
            self._head = max(0, head)
        self._pending_generation = self.worker.submit(
            model=like.model, device=like.device, source=source, memory_budget=budget_bytes(self.settings),
            interventions=tuple(interventions), precision=like.precision, prepared=inputs, sides=sides,
            dictionaries=tuple(self.dictionaries), clamps=tuple(self.clamps))  # fmt: skip
        self.busy.setVisible(True)
        self.show_message(message or f"Running {like.model} on a prepared input…")

    def attach_dictionary_dialog(self) -> None:
        """Run › Attach dictionary…: a folder in SAELens's layout (cfg.json + sae_weights.safetensors)."""
        folder = QFileDialog.getExistingDirectory(self, "Attach a dictionary (a folder holding cfg.json and "
                                                  "sae_weights.safetensors)")  # fmt: skip
        if folder:
            self.attach_dictionary(folder)

    def train_dictionary_dialog(self):
        """Run › Train a dictionary…: an SAE of a step of this run's model, trained off the UI thread and attached."""
        from .panels.dictionary_dialog import open_dictionary_dialog

        self._dictionary_dialog = open_dictionary_dialog(self)
        return self._dictionary_dialog

    def attach_bundled_dictionary(self) -> None:
        """Run › Attach the bundled dictionary: the SAE a bundled model ships with (en-hi's reads its last decoder
        layer's stream), so the Features view works offline on first launch."""
        from scratchformer.features.bundled import bundled_saes

        model = self.model_spec()
        found = bundled_saes(model)
        if not found:
            self.show_message(f"{model} ships no dictionary; train one with `scratchformer features train` and "
                              "attach its folder (Run › Attach dictionary…).")  # fmt: skip
            return
        self.attach_dictionary(str(found[0]))

    def attach_dictionary(self, folder: str) -> None:
        """Attach the dictionary in `folder` and run again with it (off the UI thread, as every run); a folder
        that is not a dictionary, or one of another model, is refused in one sentence and left out."""
        if folder in self.dictionaries:
            self.show_message(f"{folder} is attached already.")
            return
        self.dictionaries.append(folder)
        if self._result is None and not self.source_edit.text().strip():
            return  # attached to the first run
        self.run()
        if self.busy.isVisible():
            self._attach_trial = (self._pending_generation, folder)
            self.show_message(f"Running again with the dictionary in {folder} attached…")
        else:
            self.dictionaries.remove(folder)

    def detach_dictionaries(self) -> None:
        """Run › Detach dictionaries: run again without them (and without their clamps)."""
        if not self.dictionaries:
            self.show_message("No dictionary is attached.")
            return
        self.dictionaries, self.clamps = [], []
        if self._result is not None:
            self.run()

    def set_clamps(self, clamps: list) -> None:
        """Clamp features (scratchformer.features.attach.Clamp; [] for none) and run again: the Compare tab shows
        the run without the clamps beside the run with them."""
        self.clamps = list(clamps)
        if self._result is not None:
            self.run()
            if self.clamps:
                self.show_message(f"Running again with {'; '.join(c.note() for c in self.clamps)}; the Compare tab "
                                  "shows before and after.")  # fmt: skip

    def add_head_menu(self, menu, attention: str, head: int) -> None:
        """A view's right-click on a head (attention 'decoder.1.cross_attn', head from 0): the what-if actions."""
        add_head_actions(menu, self.interventions_panel, attention, head)

    def _interventions_changed(self) -> None:
        """The interventions list changed: run the current input again with the enabled ones."""
        if self._result is not None:
            self.run()
            specs = self.interventions_panel.enabled()
            if specs:
                self.show_message(f"Running again with {len(specs)} intervention(s); the Compare tab shows before "
                                  "and after.")

    # --- examples and history --------------------------------------------------------------------------------

    def _apply_example(self, example: Example) -> None:
        """Put an example in the fields (the old source stays in the field's undo and in the history)."""
        self.input_bar.replace_source(example.source)
        self.input_bar.replace_target(example.target)
        self.set_windows(example.windows)

    def use_example(self, example: Example) -> None:
        """The Examples menu and the offer in the banner: fill the fields with the example and run it."""
        self._apply_example(example)
        self.banner.offer_example(None)
        self.run()

    def use_text(self, source: str, target: str = "") -> None:
        self._apply_example(Example(source, target))
        self.run()

    def history(self) -> list[tuple[str, str]]:
        """The inputs run before (this session and earlier ones), most recent first, as (source, target)."""
        return [(item.partition("\t")[0], item.partition("\t")[2]) for item in self._history]

    def _remember(self, source: str, target: str) -> None:
        if self.input_bar.windows is not None:
            return
        item = f"{' '.join(source.split())[:2000]}\t{' '.join(target.split())[:2000]}"
        self._history = ([item] + [i for i in self._history if i != item])[:10]
        if self.persist:
            self.settings.set("history", self._history)

    def follow_examples(self, previous_model: str) -> None:
        """The model changed while the fields hold one of the previous model's examples (not the user's own
        text): show the new model's first example instead (as an undoable edit)."""
        source, target = " ".join(self.source_edit.text().split()), " ".join(self.target_edit.text().split())
        shown = any(" ".join(e.source.split()) == source and " ".join(e.target.split()) == target
                    for e in examples_of(previous_model))
        if shown or not source:
            examples = examples_of(self.model_spec())
            if examples:
                self._apply_example(examples[0])

    def model_changed(self) -> None:
        """Another model was picked: run it on the current text (it offers its example if the words are new)."""
        if self.source_edit.text().strip():
            self.run()

    def _on_finished(self, generation: int, result: RunResult) -> None:
        if self._closing or not self.worker.is_current(generation):
            return  # an older run finished after a newer one was asked for
        self.busy.setVisible(False)
        self._attach_trial = None
        self.set_result(result)

    def _on_failed(self, generation: int, message: str) -> None:
        if self._closing or not self.worker.is_current(generation):
            return
        self.busy.setVisible(False)
        trial, self._attach_trial = self._attach_trial, None
        if trial is not None and trial[0] == generation and trial[1] in self.dictionaries:
            self.dictionaries.remove(trial[1])  # the folder that made the run fail is left out again
            message = f"The dictionary was not attached: {message}"
        self.show_error(message)

    def ask_memory_budget(self) -> None:
        """Run › Memory budget…"""
        budget = ask_budget(self, self.settings)
        if budget is not None:
            self.memory_status.show_trace(self.current_trace(), budget)
            self.show_message(f"Memory budget: {size_text(budget)}; a run that would need more is refused.")

    def is_busy(self) -> bool:
        """Drawing (is_drawing), or the inspector's statistics still being made."""
        return self.is_drawing() or self._stats.busy() or self.comparison.is_busy()

    def is_drawing(self) -> bool:
        """A run in flight, a step being recomputed before it is drawn, large maps waiting their turn to draw, or a
        new run's diagram still to come (the inspector's statistics, which fill in afterwards, do not count)."""
        return (self.busy.isVisible() or self.is_recomputing() or draw_queue().pending() > 0
                or self._diagram_timer.isActive())

    def is_recomputing(self) -> bool:
        return self._recompute.busy() or self._after_warm is not None

    def set_result(self, result: RunResult) -> None:
        previous = self.current_step()
        self._result = result
        trace = result.trace
        self.input_bar.show_model(result.request.model, result.bundle.name, result.bundle.config)
        # The diagram's blocks and shapes come on the next turn, after the first step is drawn: building and painting
        # them in the same turn held the window 40–60 ms as the run arrived (the current block is marked then).
        self._diagram_timer.start()
        self._batch = min(self._batch, max(0, len(trace.source_tokens or trace.target_tokens) - 1))
        self._compute_visible()
        notes = list(result.notes)  # with what the tokenizer could not keep ("“pizza” → <unk>"): bundle.lost_note
        self.notes_label.setText("  ".join(f"⚠ {n}" for n in notes))
        self.source_edit.mark_words(result.inputs.unknown_words if self.input_bar.windows is None else [])
        self.notes_label.setVisible(bool(notes))
        self._show_banner(result)
        self.model_info.setText(result.bundle.describe())
        self.memory_status.show_trace(trace, budget_bytes(self.settings))
        n_src = len(trace.source_tokens[0]) if trace.source_tokens else 0
        n_tgt = len(trace.target_tokens[0]) if trace.target_tokens else 0
        self.show_message(
            f"Ran {result.bundle.name}: {len(trace)} steps, {n_src} source and {n_tgt} target tokens "
            f"in {result.seconds:.2f} s." + (f" {notes[0]}" if notes else "")
        )
        self._dirty = set(range(len(self.views)))
        target = self._pending_step or (previous.name if previous is not None else None)
        self._pending_step = None
        if target is not None and trace.find(target) is not None:
            self.go_to(trace.index_of(target), force=True)
        elif target is not None and target.lstrip("-").isdigit() and -len(trace) <= int(target) < len(trace):
            self.go_to(int(target) % len(trace), force=True)
        else:
            self.go_to(self._visible[0] if self._visible else 0, force=True)
        self._queue_prebuild()  # now with this run's numbers of heads and masks
        self.comparison.run_changed(result)  # a comparison on: this run against the same second model

    def _show_diagram(self) -> None:
        """The run's architecture and every block's shape, the current block marked (set_result's next turn)."""
        result = self._result
        if result is None or self._closing:
            return
        trace = result.trace
        self.diagram.set_model(result.bundle.config)
        shapes = {}
        for key, indices in block_steps(trace).items():
            last = trace[indices[-1]]
            shapes[key] = (short_shape(last), last.shape_text())
        self.diagram.set_shapes(shapes, result.parameters)
        step = self.current_step()
        if step is not None:
            self.diagram.set_current(block_key(step))

    def _queue_prebuild(self) -> None:
        self.prebuild.queue([job for view in self.views for job in view.prebuild()])

    def _show_banner(self, result: RunResult) -> None:
        """The translation in large type (or what else the decoder reads), the untrained badge, and an offer of
        the model's example when it knows few of the words."""
        inputs, bundle = result.inputs, result.bundle
        n_target = len(inputs.target_tokens[0]) if inputs.target_tokens else 0
        decoder_only = bundle.config.has_decoder and not bundle.config.has_encoder
        mode = inputs.decoder_input
        if decoder_only and mode in ("typed", "generated"):
            mode = "prompt" if mode == "typed" else "continued"
        how = inputs.continuation.describe() if inputs.continuation is not None else ""
        self.banner.show_run(mode, inputs.translation, n_target, bundle.untrained,
                             result.request.windows, departures(bundle.config), how)
        self.input_bar.update_decoder_label(inputs.decoder_input)
        offer, known, words = teaching.should_offer(bundle.src_tokenizer, result.request.source)
        examples = bundle.examples()
        same = bool(examples) and examples[0].source == result.request.source.strip()
        self.banner.offer_example(examples[0] if offer and examples and not same else None, bundle.name, known,
                                  words)
        found = result.nonfinite
        first = result.trace[found.first_index] if found is not None and found.first_index is not None else None
        self.banner.show_nonfinite(found.sentence() if found is not None else "", first.name if first else None,
                                   step_path(first) if first else "")

    # --- stepping --------------------------------------------------------------------------------------------

    def _compute_visible(self) -> None:
        trace = self.current_trace()
        if trace is None:
            self._visible = []
            return
        major = self.stepper.detail() == "major"
        self._visible = [s.index for s in trace if s.major or not major]
        if not self._visible:
            self._visible = [s.index for s in trace]
        self.stepper.set_step_count(len(self._visible))

    def _detail_changed(self) -> None:
        self._compute_visible()
        if self._result is not None and self._visible:
            if self._index not in self._visible:  # land on the sublayer's major step at or after this one
                later = [i for i in self._visible if i >= self._index]
                self.go_to(later[0] if later else self._visible[-1], force=True)
            else:
                self.go_to(self._index, force=True)

    def set_detail(self, mode: str) -> None:
        self.stepper.set_detail(mode)

    def visible_steps(self) -> list[int]:
        return list(self._visible)

    def _position(self) -> int:
        try:
            return self._visible.index(self._index)
        except ValueError:
            later = [p for p, i in enumerate(self._visible) if i > self._index]
            return later[0] - 1 if later else len(self._visible) - 1

    def next_step(self) -> None:
        if self._visible:
            after = [i for i in self._visible if i > self._index]
            if after:
                self.go_to(after[0])

    def previous_step(self) -> None:
        if self._visible:
            before = [i for i in self._visible if i < self._index]
            if before:
                self.go_to(before[-1])

    def first_step(self) -> None:
        if self._visible:
            self.go_to(self._visible[0])

    def last_step(self) -> None:
        if self._visible:
            self.go_to(self._visible[-1])

    def _slider_moved(self, value: int) -> None:
        if 0 <= value < len(self._visible):
            self.go_to(self._visible[value])

    def go_to_step(self, name_or_index: str | int, head: int | None = None) -> bool:
        """Go to a step by name or index (and optionally a head). False if the run has no such step."""
        trace = self.current_trace()
        if trace is None:
            return False
        if isinstance(name_or_index, str) and not name_or_index.lstrip("-").isdigit():
            step = trace.find(name_or_index)
            if step is None:
                self.show_error(f"This model has no step named {name_or_index!r}.")
                return False
            index = step.index
        else:
            index = int(name_or_index)
            if not -len(trace) <= index < len(trace):
                self.show_error(f"There is no step {index}; this run has {len(trace)} steps.")
                return False
            index %= len(trace)
        if head is not None:
            self._head = head
        self.go_to(index, force=True)
        return True

    def go_to_block(self, key: str) -> None:
        """The first step of a diagram block that the current detail level shows."""
        trace = self.current_trace()
        if trace is None:
            return
        indices = [s.index for s in trace if block_key(s) == key]
        shown = [i for i in indices if i in self._visible] or indices
        if shown:
            self.go_to(shown[0])

    def go_to(self, index: int, force: bool = False) -> None:
        """Make trace step `index` current and redraw what depends on it."""
        trace = self.current_trace()
        if trace is None or not 0 <= index < len(trace):
            return
        if index == self._index and not force:
            return
        if index not in self._visible:  # a click or --step on an inner operation: show every operation
            self.stepper.set_detail("all", quietly=True)
            self._compute_visible()
        self._index = index
        self.prebuild.postpone()  # the user is stepping: the plots built ahead wait until they stop
        step = trace[index]
        self.stepper.show_step(self._position(), len(self._visible), step)
        self.comparison.show_step(step)
        self._update_controls()
        self._when_ready(self._show_current)
        # After the maps: a graphics scene hands its changes to its view in a queued call that paints the whole
        # window at once (QGraphicsScene's processDirtyItems), so the scene changed first paints everything but the
        # scenes changed after it, which paint again. Marked last, the diagram's small block repaints on its own;
        # marked first, the map's (2–3 ms) did (holding Next at 512 tokens).
        self.diagram.set_current(block_key(step))

    def _show_current(self, all_dirty: bool = True) -> None:
        self._update_inspector()
        self._refresh_views(all_dirty)
        self.memory_status.refresh()  # a recompute may have filled the cache
        self._prefetch_after_paint()

    def _prefetch_after_paint(self) -> None:
        """Start the prefetch once this turn has painted the step: Qt paints posted update requests before a zero
        timer fires. Started at once, its thread took the CPU and the GIL from painting the step just drawn
        (holding Next at 512 tokens: p50 10 → 8 ms per step)."""
        if not self._prefetch_timer.isActive():
            self._prefetch_timer.start()

    def is_prefetching(self) -> bool:
        """Whether the steps near the current one are still being made ahead (queued, running, or more to do)."""
        return self._prefetch_timer.isActive() or self._prefetcher.busy()

    def _prefetch(self) -> None:
        """Recompute the sublayers of the next (and previous) steps off the UI thread while the user looks at
        this one; one prefetch at a time, and when it ends it looks again from wherever the user is then."""
        trace = self.current_trace()
        if self._closing or trace is None or self._prefetcher.busy():
            return
        steps = [trace[i] for i in self._visible]
        at = self._position()
        work = neighbour_work(steps, at, self._batch) if 0 <= at < len(steps) else []
        if 0 <= at < len(steps):
            ahead = steps[at + 1: at + 1 + STATS_AHEAD]
            view = self.tabs.currentWidget()
            if view is not None:  # what drawing them will need: the Step view's maps and images
                work += view.ahead_work(ahead, self._batch, self._head)
            work += stats_work(self._result, ahead, self._batch)
        if work:  # a failure is left for the step's own drawing to report
            self._prefetcher.start(lambda job: run_all(work, job.cancelled), on_result=self._prefetched,
                                   on_error=self._prefetched)

    def _prefetched(self, _news=None) -> None:
        if not self._closing:
            self._prefetch()

    # --- recomputed steps: rerun off the UI thread, drawn when ready -----------------------------------------------

    def _pending_work(self) -> list:
        """What must be recomputed before the current tab can draw: the current step's sublayer, and for a view
        that prepares its own data off the UI thread (the Overview's mosaics), that preparation."""
        step, trace = self.current_step(), self.current_trace()
        if step is None or trace is None:
            return []
        work = step_work([step], self._batch)  # (the inspector's statistics do not hold the drawing back)
        view = self.tabs.currentWidget()
        if view is not None:
            work += view.preparation(trace, self._batch)
        return work

    def _when_ready(self, then) -> None:
        """Run `then` (which draws) now if everything it reads is at hand; else once a recompute job has
        recomputed it. While one runs, only the latest request is kept: holding Next skips the steps in between.
        Nothing once the window is closing: a step key or timer event still queued would start jobs that nothing
        waits for."""
        if self._closing:
            return
        need = self._pending_work()
        if not need:
            self._after_warm = None
            then()
            return
        self._after_warm = then
        if self._recompute.busy():
            return  # when it ends, the latest request is looked at again
        what = f"{step_path(self.current_step())} for batch item {self._batch + 1}"
        self._message_before_warm = self.message_text()
        if not self.current_step().ready(self._batch):  # not only the inspector's numbers: a sublayer reruns
            self.show_message(f"Recomputing {what}…")
        self._recompute.start(lambda job: run_all(need, job.cancelled), on_result=lambda _none: self._warmed(""),
                              on_error=self._warmed, doing=f"Recomputing {what}")

    def _warmed(self, error: str) -> None:
        if self._closing:
            return
        self.show_message(self._message_before_warm)
        then, self._after_warm = self._after_warm, None
        if error:
            self.show_error(error)
        elif then is not None:
            self._when_ready(then)

    def set_batch(self, batch: int) -> None:
        if batch != self._batch:
            self._batch = max(0, batch)
            self._when_ready(self._show_current)

    def set_head(self, head: int) -> None:
        if head != self._head:
            self._head = max(0, head)
            self._when_ready(self._show_current)

    def toggle_play(self) -> None:
        if self.stepper.is_playing():
            self.stop_play()
        elif self._visible:
            if self._index == self._visible[-1]:
                self.first_step()
            self.stepper.start_play()

    def stop_play(self) -> None:
        self.stepper.stop_play()

    def _play_tick(self) -> None:
        if not self._visible or self._index >= self._visible[-1]:
            self.stop_play()
        else:
            self.next_step()

    def _update_controls(self) -> None:
        has = bool(self._visible)
        at_start = not has or self._index <= self._visible[0]
        at_end = not has or self._index >= self._visible[-1]
        self.stepper.set_enabled(has, at_start, at_end)
        for action in self.export_actions.values():
            action.setEnabled(has)

    # --- views -----------------------------------------------------------------------------------------------

    def _refresh_views(self, all_dirty: bool = True) -> None:
        if all_dirty:
            self._dirty = set(range(len(self.views)))
        current = self.tabs.currentIndex()
        if current in self._dirty and self._result is not None:
            self._dirty.discard(current)
            self.views[current].refresh()

    def _tab_changed(self, index: int) -> None:
        self.prebuild.postpone()
        if self._result is not None:
            self._update_explanation()
        if index in self._dirty and self._result is not None:
            self._when_ready(lambda: self._refresh_views(all_dirty=False))

    def _update_inspector(self) -> None:
        self._update_explanation(self._show_inspector())

    def _show_inspector(self) -> list:
        """The inspector's text for the current step; a large step's statistics (5–10 ms of numbers at 512
        tokens) are made off the UI thread and filled in when ready, so they never hold back drawing the step.
        Returns the step's parameter lines."""
        step, result, batch = self.current_step(), self._result, self._batch
        stats, params = None, []
        if step is not None and result is not None:
            params = teaching.parameter_lines(result.parameters, step)
            work = stats_work(result, [step], batch)  # nothing when they are at hand or cheap to make now
            if work:
                self._make_stats(work, step, batch)
            else:
                stats = result.stats_for(step, batch)
        n_steps = len(result.trace) if result is not None else 0
        self.inspector_panel.show_step(step, stats, n_steps, batch, self._head, params)
        return params

    def _make_stats(self, work: list, step: Step, batch: int) -> None:
        """Make the step's statistics (`work`, from stats_work) in a job (one at a time; the latest step asked is
        looked at again when it ends), then show them if the user is still there."""
        if self._stats.busy():
            return
        result = self._result

        def done(_news) -> None:  # a failure too: the inspector's numbers are not worth a sentence
            if self._closing or self._result is not result or self.current_step() is None:
                return
            if self.current_step() is not step or self._batch != batch or result.has_stats(step, batch):
                self._show_inspector()  # this step's numbers, or a new job for the step the user went on to
            # else its numbers were released before the job read them (a tight memory budget): the inspector
            # keeps "being computed…" until the step is drawn again, rather than asking over and over

        self._stats.start(lambda job: run_all(work, job.cancelled), on_result=done, on_error=done)

    def refresh_explanation(self) -> None:
        """Rewrite the explanation panel: a view calls it when what it shows changed without a new step."""
        if self.tabs.currentWidget() is not None:
            self._update_explanation()

    def _update_explanation(self, params: list | None = None) -> None:
        """The explanation panel: the current step's explanation on the Step and Heads tabs, the open tab's
        (what it shows, why, this run's numbers) on the others."""
        if self._closing:
            return  # the panel's job would outlive it
        step, result, batch = self.current_step(), self._result, self._batch
        view = self.tabs.currentWidget()
        tab = view.explains if view is not None else None
        if result is not None and tab is not None:
            self.explain_panel.set_title(TAB_TITLE)

            facts = view.explain_facts()  # read here: the text is made on a worker thread (explain_panel)

            def tab_text() -> str:
                try:
                    return tab_html(view.title, teaching.tab_explanation_for(result, tab, batch, facts))
                except Exception as exc:  # noqa: BLE001 - a missing text must not take the window down
                    raise ExplanationFailed("", f"No explanation for this tab: {exc}") from exc

            self.explain_panel.show_later(tab_text)
            return
        self.explain_panel.set_title(STEP_TITLE)
        if step is None:
            self.explain_panel.show_html("")
            return
        if params is None:
            params = teaching.parameter_lines(result.parameters, step)

        def html() -> str:  # made on a worker thread: it reads the step's numbers (explain_panel)
            try:
                explanation = teaching.explanation_for(result, step, batch)
            except Exception as exc:  # noqa: BLE001 - a missing text must not take the stepper down
                raise ExplanationFailed(explanation_html(step, None, params),
                                        f"No explanation for this step: {exc}") from exc
            return explanation_html(step, explanation, params)

        self.explain_panel.show_later(html)  # the heatmap first; the text once stepping pauses

    def show_hover(self, text: str) -> None:
        self.inspector_panel.show_hover(text)

    def heatmap_for(self, step: Step, batch: int, head: int) -> Heatmap:
        """The heatmap of a step (vocabulary-wide steps are cached: reducing 50 257 columns is slow)."""
        return self._result.heatmap_for(step, batch, head)

    # --- what the exporters read -----------------------------------------------------------------------------

    def current_result(self) -> RunResult | None:
        return self._result

    def current_trace(self):
        return self._result.trace if self._result is not None else None

    def current_bundle(self):
        return self._result.bundle if self._result is not None else None

    def current_step(self) -> Step | None:
        trace = self.current_trace()
        return trace[self._index] if trace is not None and 0 <= self._index < len(trace) else None

    def current_batch(self) -> int:
        return self._batch

    def current_head(self) -> int:
        return self._head

    def current_view(self) -> View:
        return self.views[self.tabs.currentIndex()]

    def request_export(self, kind: str) -> None:
        """Every export menu item and plot context menu lands here; app/export/actions.py does the work."""
        # the interactive page has a module of its own: it uses actions' dialogs, and actions importing it back
        # would be an import cycle, which import-linter's contract (pyproject.toml) refuses
        name = "app.export.page_export" if kind == "page" else "app.export.actions"
        try:
            actions = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name in ("app.export", name):
                self.show_message("Export is not available in this build.")
                return
            raise
        try:
            actions.handle(self, kind)
        except UserError as exc:
            self.show_error(str(exc))
        except Exception as exc:  # noqa: BLE001 - an export failure must not take the window down
            self.show_error(f"The export failed: {exc}")

    # --- messages, dialogs, shutdown -------------------------------------------------------------------------

    def show_message(self, text: str) -> None:
        self.message.setStyleSheet("")
        self.message.setText(text)

    def show_error(self, text: str) -> None:
        self.message.setStyleSheet("color: #b00020; font-weight: bold;")
        self.message.setText(text)

    def message_text(self) -> str:
        return self.message.text()

    def show_about(self) -> None:
        menus.show_about(self)

    def show_shortcuts(self) -> None:
        menus.show_shortcuts(self)

    def shutdown(self) -> None:
        """Stop the timer, the key filter and the worker thread (waits for a run in progress to finish)."""
        if self._closing:
            return
        self._closing = True
        self.stop_play()
        self.prebuild.stop()
        self._prefetch_timer.stop()
        self._diagram_timer.stop()
        self.explain_panel.stop()
        self.comparison.shutdown()
        for jobs in (self._recompute, self._prefetcher, self._stats, self.page_jobs):
            jobs.shutdown()  # a sublayer's rerun in flight finishes (it cannot be interrupted midway)
        for view in self.views:  # a view's own background work (head importance)
            view.shutdown()
        draw_queue().wait()  # the numbers of maps waiting to draw, being made (a few milliseconds)
        if self.lesson_panel is not None:
            self.lesson_panel.shutdown()
        self.worker.shutdown()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self.side.fit_window(self.width(), self.height())

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        from .training.training_close import window_may_close

        if not self._closing and not window_may_close(self):  # a training run asks first (training_close.py)
            event.ignore()
            return
        if self.persist and not self._closing:
            self.save_settings()
        self.shutdown()
        super().closeEvent(event)
