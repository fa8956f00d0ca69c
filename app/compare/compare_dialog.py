"""Run › Compare with…: choose model B — a snapshot of the model shown (or, for a snapshot, its final model and
its other snapshots), another model of the list, or any folder or Hugging Face id typed in. Not modal; answers
through `chosen(spec)`."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from scratchformer.loading.bundle import snapshots_of, split_snapshot


def choices(model_spec: str, listed: list[str]) -> list[tuple[str, str]]:
    """(text, spec) of what the model `model_spec` can be compared with: its snapshots first (and its final model
    when it is a snapshot), then the other models of the window's list."""
    base, step = split_snapshot(model_spec)
    out = []
    if step is not None:
        out.append((f"{base} (the final model)", base))
    for snap in snapshots_of(base):
        spec = f"{base}@step-{snap.step:06d}"
        if snap.step != step:
            loss = f", valid loss {snap.valid_loss:.3f}" if snap.valid_loss is not None else ""
            out.append((f"{base} at training step {snap.step}{loss}", spec))
    out += [(spec, spec) for spec in listed if spec not in (model_spec, base)]
    return out


class CompareDialog(QDialog):
    chosen = Signal(str)

    def __init__(self, parent, model_spec: str, listed: list[str]) -> None:
        super().__init__(parent)
        self.setObjectName("compareDialog")
        self.setWindowTitle("Compare with…")
        self.resize(520, 380)
        layout = QVBoxLayout(self)
        heading = QLabel(f"Run the same input through {model_spec} (A) and another model (B), and compare every "
                         "step both compute:")  # fmt: skip
        heading.setWordWrap(True)
        heading.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(heading)
        self.list = QListWidget()
        for text, spec in choices(model_spec, listed):
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, spec)
            self.list.addItem(item)
        self.list.currentItemChanged.connect(
            lambda item, _old: item is not None and self.spec_edit.setText(item.data(Qt.ItemDataRole.UserRole)))
        self.list.itemDoubleClicked.connect(lambda _item: self.accept())
        layout.addWidget(self.list, 1)
        row = QHBoxLayout()
        self.spec_edit = QLineEdit()
        self.spec_edit.setPlaceholderText("a model name, NAME@step-N, a folder, or a Hugging Face id")
        self.spec_edit.returnPressed.connect(self.accept)
        row.addWidget(self.spec_edit, 1)
        browse = QPushButton("Folder…")
        browse.clicked.connect(self._browse)
        row.addWidget(browse)
        layout.addLayout(row)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Compare")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        if self.list.count():
            self.list.setCurrentRow(0)

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "A model folder")
        if folder:
            self.spec_edit.setText(folder)

    def accept(self) -> None:
        spec = self.spec_edit.text().strip()
        if spec:
            self.chosen.emit(spec)
        super().accept()
