"""The choices of File › Train…: task or file, model size, epochs, snapshots, limits, threads, output folder.

TrainForm holds the fields and turns them into a TrainRequest; `changed` fires whenever the run it describes
changes (the dialog then counts the parameters and estimates the time again).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.training import TrainOptions

from .training_runner import TrainRequest, default_output_folder

OWN_FILE = "file"
TASK_ITEMS = (
    ("en-hi — toy English → Hindi translation", "en-hi"),
    ("copy — repeat a run of digits", "copy"),
    ("reverse — the digits backwards", "reverse"),
    ("sort — the digits in order", "sort"),
    ("Your own file: source<TAB>target pairs, or plain text…", OWN_FILE),
)
# name → (d_model, heads, layers in each stack, d_ff); "custom" is whatever the boxes hold
SIZES = {
    "tiny": (32, 2, 1, 64),
    "small (the bundled copy / reverse / sort)": (64, 4, 2, 128),
    "medium (the bundled en-hi)": (128, 4, 2, 256),
}
CUSTOM = "custom"
EPOCHS = {"en-hi": 14, "copy": 12, "reverse": 30, "sort": 60}  # what the bundled models were trained for
DEFAULT_EPOCHS = 10
DEFAULT_SNAPSHOTS = 6


def default_threads() -> int:
    """Torch's threads in this process, less one core for the window itself (two busy processes with a thread
    per core each slow down sharply: their threads wait for each other)."""
    return max(1, min(torch.get_num_threads(), (os.cpu_count() or 1) - 1))


def file_kind(path: str) -> str:
    """"pairs" for a TSV of source<TAB>target lines (by its name, or a tab in its first line), else "text"."""
    p = Path(path)
    if p.suffix.lower() in (".tsv", ".tab"):
        return "pairs"
    try:
        with open(p, "rb") as f:
            head = f.read(65536)
    except OSError:
        return "text"  # the run (or the estimate) will say why the file cannot be read
    first = next((line for line in head.splitlines() if line.strip()), b"")
    return "pairs" if b"\t" in first else "text"


def _spin(low: int, high: int, value: int, step: int = 1, special: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setValue(value)
    if special:
        box.setSpecialValueText(special)
    return box


def _row(*items) -> QHBoxLayout:
    """A row of widgets; a string becomes a label before the next widget."""
    row = QHBoxLayout()
    for item in items:
        row.addWidget(QLabel(item) if isinstance(item, str) else item)
    row.addStretch(1)
    return row


class TrainForm(QWidget):
    changed = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.out_edited = False  # the user typed or chose a folder: stop following the task

        self.task_box = QComboBox()
        for text, key in TASK_ITEMS:
            self.task_box.addItem(text, key)
        self.task_box.setCurrentIndex(1)  # copy: attention forms within a minute or two
        self.file_edit = QLineEdit()
        self.file_edit.setPlaceholderText("a .tsv of source<TAB>target lines, or a UTF-8 text file")
        self.file_button = QPushButton("Browse…")
        self.file_button.clicked.connect(self._choose_file)
        self.file_kind_label = QLabel()
        self.file_kind_label.setStyleSheet("color: #555;")
        file_row = QHBoxLayout()
        file_row.addWidget(self.file_edit, 1)
        file_row.addWidget(self.file_button)

        self.size_box = QComboBox()
        for name in [*SIZES, CUSTOM]:
            self.size_box.addItem(name, name)
        self.d_model, self.heads = _spin(8, 2048, 32, 8), _spin(1, 32, 2)
        self.layers, self.d_ff = _spin(1, 12, 1), _spin(8, 8192, 64, 8)
        self.estimate_label = QLabel("Counting the parameters…")
        self.estimate_label.setWordWrap(True)
        self.estimate_label.setToolTip("The parameter count is exact (the model is built, not trained). The time is "
                                       "an estimate: a few training steps and a validation pass are timed here "
                                       "and scaled to the whole run.")

        self.epochs = _spin(1, 10_000, EPOCHS["copy"])
        self.snapshots = _spin(0, 50, DEFAULT_SNAPSHOTS, special="none")
        self.snapshots.setToolTip("Keep the model at this many steps, denser early where attention forms; the "
                                  "Training tab scrubs through them")
        self.max_steps = _spin(0, 10_000_000, 0, 100, special="no limit")
        self.max_minutes = QDoubleSpinBox()
        self.max_minutes.setRange(0, 100_000)
        self.max_minutes.setDecimals(1)
        self.max_minutes.setSpecialValueText("no limit")
        self.threads = _spin(1, max(1, os.cpu_count() or 1), default_threads())
        self.threads.setToolTip("CPU threads the training process uses; the default leaves a core to the window")

        self.out_edit = QLineEdit()
        self.out_edit.textEdited.connect(lambda _t: setattr(self, "out_edited", True))
        self.out_button = QPushButton("Browse…")
        self.out_button.clicked.connect(self._choose_out)
        out_row = QHBoxLayout()
        out_row.addWidget(self.out_edit, 1)
        out_row.addWidget(self.out_button)

        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Task", self.task_box)
        form.addRow("File", file_row)
        form.addRow("", self.file_kind_label)
        form.addRow("Model size", _row(self.size_box, "d_model", self.d_model, "heads", self.heads, "layers",
                                       self.layers, "d_ff", self.d_ff))
        form.addRow("", self.estimate_label)
        form.addRow("Training", _row("epochs", self.epochs, "snapshots", self.snapshots, "stop after steps",
                                     self.max_steps, "or minutes", self.max_minutes, "threads", self.threads))
        form.addRow("Save to", out_row)

        self.task_box.currentIndexChanged.connect(lambda _i: self._task_changed())
        self.size_box.currentIndexChanged.connect(lambda _i: self._size_chosen())
        for box in (self.d_model, self.heads, self.layers, self.d_ff):
            box.valueChanged.connect(lambda _v: self._size_edited())
        for box in (self.epochs, self.snapshots, self.max_steps):
            box.valueChanged.connect(lambda _v: self.changed.emit())
        self.file_edit.editingFinished.connect(self.file_changed)
        self._task_changed()

    def task(self) -> str:
        return self.task_box.currentData()

    def set_task(self, key: str, path: str = "") -> None:
        """Choose a task by key (en-hi, copy, reverse, sort, or "file" with the file's path)."""
        if path:
            self.file_edit.setText(path)
        if self.task_box.findData(key) == self.task_box.currentIndex():
            self._task_changed()
        else:
            self.task_box.setCurrentIndex(max(0, self.task_box.findData(key)))

    def set_size(self, name: str) -> None:
        self.size_box.setCurrentIndex(max(0, self.size_box.findData(name)))

    def sizes(self) -> tuple[int, int, int, int]:
        return self.d_model.value(), self.heads.value(), self.layers.value(), self.d_ff.value()

    def request(self) -> TrainRequest:
        """The run the form describes (UserError when the file is missing)."""
        task, path = self.task(), self.file_edit.text().strip()
        data = text = None
        if task == OWN_FILE:
            if not path:
                raise UserError("Choose the file to train on (a TSV of source<TAB>target pairs, or a text file).")
            if file_kind(path) == "pairs":
                data = path
            else:
                text = path
        d_model, heads, layers, d_ff = self.sizes()
        return TrainRequest(out=self.out_edit.text().strip(), task=None if task == OWN_FILE else task, data=data,
                            text=text, d_model=d_model, heads=heads, layers=layers, d_ff=d_ff,
                            epochs=self.epochs.value(), snapshots=self.snapshots.value(),
                            max_steps=self.max_steps.value() or None, max_minutes=self.max_minutes.value() or None,
                            threads=self.threads.value())

    @staticmethod
    def options(request: TrainRequest) -> TrainOptions:
        """The TrainOptions `scratchformer train` will build from the request (for the count and estimate)."""
        return TrainOptions(task=request.task, data=request.data, text=request.text, out=request.out,
                            epochs=request.epochs, d_model=request.d_model, heads=request.heads,
                            layers=request.layers, d_ff=request.d_ff, snapshots=request.snapshots,
                            max_steps=request.max_steps, threads=request.threads)

    def _task_changed(self) -> None:
        own = self.task() == OWN_FILE
        for w in (self.file_edit, self.file_button):
            w.setEnabled(own)
        if own and not self.file_edit.text().strip():
            self._choose_file()
        self.epochs.blockSignals(True)
        self.epochs.setValue(EPOCHS.get(self.task(), DEFAULT_EPOCHS))
        self.epochs.blockSignals(False)
        self.file_changed()

    def file_changed(self) -> None:
        """The file (or task) changed: say how the file is read, follow it with the output folder, re-estimate."""
        own, path = self.task() == OWN_FILE, self.file_edit.text().strip()
        if own and path:
            self.file_kind_label.setText("read as source<TAB>target pairs (translation-style training)"
                                         if file_kind(path) == "pairs" else
                                         "read as plain text: next-token prediction with GPT-2's tokens")
        self.file_kind_label.setVisible(own and bool(path))
        if not self.out_edited:
            self.out_edit.setText(str(default_output_folder(Path(path).stem if own and path else self.task())))
        self.changed.emit()

    def _size_chosen(self) -> None:
        name = self.size_box.currentData()
        if name in SIZES:
            for box, value in zip((self.d_model, self.heads, self.layers, self.d_ff), SIZES[name]):
                box.blockSignals(True)
                box.setValue(value)
                box.blockSignals(False)
        self.changed.emit()

    def _size_edited(self) -> None:
        match = next((n for n, s in SIZES.items() if s == self.sizes()), CUSTOM)
        self.size_box.blockSignals(True)
        self.size_box.setCurrentIndex(self.size_box.findData(match))
        self.size_box.blockSignals(False)
        self.changed.emit()

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Train on a file", "",
                                              "Pairs or text (*.tsv *.tab *.txt *.md);;All files (*)")
        if path:
            self.file_edit.setText(path)
            self.file_changed()

    def _choose_out(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Save the trained model in (an empty or new folder)")
        if path:
            self.out_edit.setText(path)
            self.out_edited = True
