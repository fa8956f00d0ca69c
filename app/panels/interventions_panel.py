"""The window's list of active interventions ("what if this head were gone?") and the right-click head menu.

The list lives in a dock ("Interventions"): one row per change with a checkbox to switch it off, and Clear all.
Any change to the list emits `changed`; the window then re-runs the current input with the enabled changes
(app/work/worker.py applies them). Heads are counted from 1 here, as everywhere in the window; the specs under each
row (decoder.1.cross_attn.head0) count from 0, as the command line does.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from scratchformer.patching.interventions import HeadChange
from scratchformer.recording.trace import breadcrumb

HOW_TEXT = {"zero": "zeroed", "mean": "mean-ablated", "keep": "kept alone (the other heads zeroed)"}


def attention_text(attention: str) -> str:
    """'decoder.1.cross_attn' → 'Decoder 2 › Cross-attention'."""
    return " › ".join(breadcrumb(attention))


def change_text(change: HeadChange) -> str:
    return f"{attention_text(change.attention)}, head {change.head + 1} {HOW_TEXT.get(change.how, change.how)}"


@dataclass
class Entry:
    change: HeadChange
    enabled: bool = True


class InterventionsPanel(QDockWidget):
    """The active interventions, each with a switch; `changed` after every edit."""

    changed = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__("Interventions", parent)
        self.setObjectName("interventions-dock")
        self.entries: list[Entry] = []
        host = QWidget()
        layout = QVBoxLayout(host)
        layout.setContentsMargins(6, 4, 6, 4)
        self.hint = QLabel("Right-click a head (Heads, Overview or Step tab) to ablate it. Unchecked changes are off. "
                           "Compare shows the run before and after.")
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: #555;")
        layout.addWidget(self.hint)
        self.list = QListWidget()
        self.list.itemChanged.connect(self._item_changed)
        layout.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addStretch(1)
        self.clear_button = QPushButton("Clear all")
        self.clear_button.clicked.connect(self.clear)
        row.addWidget(self.clear_button)
        layout.addLayout(row)
        host.setMaximumHeight(170)  # a short list under the stepper, not half the window
        self.setWidget(host)
        self._fill()

    # --- what the window reads -------------------------------------------------------------------------------

    def enabled(self) -> list[HeadChange]:
        return [e.change for e in self.entries if e.enabled]

    def texts(self) -> list[str]:
        """The rows as shown (for tests and the status bar)."""
        return [self.list.item(i).text() for i in range(self.list.count())]

    # --- edits -----------------------------------------------------------------------------------------------

    def add(self, change: HeadChange) -> None:
        existing = next((e for e in self.entries if e.change == change), None)
        if existing is not None:
            existing.enabled = True
        else:
            self.entries.append(Entry(change))
        self._edited()

    def undo_head(self, attention: str, head: int) -> None:
        """Remove every change to this head."""
        self.entries = [e for e in self.entries if (e.change.attention, e.change.head) != (attention, head)]
        self._edited()

    def undo_last(self) -> None:
        if self.entries:
            self.entries.pop()
            self._edited()

    def set_enabled(self, row: int, on: bool) -> None:
        if 0 <= row < len(self.entries) and self.entries[row].enabled != on:
            self.entries[row].enabled = on
            self._edited()

    def clear(self, quietly: bool = False) -> None:
        had = bool(self.entries)
        self.entries = []
        self._fill()
        if had and not quietly:
            self.changed.emit()

    def on_head(self, attention: str, head: int) -> list[HeadChange]:
        return [e.change for e in self.entries if (e.change.attention, e.change.head) == (attention, head)]

    # --- display ---------------------------------------------------------------------------------------------

    def _edited(self) -> None:
        self._fill()
        if self.entries:
            self.show()
            self.raise_()
        self.changed.emit()

    def _fill(self) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        for e in self.entries:
            item = QListWidgetItem(f"{change_text(e.change)}   [{e.change.spec()}]")
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsSelectable)
            item.setCheckState(Qt.CheckState.Checked if e.enabled else Qt.CheckState.Unchecked)
            item.setToolTip("Uncheck to run without this change; the spec counts layers and heads from 0, "
                            "as `scratchformer trace --ablate` does")
            self.list.addItem(item)
        self.list.blockSignals(False)
        self.clear_button.setEnabled(bool(self.entries))
        if not self.entries:
            self.list.addItem(QListWidgetItem("No interventions: the model runs unchanged."))
            self.list.item(0).setFlags(Qt.ItemFlag.NoItemFlags)

    def _item_changed(self, item: QListWidgetItem) -> None:
        row = self.list.row(item)
        self.set_enabled(row, item.checkState() == Qt.CheckState.Checked)


def add_head_actions(menu: QMenu, panel: InterventionsPanel, attention: str, head: int) -> None:
    """Put the head's what-if actions at the top of a right-click menu (before its export entries)."""
    first = menu.actions()[0] if menu.actions() else None

    def action(text: str, slot, enabled: bool = True) -> QAction:
        a = QAction(text, menu)
        a.setEnabled(enabled)
        if slot is not None:
            a.triggered.connect(lambda _checked=False: slot())
        return a

    actions = [action(f"{attention_text(attention)}, head {head + 1}", None, False)]  # a title row
    for text, how in (("Ablate head (zero)", "zero"), ("Ablate head (mean)", "mean"), ("Keep only this head", "keep")):
        actions.append(action(text, lambda how=how: panel.add(HeadChange(attention, head, how))))
    actions.append(action("Undo: remove the changes to this head", lambda: panel.undo_head(attention, head),
                          bool(panel.on_head(attention, head))))
    actions.append(action("Undo the last change", panel.undo_last, bool(panel.entries)))
    if first is not None:
        menu.insertActions(first, actions)
        menu.insertSeparator(first)
    else:
        menu.addActions(actions)
