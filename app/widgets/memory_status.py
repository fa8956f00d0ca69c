"""The memory budget in the window: the status bar's read-out of what the current trace holds, and the setting.

A run that would need more than the budget is refused by the worker (ModelBundle.run checks
scratchformer.loading.memory's estimate first) with one sentence in the status bar; nothing the user typed is lost.
"""

from __future__ import annotations

from PySide6.QtWidgets import QInputDialog, QWidget

from scratchformer.loading.memory import default_budget, size_text
from scratchformer.recording.trace import Trace

from .steady_label import SteadyLabel

WIDEST = "Memory: trace 888.8 MB · recomputed 888.8 MB · budget 88.8 GB"  # as wide as a read-out gets, near enough
SETTING = "memory_budget_gb"  # 0 or absent: the default, half of this machine's memory


def budget_bytes(settings) -> int:
    """The budget the user set (Run › Memory budget…), or the default."""
    try:
        gb = float(settings.get(SETTING) or 0)
    except ValueError:
        gb = 0.0
    return int(gb * 2**30) if gb > 0 else default_budget()


class MemoryStatus(SteadyLabel):
    """'Trace 532 MB · recomputed 40 MB · budget 12.0 GB' — permanent in the status bar. A SteadyLabel: as a plain
    QLabel each new figure asked the status bar for a layout, and the status bar repaints whole on every layout (a
    second paint of the window on the steps that grew the cache, holding Next)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent)
        self.setStyleSheet("color: #555;")
        self.setToolTip("Memory held by the current run's trace (the tensors between sublayers), by recomputed "
                        "sublayer interiors kept for revisits, and the budget a run may use (Run › Memory budget…)")
        self.trace: Trace | None = None
        self.budget = default_budget()
        # Room for a long read-out from the start: the status bar lays it out once, not for each new figure.
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(WIDEST))

    def show_trace(self, trace: Trace | None, budget: int) -> None:
        self.trace, self.budget = trace, budget
        self.refresh()

    def refresh(self) -> None:
        parts = []
        if self.trace is not None:
            parts.append(f"trace {size_text(self.trace.stored_bytes())}")
            if self.trace.cache is not None and self.trace.recomputed_steps():
                parts.append(f"recomputed {size_text(self.trace.cache.bytes)}")
        parts.append(f"budget {size_text(self.budget)}")
        self.setText("Memory: " + " · ".join(parts))
        if self.label.sizeHint().width() > self.width() > 0:
            self.updateGeometry()  # longer than the room it has (a budget of terabytes): laid out again


def ask_budget(parent: QWidget, settings) -> int | None:
    """Run › Memory budget…: a number of GB (0 = the default); the new budget in bytes, or None if cancelled."""
    current = budget_bytes(settings) / 2**30
    gb, ok = QInputDialog.getDouble(
        parent, "Memory budget",
        f"The most memory a run may use, in GB (0 = half of this machine's memory, "
        f"{default_budget() / 2**30:.1f} GB).\nA longer run is refused with a suggestion instead of "
        "slowing the computer down.",
        current, 0.0, 4096.0, 1,
    )  # fmt: skip
    if not ok:
        return None
    settings.set(SETTING, gb)
    return budget_bytes(settings)
