"""The input bar above the views: source and target fields, Load text…, model and device pickers, Run, notes.

It holds what the next run reads (the texts, the model spec, the device and the walkthrough's windows) and
asks the window to run, open a text file or open a model folder; it never runs anything itself.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QRadioButton,
    QSizePolicy,
    QSpinBox,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.loading import hf_cache
from scratchformer.loading.bundle import examples_of, model_names
from scratchformer.loading.device import available_devices
from scratchformer.running.batching import read_text_file

from ..widgets.marked_line_edit import MarkedLineEdit
from .continuation_controls import ContinuationControls

OPEN_ITEM = "Open…"


def model_label(spec: str) -> str:
    """How the model list names an opened model: a folder by its name, a cached Hugging Face id by the id."""
    return spec if hf_cache.looks_like_id(spec) else Path(spec).name or spec
TARGET_PLACEHOLDER = "Target for teacher forcing — leave empty: the decoder reads the model's own translation"
DECODER_INPUT = {  # what the label beside the target says the decoder reads
    "generated": "decoder input = the model's own translation",
    "typed": "decoder input = your target (teacher forcing)",
    "start_only": "decoder input = the start token only",
    "windows": "decoder input = each window shifted right",
    "prompt": "decoder input = your text (a decoder-only model)",
    "continued": "decoder input = text + continuation",
    "none": "",
}
MAX_FIELD_CHARS = 100_000  # a loaded file beyond this is cut (the model reads at most max_len tokens anyway)


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


class InputBar(QWidget):
    """The fields and pickers on top of the window; `window` provides run(), open_text_dialog() and
    open_model_dialog()."""

    def __init__(self, window) -> None:
        super().__init__()
        self.main = window
        self.windows: tuple[int, int] | None = None  # (S, B) when the source is read as the walkthrough's batch
        self._last_model_index = 0
        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 2)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        self.source_edit = MarkedLineEdit("The sentence the encoder reads. Enter runs the model.")
        self.source_edit.setMaxLength(MAX_FIELD_CHARS)
        self.source_edit.setPlaceholderText("Source sentence (what the encoder reads)")
        self.source_edit.textEdited.connect(self._source_edited)
        self.reads_target = True  # the current model is an encoder-decoder (known after its first run)
        self.decoder_only = False
        self.target_edit = QLineEdit()
        self.target_edit.setMaxLength(MAX_FIELD_CHARS)
        self.target_edit.setPlaceholderText(TARGET_PLACEHOLDER)
        self.target_edit.setToolTip(
            "The decoder reads the start token followed by this text (teacher forcing). Left empty, Run first lets "
            "the model translate (greedy decoding) and the decoder then reads that translation."
        )
        self.target_edit.textChanged.connect(lambda _t: self.update_decoder_label())
        self.start_only = QCheckBox("start token only")
        self.start_only.setToolTip("With an empty target: the decoder reads just the start token (one row)")
        self.start_only.toggled.connect(lambda _on: self.update_decoder_label())
        self.continuation_controls = ContinuationControls()  # in the target's place for a decoder-only model
        self.continuation_controls.setVisible(False)
        self.continuation_controls.new_tokens.valueChanged.connect(lambda _v: self.update_decoder_label())
        self.decoder_label = QLabel()
        self.decoder_label.setStyleSheet("color: #1d5fa8; font-style: italic;")
        self.examples_button = QToolButton()
        self.examples_button.setText("Examples")
        self.examples_button.setToolTip("Example inputs for this model, and your recent inputs")
        self.examples_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.examples_menu = QMenu(self.examples_button)
        self.examples_menu.aboutToShow.connect(self._fill_examples)
        self.examples_button.setMenu(self.examples_menu)
        for edit in (self.source_edit, self.target_edit):
            edit.returnPressed.connect(window.run)
        self.load_button = QPushButton("Load text…")
        self.load_button.setToolTip("Read the source from a UTF-8 text file (Ctrl+O)")
        self.load_button.clicked.connect(lambda: window.open_text_dialog())
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
        self.run_button.clicked.connect(window.run)
        grid.addWidget(QLabel("Source"), 0, 0)
        grid.addWidget(self.source_edit, 0, 1)
        source_tools = QHBoxLayout()
        source_tools.setSpacing(4)
        source_tools.addWidget(self.examples_button)
        source_tools.addWidget(self.load_button)
        source_tools.addStretch(1)
        grid.addLayout(source_tools, 0, 2)
        grid.addWidget(QLabel("Model"), 0, 3)
        grid.addWidget(self.model_combo, 0, 4)
        self.target_caption = QLabel("Target")
        grid.addWidget(self.target_caption, 1, 0)
        target_row = QHBoxLayout()
        target_row.setSpacing(8)
        target_row.addWidget(self.target_edit, 1)
        target_row.addWidget(self.continuation_controls, 1)
        target_row.addWidget(self.decoder_label)
        grid.addLayout(target_row, 1, 1)
        target_tools = QHBoxLayout()
        target_tools.addWidget(self.start_only)
        target_tools.addWidget(self.windows_label)
        grid.addLayout(target_tools, 1, 2)
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

    # --- models and devices ------------------------------------------------------------------------------------

    def fill_models(self, opened: list[str], select: str | None = None) -> None:
        """Presets and bundled models, then the folders and cached Hugging Face ids opened before (that are still
        there), then Open…."""
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        for name in model_names():
            self.model_combo.addItem(name, name)
        for path in opened:
            if Path(path).exists() or hf_cache.looks_like_id(path) and hf_cache.is_cached(path):
                self.model_combo.addItem(model_label(path), path)
                self.model_combo.setItemData(self.model_combo.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
        self.model_combo.insertSeparator(self.model_combo.count())
        self.model_combo.addItem(OPEN_ITEM, OPEN_ITEM)
        self.model_combo.blockSignals(False)
        if select:
            self.set_model(select)

    def model_spec(self) -> str:
        data = self.model_combo.currentData()
        return "" if data in (None, OPEN_ITEM) else str(data)

    def set_model(self, spec: str) -> None:
        """Select a model by name or path, adding a path to the list if it is not there yet."""
        i = self.model_combo.findData(spec)
        if i < 0:
            i = self.model_combo.findText(spec)
        if i < 0:
            self.model_combo.insertItem(self.model_combo.count() - 2, model_label(spec), spec)
            i = self.model_combo.findData(spec)
        previous = self.model_combo.itemData(self._last_model_index) if self._last_model_index >= 0 else None
        self.model_combo.setCurrentIndex(i)
        self._last_model_index = i
        if previous not in (None, OPEN_ITEM) and previous != spec:
            self.main.follow_examples(str(previous))

    def set_device(self, device: str) -> None:
        if self.device_combo.findText(device) < 0:
            self.device_combo.addItem(device)  # the run will say why it is not available
        self.device_combo.setCurrentText(device)

    def _model_activated(self, index: int) -> None:
        if self.model_combo.itemData(index) == OPEN_ITEM:
            self.model_combo.setCurrentIndex(self._last_model_index)
            self.main.open_model_dialog()
        else:
            previous = self.model_combo.itemData(self._last_model_index) if self._last_model_index >= 0 else None
            changed = index != self._last_model_index
            self._last_model_index = index
            self.reads_target = True  # until a run of the new model says otherwise
            self.decoder_only = False
            self._update_target_field()
            if changed:
                if previous not in (None, OPEN_ITEM):
                    self.main.follow_examples(str(previous))
                self.main.model_changed()

    # --- examples ----------------------------------------------------------------------------------------------

    def _fill_examples(self) -> None:
        """The current model's examples, then the inputs run before (most recent first)."""
        menu = self.examples_menu
        menu.clear()
        name = self.model_combo.currentText()
        menu.addSection(f"Examples for {name}")
        for example in examples_of(self.model_spec()):
            action = menu.addAction(example.menu_text())
            action.setToolTip(example.source)
            action.triggered.connect(lambda _c=False, e=example: self.main.use_example(e))
        history = self.main.history()
        if history:
            menu.addSection("Your recent inputs")
            for source, target in history:
                text = " ".join(source.split())
                text = text if len(text) <= 60 else text[:59] + "…"
                action = menu.addAction(text + (f"  →  {target}" if target else ""))
                action.triggered.connect(lambda _c=False, s=source, t=target: self.main.use_text(s, t))

    def replace_source(self, text: str) -> None:
        """Put text in the source as one edit, so Ctrl+Z in the field brings the old text back."""
        edit = self.source_edit
        edit.selectAll()
        edit.insert(text)
        edit.deselect()
        edit.setCursorPosition(0)  # show the start of a long example

    def replace_target(self, text: str) -> None:
        if self.target_edit.text() != text:
            self.target_edit.selectAll()
            self.target_edit.insert(text)
            self.target_edit.deselect()

    def update_decoder_label(self, mode: str | None = None) -> None:
        """Say what the decoder will read (before a run) or read (after one: `mode` from the run's inputs)."""
        if mode == "typed" and self.decoder_only:
            mode = "prompt"
        if mode == "generated" and self.decoder_only:
            mode = "continued"
        if mode is None:
            if self.decoder_only:
                continues = self.continuation_controls.continuation() is not None
                mode = "windows" if self.windows is not None else "continued" if continues else "prompt"
            elif not self.reads_target:
                mode = "none"
            elif self.windows is not None:
                mode = "windows"
            elif self.target_edit.text().strip():
                mode = "typed"
            else:
                mode = "start_only" if self.start_only.isChecked() else "generated"
        self.decoder_label.setText(DECODER_INPUT.get(mode, ""))
        # "Continue" and its controls say it already for a continuation (which needs the room when sampling)
        self.decoder_label.setVisible(bool(DECODER_INPUT.get(mode)) and mode != "continued")

    # --- the walkthrough's windows -------------------------------------------------------------------------------

    def _source_edited(self, _text: str) -> None:
        if self.windows is not None:
            self.set_windows(None)

    def show_model(self, spec: str, name: str, config) -> None:
        """After a run: a folder's entry takes the model's real name, and the target field is enabled only when
        the model has a decoder that reads a separate target (encoder-decoder models)."""
        i = self.model_combo.findData(spec)
        if i >= 0 and spec not in model_names():
            self.model_combo.setItemText(i, name)
            self.model_combo.setItemData(i, spec, Qt.ItemDataRole.ToolTipRole)
        self.reads_target = config.has_encoder and config.has_decoder
        self.decoder_only = config.has_decoder and not config.has_encoder
        self._update_target_field()

    def continuation(self):
        """How the next run continues a decoder-only model's text (scratchformer.running.generation.Continuation), or
        None; encoder-decoder and encoder-only models ignore it."""
        return self.continuation_controls.continuation()

    def _update_target_field(self) -> None:
        continues = self.decoder_only and self.windows is None  # the text's continuation takes the target's place
        if not continues:  # hide before anything is shown, so the bar never needs both widths at once
            self.continuation_controls.setVisible(False)
        self.target_edit.setVisible(not continues)
        self.target_caption.setText("Continue" if continues else "Target")
        self.target_edit.setEnabled(self.windows is None and self.reads_target)
        self.start_only.setEnabled(self.windows is None and self.reads_target)
        self.target_edit.setPlaceholderText(
            TARGET_PLACEHOLDER if self.reads_target
            else "This model has no separate target: it has no decoder, or its decoder reads the source"
        )
        self.update_decoder_label()
        self.continuation_controls.setVisible(continues)

    def set_windows(self, windows: tuple[int, int] | None) -> None:
        self.windows = windows
        self.windows_label.setVisible(windows is not None)
        self._update_target_field()
        if windows is not None:
            s, b = windows
            self.windows_label.setText(f"batch: {b} windows × {s} tokens")
            self.windows_label.setToolTip(
                "The walkthrough's batching: windows of S tokens with stride 1; the decoder reads each window "
                "shifted right behind the start token. Edit the source to go back to one sentence."
            )

    def load_text_file(self, path: str, windows: tuple[int, int] | None | str, max_len: int | None) -> str | None:
        """Read a UTF-8 text file into the source; windows: (S, B), None (one input) or "ask" (a dialog for
        long texts). Returns what to tell the user, or None when the dialog was cancelled; a file that cannot be
        read raises UserError with one sentence."""
        try:
            text = read_text_file(path)
        except OSError as exc:
            raise UserError(f"Cannot read {path}: {exc.strerror or exc}.") from None
        note = ""
        if len(text) > MAX_FIELD_CHARS:
            text = text[:MAX_FIELD_CHARS]
            note = f" Only its first {MAX_FIELD_CHARS:,} characters were kept."
        if windows == "ask":
            n_words = len(text.split())
            windows = None
            if n_words > 12:
                dialog = BatchingDialog(self.main, n_words, max_len)
                if dialog.exec() != QDialog.DialogCode.Accepted:
                    return None
                windows = dialog.choice()
        flat = " ".join(text.split()) if windows is None else text
        self.source_edit.setText(flat)
        self.main.set_windows(windows)
        return f"Loaded {Path(path).name} ({len(text):,} characters).{note}"
