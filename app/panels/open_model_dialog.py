"""Open…: choose a model to open — one of the cached Hugging Face models of a family scratchformer opens (listed
from the local cache, no network), a folder on disk, or a Hugging Face id typed in.

The list is read from the cache folder when the dialog opens (scratchformer.loading.hf_cache.cached_models: one small
config.json per cached model). Choosing a cached model opens it by its id (`org/name`), which the model list and
`--model` understand; a folder opens by its path. The dialog is not modal and answers through `chosen(spec)`.
"""

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

from scratchformer.loading.hf_cache import cached_models, hub_cache


class OpenModelDialog(QDialog):
    chosen = Signal(str)  # a folder's path or a Hugging Face id

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("openModelDialog")
        self.setWindowTitle("Open a model")
        self.resize(560, 380)
        layout = QVBoxLayout(self)
        models = cached_models()
        where = hub_cache()
        heading = QLabel(f"Models in the Hugging Face cache ({where}):" if models else
                         f"No model of a family scratchformer opens is in the Hugging Face cache ({where}). "
                         "Open a folder, or type a cached id (org/name).")  # fmt: skip
        heading.setWordWrap(True)
        heading.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(heading)
        self.cached = QListWidget()
        for m in models:
            item = QListWidgetItem(f"{m.repo_id}  ({m.model_type})")
            item.setData(Qt.ItemDataRole.UserRole, m.repo_id)
            item.setToolTip(str(m.folder))
            self.cached.addItem(item)
        self.cached.setVisible(bool(models))
        self.cached.currentItemChanged.connect(self._take_item)
        self.cached.itemDoubleClicked.connect(lambda _item: self.accept())
        layout.addWidget(self.cached, 1)
        row = QHBoxLayout()
        self.spec_edit = QLineEdit()
        self.spec_edit.setPlaceholderText("a model folder, or a Hugging Face id such as org/name")
        self.spec_edit.textChanged.connect(self._update_ok)
        self.spec_edit.returnPressed.connect(self.accept)
        browse = QPushButton("Folder…")
        browse.clicked.connect(self._browse)
        row.addWidget(self.spec_edit, 1)
        row.addWidget(browse)
        layout.addLayout(row)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._update_ok()

    def spec(self) -> str:
        return self.spec_edit.text().strip()

    def accept(self) -> None:
        spec = self.spec()
        if not spec:
            return
        super().accept()
        self.chosen.emit(spec)

    def _take_item(self, item: QListWidgetItem | None) -> None:
        if item is not None:
            self.spec_edit.setText(str(item.data(Qt.ItemDataRole.UserRole)))

    def _update_ok(self) -> None:
        self.buttons.button(QDialogButtonBox.StandardButton.Open).setEnabled(bool(self.spec()))

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a model folder (checkpoint or Hugging Face folder)")
        if path:
            self.spec_edit.setText(path)
            self.accept()
