"""The main window: inputs on top, diagram | views | inspector in the middle, the stepper at the bottom.

The window owns the state every view draws from (the current run, step, batch item and head) and exposes it
to the views and the exporters: current_result(), current_trace(), current_bundle(), current_step(),
current_batch(), current_head(), current_view(). Model work goes to a WorkerThread; nothing here runs the model.
"""

from __future__ import annotations

import html
import importlib
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QFont, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QSplitter,
    QStyle,
    QTabWidget,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from scratchformer.batching import read_text_file
from scratchformer.bundle import default_model_name, model_names
from scratchformer.device import available_devices
from scratchformer.errors import UserError
from scratchformer.plotdata import Heatmap, block_key, block_steps, step_heatmap
from scratchformer.trace import Step, breadcrumb

from .diagram import ArchitectureDiagram
from .settings import AppSettings
from .views.base import View
from .views.decoding_view import DecodingView
from .views.heads_view import HeadsView
from .views.masks_view import MasksView
from .views.output_view import OutputView
from .views.overview_view import OverviewView
from .views.pe_view import PositionalView
from .views.step_view import StepView
from .widgets.marked_line_edit import MarkedLineEdit
from .worker import RunResult, WorkerThread

# The centre tabs, in order. A new view is one more entry here (e.g. the decoding timeline's DecodingView).
VIEWS: list[type[View]] = [StepView, HeadsView, PositionalView, MasksView, OverviewView, OutputView, DecodingView]

EXPORT_MENU = (
    ("Current view as PNG…", "view_png", "Ctrl+E"),
    ("Current view as SVG…", "view_svg", ""),
    ("Current view as PDF…", "view_pdf", ""),
    ("All attention maps…", "all_attention", ""),
    ("Current tensor…", "tensor_current", ""),
    ("All tensors…", "tensors_all", ""),
    ("Copy current view to clipboard", "clipboard", "Ctrl+Shift+C"),
)
OPEN_ITEM = "Open…"
SPEEDS = (("Fast (0.25 s)", 250), ("Normal (0.8 s)", 800), ("Slow (2 s)", 2000))
MAX_FIELD_CHARS = 100_000  # a loaded file beyond this is cut (the model reads at most max_len tokens anyway)
STEP_KEYS = {Qt.Key.Key_Right, Qt.Key.Key_Left, Qt.Key.Key_Home, Qt.Key.Key_End, Qt.Key.Key_Space}
TEXT_INPUTS = (QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSpinBox)


def step_path(step: Step) -> str:
    """'Decoder 2 › Cross-attention › Attention weights (softmax)'."""
    return " › ".join(breadcrumb(step.sublayer) + [step.title])


def short_shape(step: Step) -> str:
    return " × ".join(str(n) for n in step.shape)


class StepKeys(QObject):
    """← → Home End (and Space to play) step through the walkthrough, except while typing in a text field."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt name)
        if event.type() != QEvent.Type.KeyPress or event.key() not in STEP_KEYS:
            return False
        if event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            return False
        if not isinstance(obj, QWidget) or obj.window() is not self.window:
            return False
        focus = QApplication.focusWidget()
        if isinstance(focus, TEXT_INPUTS) or (isinstance(focus, QComboBox) and focus.isEditable()):
            return False
        if event.key() == Qt.Key.Key_Space:
            if isinstance(focus, QAbstractButton):
                return False
            self.window.toggle_play()
            return True
        {
            Qt.Key.Key_Right: self.window.next_step,
            Qt.Key.Key_Left: self.window.previous_step,
            Qt.Key.Key_Home: self.window.first_step,
            Qt.Key.Key_End: self.window.last_step,
        }[event.key()]()
        return True


class BatchingDialog(QDialog):
    """For a long text: one input cut to the model's length, or the walkthrough's windows (S tokens, stride 1)."""

    def __init__(self, parent, n_words: int, max_len: int | None) -> None:
        super().__init__(parent)
        self.setWindowTitle("How should the text be read?")
        layout = QVBoxLayout(self)
        intro = QLabel(f"The file has about {n_words} words.")
        layout.addWidget(intro)
        limit = f" (at most {max_len} tokens)" if max_len else ""
        self.whole = QRadioButton(f"As one input, cut to the model's maximum length{limit}")
        self.windows = QRadioButton("As the walkthrough's batch: windows of S tokens with stride 1, first B windows")
        self.whole.setChecked(True)
        layout.addWidget(self.whole)
        layout.addWidget(self.windows)
        form = QFormLayout()
        self.seq_len = QSpinBox()
        self.seq_len.setRange(1, max_len or 4096)
        self.seq_len.setValue(min(10, max_len or 10))
        self.batch = QSpinBox()
        self.batch.setRange(1, 64)
        self.batch.setValue(4)
        form.addRow("Window length S (tokens)", self.seq_len)
        form.addRow("Number of windows B", self.batch)
        layout.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def choice(self) -> tuple[int, int] | None:
        return (self.seq_len.value(), self.batch.value()) if self.windows.isChecked() else None


class MainWindow(QMainWindow):
    def __init__(self, settings: AppSettings | None = None, persist: bool = True) -> None:
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
        self._windows: tuple[int, int] | None = None
        self._pending_step: str | None = None
        self._pending_generation = 0
        self._dirty: set[int] = set()
        self._closing = False
        self.worker = WorkerThread(self)
        self.worker.worker.finished.connect(self._on_finished)
        self.worker.worker.failed.connect(self._on_failed)
        self.play_timer = QTimer(self)
        self.play_timer.timeout.connect(self._play_tick)

        self._build_inputs()
        self._build_centre()
        self._build_stepper()
        self._build_status()
        self._build_menus()
        self._restore()
        self.keys = StepKeys(self)
        QApplication.instance().installEventFilter(self.keys)
        self._update_controls()

    # --- construction ----------------------------------------------------------------------------------------

    def _build_inputs(self) -> None:
        top = QWidget()
        grid = QGridLayout(top)
        grid.setContentsMargins(8, 6, 8, 2)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        self.source_edit = MarkedLineEdit("The sentence the encoder reads. Enter runs the model.")
        self.source_edit.setMaxLength(MAX_FIELD_CHARS)
        self.source_edit.setPlaceholderText("Source sentence (what the encoder reads)")
        self.source_edit.textEdited.connect(self._source_edited)
        self.target_edit = QLineEdit()
        self.target_edit.setMaxLength(MAX_FIELD_CHARS)
        self.target_edit.setPlaceholderText("Target sentence for teacher forcing (empty: just the start token)")
        self.target_edit.setToolTip("The decoder reads the start token followed by this text (teacher forcing).")
        for edit in (self.source_edit, self.target_edit):
            edit.returnPressed.connect(self.run)
        self.load_button = QPushButton("Load text…")
        self.load_button.setToolTip("Read the source from a UTF-8 text file (Ctrl+O)")
        self.load_button.clicked.connect(lambda: self.open_text_dialog())
        self.windows_label = QLabel()
        self.windows_label.setStyleSheet("color: #8a5a00;")
        self.windows_label.setVisible(False)
        self.model_combo = QComboBox()
        self.model_combo.setToolTip("Presets have random weights; bundled models are trained; Open… reads a folder")
        self.model_combo.setMinimumWidth(150)
        self.model_combo.activated.connect(self._model_activated)
        self.device_combo = QComboBox()
        self.device_combo.addItems(available_devices())
        self.device_combo.setToolTip("Where the model runs (CUDA is listed only where PyTorch finds it)")
        self.run_button = QPushButton("Run")
        self.run_button.setDefault(True)
        self.run_button.setToolTip("Run the model on the text (Ctrl+Enter)")
        self.run_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPlay))
        self.run_button.clicked.connect(self.run)
        grid.addWidget(QLabel("Source"), 0, 0)
        grid.addWidget(self.source_edit, 0, 1)
        grid.addWidget(self.load_button, 0, 2)
        grid.addWidget(QLabel("Model"), 0, 3)
        grid.addWidget(self.model_combo, 0, 4)
        grid.addWidget(QLabel("Target"), 1, 0)
        grid.addWidget(self.target_edit, 1, 1)
        grid.addWidget(self.windows_label, 1, 2)
        grid.addWidget(QLabel("Device"), 1, 3)
        grid.addWidget(self.device_combo, 1, 4)
        grid.addWidget(self.run_button, 0, 5, 2, 1)
        self.run_button.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        grid.setColumnStretch(1, 1)
        self.notes_label = QLabel()
        self.notes_label.setWordWrap(True)
        self.notes_label.setStyleSheet(
            "background: #fff4ce; border: 1px solid #e0c36b; border-radius: 3px; padding: 3px 6px;"
        )
        self.notes_label.setVisible(False)
        grid.addWidget(self.notes_label, 2, 0, 1, 6)
        self._top = top

    def _build_centre(self) -> None:
        self.diagram = ArchitectureDiagram()
        self.diagram.block_clicked.connect(self.go_to_block)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.views: list[View] = []
        for cls in VIEWS:
            view = cls(self)
            self.views.append(view)
            i = self.tabs.addTab(view, cls.title)
            self.tabs.setTabToolTip(i, cls.tooltip)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.inspector = QPlainTextEdit()
        self.inspector.setReadOnly(True)
        mono = QFont("DejaVu Sans Mono")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        mono.setPointSizeF(9.0)
        self.inspector.setFont(mono)
        self.inspector.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.hover_label = QLabel("Hover a heatmap cell to read its value.")
        self.hover_label.setFont(mono)
        self.hover_label.setWordWrap(True)
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hover_label.setStyleSheet("background: #f3f6fa; border: 1px solid #d6dde6; padding: 4px;")
        side = QWidget()
        sl = QVBoxLayout(side)
        sl.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Inspector</b>")
        sl.addWidget(title)
        sl.addWidget(self.inspector, 1)
        sl.addWidget(QLabel("<b>Under the mouse</b>"))
        sl.addWidget(self.hover_label)
        diagram_host = QWidget()
        dl = QVBoxLayout(diagram_host)
        dl.setContentsMargins(0, 0, 0, 0)
        dl.addWidget(QLabel("<b>Architecture</b> — click a block to go there"))
        dl.addWidget(self.diagram, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(diagram_host)
        self.splitter.addWidget(self.tabs)
        self.splitter.addWidget(side)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([400, 700, 300])
        self.splitter.setChildrenCollapsible(False)

    def _tool(self, pixmap, tip: str, slot) -> QToolButton:
        b = QToolButton()
        b.setIcon(self.style().standardIcon(pixmap))
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(slot)
        return b

    def _build_stepper(self) -> None:
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(8, 2, 8, 4)
        sp = QStyle.StandardPixmap
        self.first_button = self._tool(sp.SP_MediaSkipBackward, "First step (Home)", self.first_step)
        self.prev_button = self._tool(sp.SP_MediaSeekBackward, "Previous step (←)", self.previous_step)
        self.next_button = self._tool(sp.SP_MediaSeekForward, "Next step (→)", self.next_step)
        self.last_button = self._tool(sp.SP_MediaSkipForward, "Last step (End)", self.last_step)
        self.play_button = self._tool(sp.SP_MediaPlay, "Play / pause (Space)", self.toggle_play)
        for b in (self.first_button, self.prev_button, self.next_button, self.last_button, self.play_button):
            row.addWidget(b)
        self.speed_combo = QComboBox()
        for text, ms in SPEEDS:
            self.speed_combo.addItem(text, ms)
        self.speed_combo.setToolTip("Playback speed")
        self.speed_combo.currentIndexChanged.connect(
            lambda _i: self.play_timer.setInterval(int(self.speed_combo.currentData()))
        )
        row.addWidget(self.speed_combo)
        self.detail_combo = QComboBox()
        self.detail_combo.addItem("Sublayers only", "major")
        self.detail_combo.addItem("Every operation", "all")
        self.detail_combo.setToolTip("Step through whole sublayers, or every operation inside them")
        self.detail_combo.currentIndexChanged.connect(lambda _i: self._detail_changed())
        row.addWidget(self.detail_combo)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("All steps of the walkthrough")
        self.slider.valueChanged.connect(self._slider_moved)
        row.addWidget(self.slider, 2)
        self.counter = QLabel("–")
        self.counter.setMinimumWidth(70)
        self.counter.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.counter)
        self.crumb = QLabel("Run the model to begin.")
        crumb_font = self.crumb.font()
        crumb_font.setPointSizeF(crumb_font.pointSizeF() * 1.15)
        crumb_font.setBold(True)
        self.crumb.setFont(crumb_font)
        self.crumb.setMinimumWidth(360)
        row.addWidget(self.crumb, 3)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._top)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(bar)
        self.setCentralWidget(central)

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

    def _build_menus(self) -> None:
        mb = self.menuBar()
        file_menu = mb.addMenu("&File")
        self._action(file_menu, "Open &text…", lambda: self.open_text_dialog(), QKeySequence.StandardKey.Open)
        self._action(file_menu, "Open &model…", lambda: self.open_model_dialog(), "Ctrl+Shift+O")
        export = file_menu.addMenu("&Export")
        self.export_actions: dict[str, QAction] = {}
        for text, kind, key in EXPORT_MENU:
            self.export_actions[kind] = self._action(export, text, lambda k=kind: self.request_export(k), key or None)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit).setShortcut("Ctrl+Q")
        run_menu = mb.addMenu("&Run")
        run = self._action(run_menu, "&Run model", self.run, "Ctrl+Return")
        run.setShortcuts([QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter"), QKeySequence("F5")])
        run_menu.addSeparator()
        self._action(run_menu, "&Next step", self.next_step, "Alt+Right")
        self._action(run_menu, "&Previous step", self.previous_step, "Alt+Left")
        self._action(run_menu, "&First step", self.first_step, "Alt+Home")
        self._action(run_menu, "&Last step", self.last_step, "Alt+End")
        self._action(run_menu, "Play / &pause", self.toggle_play, "Ctrl+Space")
        view_menu = mb.addMenu("&View")
        self._action(view_menu, "&Sublayers only", lambda: self.set_detail("major"), "Ctrl+Shift+S")
        self._action(view_menu, "&Every operation", lambda: self.set_detail("all"), "Ctrl+Shift+A")
        view_menu.addSeparator()
        for i, cls in enumerate(VIEWS):
            self._action(view_menu, cls.title, lambda i=i: self.tabs.setCurrentIndex(i), f"Ctrl+{i + 1}")
        help_menu = mb.addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, QKeySequence.StandardKey.HelpContents)
        self._action(help_menu, "&About scratchformer", self.show_about)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    # --- settings --------------------------------------------------------------------------------------------

    def _fill_models(self, select: str | None = None) -> None:
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        for name in model_names():
            self.model_combo.addItem(name, name)
        for path in self.settings.get("opened_models"):
            if Path(path).exists():
                self.model_combo.addItem(Path(path).name, path)
                self.model_combo.setItemData(self.model_combo.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
        self.model_combo.insertSeparator(self.model_combo.count())
        self.model_combo.addItem(OPEN_ITEM, OPEN_ITEM)
        self.model_combo.blockSignals(False)
        if select:
            self.set_model(select)

    def _restore(self) -> None:
        s = self.settings
        self.source_edit.setText(s.get("source"))
        self.target_edit.setText(s.get("target"))
        self._fill_models(s.get("model") or default_model_name())
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
        data = self.model_combo.currentData()
        return "" if data in (None, OPEN_ITEM) else str(data)

    def set_model(self, spec: str) -> None:
        """Select a model by name or path, adding a path to the list if it is not there yet."""
        i = self.model_combo.findData(spec)
        if i < 0:
            i = self.model_combo.findText(spec)
        if i < 0:
            self.model_combo.insertItem(self.model_combo.count() - 2, Path(spec).name or spec, spec)
            i = self.model_combo.findData(spec)
        self.model_combo.setCurrentIndex(i)
        self._last_model_index = i

    def set_device(self, device: str) -> None:
        if self.device_combo.findText(device) < 0:
            self.device_combo.addItem(device)  # the run will say why it is not available
        self.device_combo.setCurrentText(device)

    def _model_activated(self, index: int) -> None:
        if self.model_combo.itemData(index) == OPEN_ITEM:
            self.model_combo.setCurrentIndex(getattr(self, "_last_model_index", 0))
            self.open_model_dialog()
        else:
            self._last_model_index = index

    def open_model_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a model folder (checkpoint directory)")
        if path:
            self.open_model(path)

    def open_model(self, path: str, run: bool = True) -> None:
        """Add a checkpoint directory to the model list and run it (errors appear in the status bar)."""
        opened = [p for p in self.settings.get("opened_models") if p != path]
        if self.persist:
            self.settings.set("opened_models", ([path] + opened)[:8])
        self.set_model(path)
        if run:
            self.run()

    def _source_edited(self, _text: str) -> None:
        if self._windows is not None:
            self.set_windows(None)

    def set_windows(self, windows: tuple[int, int] | None) -> None:
        self._windows = windows
        self.windows_label.setVisible(windows is not None)
        self.target_edit.setEnabled(windows is None)
        if windows is not None:
            s, b = windows
            self.windows_label.setText(f"batch: {b} windows × {s} tokens")
            self.windows_label.setToolTip(
                "The walkthrough's batching: windows of S tokens with stride 1; the decoder reads each window "
                "shifted right behind the start token. Edit the source to go back to one sentence."
            )

    def open_text_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a text file", "", "Text files (*.txt *.md);;All files (*)")
        if path:
            self.load_text_file(path)

    def load_text_file(self, path: str, windows: tuple[int, int] | None | str = "ask", run: bool = True) -> bool:
        """Read a UTF-8 text file into the source. windows: (S, B), None (one input) or "ask" (a dialog for
        long texts). Bad files (missing, binary, not UTF-8, too big) give one sentence in the status bar."""
        try:
            text = read_text_file(path)
        except UserError as exc:
            self.show_error(str(exc))
            return False
        except OSError as exc:
            self.show_error(f"Cannot read {path}: {exc.strerror or exc}.")
            return False
        note = ""
        if len(text) > MAX_FIELD_CHARS:
            text = text[:MAX_FIELD_CHARS]
            note = f" Only its first {MAX_FIELD_CHARS:,} characters were kept."
        if windows == "ask":
            n_words = len(text.split())
            windows = None
            if n_words > 12:
                max_len = self._result.bundle.config.max_len if self._result is not None else None
                dialog = BatchingDialog(self, n_words, max_len)
                if dialog.exec() != QDialog.DialogCode.Accepted:
                    return False
                windows = dialog.choice()
        flat = " ".join(text.split()) if windows is None else text
        self.source_edit.setText(flat)
        self.set_windows(windows)
        self.show_message(f"Loaded {Path(path).name} ({len(text):,} characters).{note}")
        if run:
            self.run()
        return True

    def run(self) -> None:
        """Queue a run of the current inputs; a newer run supersedes one still in progress."""
        source = self.source_edit.text()
        if not source.strip():
            self.show_error("The source text is empty; type a sentence first.")
            return
        model = self.model_spec()
        if not model:
            self.show_error("No model is selected; pick one from the list or open a model folder.")
            return
        self.stop_play()
        self._pending_generation = self.worker.submit(
            model=model,
            device=self.device_combo.currentText(),
            source=source,
            target=self.target_edit.text(),
            windows=self._windows,
        )
        self.busy.setVisible(True)
        self.show_message(f"Running {model} on {self.device_combo.currentText()}…")

    def _on_finished(self, generation: int, result: RunResult) -> None:
        if self._closing or not self.worker.is_current(generation):
            return  # an older run finished after a newer one was asked for
        self.busy.setVisible(False)
        self.set_result(result)

    def _on_failed(self, generation: int, message: str) -> None:
        if self._closing or not self.worker.is_current(generation):
            return
        self.busy.setVisible(False)
        self.show_error(message)

    def is_busy(self) -> bool:
        return self.busy.isVisible()

    def set_result(self, result: RunResult) -> None:
        previous = self.current_step()
        self._result = result
        trace = result.trace
        self.diagram.set_model(result.bundle.config)
        shapes = {}
        for key, indices in block_steps(trace).items():
            last = trace[indices[-1]]
            shapes[key] = (short_shape(last), last.shape_text())
        self.diagram.set_shapes(shapes)
        self._batch = min(self._batch, max(0, len(trace.source_tokens or trace.target_tokens) - 1))
        self._compute_visible()
        notes = list(result.notes)
        for side, words in (("source", result.inputs.unknown_words), ("target", result.inputs.unknown_target_words)):
            if words:
                notes.append(f"Words the model does not know in the {side} (read as <unk>): {', '.join(words[:8])}.")
        self.notes_label.setText("  ".join(f"⚠ {n}" for n in notes))
        self.source_edit.mark_words(result.inputs.unknown_words if self._windows is None else [])
        self.notes_label.setVisible(bool(notes))
        self.model_info.setText(result.bundle.describe())
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

    # --- stepping --------------------------------------------------------------------------------------------

    def _compute_visible(self) -> None:
        trace = self.current_trace()
        if trace is None:
            self._visible = []
            return
        major = self.detail_combo.currentData() == "major"
        self._visible = [s.index for s in trace if s.major or not major]
        if not self._visible:
            self._visible = [s.index for s in trace]
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, len(self._visible) - 1))
        self.slider.setPageStep(max(1, len(self._visible) // 10))
        self.slider.blockSignals(False)

    def _detail_changed(self) -> None:
        self._compute_visible()
        if self._result is not None and self._visible:
            if self._index not in self._visible:  # land on the sublayer's major step at or after this one
                later = [i for i in self._visible if i >= self._index]
                self.go_to(later[0] if later else self._visible[-1], force=True)
            else:
                self.go_to(self._index, force=True)

    def set_detail(self, mode: str) -> None:
        self.detail_combo.setCurrentIndex(max(0, self.detail_combo.findData(mode)))

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
            self.detail_combo.blockSignals(True)
            self.set_detail("all")
            self.detail_combo.blockSignals(False)
            self._compute_visible()
        self._index = index
        step = trace[index]
        self.slider.blockSignals(True)
        self.slider.setValue(self._position())
        self.slider.blockSignals(False)
        self.counter.setText(f"{self._position() + 1} / {len(self._visible)}")
        self.crumb.setText(step_path(step))
        self.crumb.setToolTip(f"{step.name}\n{step.formula}")
        self.diagram.set_current(block_key(step))
        self._update_inspector()
        self._update_controls()
        self._refresh_views()

    def set_batch(self, batch: int) -> None:
        if batch != self._batch:
            self._batch = max(0, batch)
            self._update_inspector()
            self._refresh_views(all_dirty=True)

    def set_head(self, head: int) -> None:
        if head != self._head:
            self._head = max(0, head)
            self._update_inspector()
            self._refresh_views(all_dirty=True)

    def toggle_play(self) -> None:
        if self.play_timer.isActive():
            self.stop_play()
        elif self._visible:
            if self._index == self._visible[-1]:
                self.first_step()
            self.play_timer.start(int(self.speed_combo.currentData()))
            self.play_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPause))

    def stop_play(self) -> None:
        self.play_timer.stop()
        self.play_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPlay))

    def _play_tick(self) -> None:
        if not self._visible or self._index >= self._visible[-1]:
            self.stop_play()
        else:
            self.next_step()

    def _update_controls(self) -> None:
        has = bool(self._visible)
        at_start = not has or self._index <= self._visible[0]
        at_end = not has or self._index >= self._visible[-1]
        self.first_button.setEnabled(not at_start)
        self.prev_button.setEnabled(not at_start)
        self.next_button.setEnabled(not at_end)
        self.last_button.setEnabled(not at_end)
        self.play_button.setEnabled(has)
        self.slider.setEnabled(has)
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
        if index in self._dirty and self._result is not None:
            self._dirty.discard(index)
            self.views[index].refresh()

    def _update_inspector(self) -> None:
        step = self.current_step()
        if step is None:
            self.inspector.setPlainText("")
            return
        stats = self._result.stats[step.index]
        showing = [d for d in step.dims if d not in ("batch", "head")]
        sel = []
        if "batch" in step.dims:
            sel.append(f"batch item {min(self._batch, step.shape[step.dims.index('batch')] - 1) + 1}")
        if "head" in step.dims:
            sel.append(f"head {min(self._head, step.shape[step.dims.index('head')] - 1) + 1}")
        lines = [
            step_path(step),
            "",
            f"name     {step.name}",
            f"kind     {step.kind}",
            f"step     {step.index + 1} of {len(self._result.trace)}",
            "",
            "shape    " + " × ".join(f"{n} {d}" for n, d in zip(step.shape, step.dims)),
            f"         {tuple(step.shape)}",
            f"showing  {' × '.join(showing)}" + (f"  ({', '.join(sel)})" if sel else ""),
            "",
            "formula",
            f"  {step.formula}",
            "",
            "statistics (whole tensor)",
            *[f"  {line}" for line in stats.lines()],
        ]
        if "vocab" in step.dims:
            lines += ["", "The heatmap shows the 24 vocabulary columns", "that are in some row's top ranks."]
        self.inspector.setPlainText("\n".join(lines))

    def show_hover(self, text: str) -> None:
        self.hover_label.setText(text)

    def heatmap_for(self, step: Step, batch: int, head: int) -> Heatmap:
        """The heatmap of a step (vocabulary-wide steps are cached: reducing 50 257 columns is slow)."""
        result = self._result
        if "vocab" in step.dims:
            key = (step.index, batch, 0)
            if key not in result.heatmap_cache:
                result.heatmap_cache[key] = step_heatmap(result.trace, step, batch, 0, result.vocab_labels)
            hm = result.heatmap_cache[key]
            return Heatmap(**{**hm.__dict__})  # a copy: views may retitle what they show
        return step_heatmap(result.trace, step, batch, head, result.vocab_labels)

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
        try:
            actions = importlib.import_module("app.export.actions")
        except ModuleNotFoundError as exc:
            if exc.name in ("app.export", "app.export.actions"):
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
        QMessageBox.about(
            self,
            "About scratchformer",
            "<h3>scratchformer</h3><p>Step a sentence through the 2017 encoder-decoder Transformer "
            "(“Attention Is All You Need”), sublayer by sublayer, with live shapes and heatmaps.</p>"
            "<p>The model is written from scratch in PyTorch; the window uses PySide6 and pyqtgraph.</p>",
        )

    def show_shortcuts(self) -> None:
        rows = [
            ("→ / ←", "next / previous step (when not typing)"),
            ("Home / End", "first / last step"),
            ("Alt+→ / Alt+←", "next / previous step, anywhere"),
            ("Space", "play / pause"),
            ("Ctrl+Enter, F5", "run the model"),
            ("Ctrl+O", "open a text file"),
            ("Ctrl+Shift+O", "open a model folder"),
            ("Ctrl+1 … Ctrl+6", "switch view"),
            ("Ctrl+Q", "quit"),
        ]
        body = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>" for k, v in rows)
        QMessageBox.information(self, "Keyboard shortcuts", f"<table cellspacing=6>{body}</table>")

    def shutdown(self) -> None:
        """Stop the timer, the key filter and the worker thread (waits for a run in progress to finish)."""
        if self._closing:
            return
        self._closing = True
        self.stop_play()
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self.keys)
        self.worker.shutdown()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if self.persist and not self._closing:
            self.save_settings()
        self.shutdown()
        super().closeEvent(event)
