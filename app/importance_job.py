"""Head importance off the UI thread: one QThread per measurement, with progress and a Cancel that stops it
between two heads (scratchformer.head_importance does the work; this only carries it and its news)."""

from __future__ import annotations

import threading

from PySide6.QtCore import QThread, Signal

from scratchformer.head_importance import head_importance

from .gc_guard import no_collection_in_this_thread
from .worker import friendly_error


class ImportanceJob(QThread):
    """Zero every head of `bundle.model` in turn on these inputs. Emits progress(done, total), then exactly one
    of finished_with(HeadImportance), cancelled_now() or failed_with(sentence)."""

    progress = Signal(int, int)
    finished_with = Signal(object)
    cancelled_now = Signal()
    failed_with = Signal(str)

    def __init__(self, bundle, inputs, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("scratchformer-head-importance")
        self.bundle, self.inputs = bundle, inputs
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def is_cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> None:
        with no_collection_in_this_thread():  # see gc_guard
            dev = self.bundle.device
            to = (lambda t: None if t is None else t.to(dev))  # noqa: E731
            i = self.inputs
            try:
                result = head_importance(self.bundle.model, to(i.src), to(i.tgt), to(i.src_pad), to(i.tgt_pad),
                                         progress=lambda d, n: self.progress.emit(d, n),
                                         cancelled=self._cancel.is_set)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a sentence in the window
                self.failed_with.emit(friendly_error(exc))
                return
            if result is None:
                self.cancelled_now.emit()
            else:
                self.finished_with.emit(result)

    def stop(self, timeout_ms: int = 60_000) -> bool:
        """Cancel and wait for the thread to end (window shutdown)."""
        self.cancel()
        return self.wait(timeout_ms) if self.isRunning() else True
