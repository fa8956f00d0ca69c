"""GUI test fixtures: a window with private settings, a run helper, and a guard that fails any test which
leaves a QThread running or a QTimer active behind it (napari's conftest does the same)."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtCore import QEvent, QObject, QThread, QTimer
from PySide6.QtWidgets import QWidget

from app.work.gc_guard import SAFE_POINT_TIMER


def _live(kind):
    out = []
    for obj in gc.get_objects():
        try:
            if issubclass(type(obj), kind):
                out.append(obj)
        except ReferenceError:
            continue
    return out


class LayoutRequests(QObject):
    """Counts the layout requests a widget receives (what a change inside it asks of the layouts around it)."""

    def __init__(self, watched: QWidget) -> None:
        super().__init__()
        self.count = 0
        watched.installEventFilter(self)

    def eventFilter(self, _obj, event) -> bool:  # noqa: N802 (Qt name)
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def shown_heatmap(qtbot, width: int, height: int):
    """A HeatmapWidget of this size, on screen (exposed), closed with the test."""
    from app.widgets.heatmap import HeatmapWidget

    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(width, height)
    w.show()
    qtbot.waitExposed(w)
    return w


@pytest.fixture(autouse=True)
def no_threads_or_timers_left(qapp):
    """Runs first, so it checks after every other fixture (the window) has been torn down."""
    yield
    from app.widgets.draw_queue import draw_queue

    draw_queue().finish()  # maps still waiting their turn (their widgets may be gone: then nothing is drawn)
    qapp.processEvents()
    running = []
    for t in _live(QThread):
        try:
            if t.isRunning() and t is not QThread.currentThread():
                running.append(t.objectName() or repr(t))
        except RuntimeError:  # the C++ object is gone: not running
            continue
    active = []
    for t in _live(QTimer):
        try:
            if t.isActive() and t.objectName() != SAFE_POINT_TIMER:  # that one runs as long as the process
                active.append(t.objectName() or repr(t))
        except RuntimeError:
            continue
    qapp.processEvents()  # what threads that ended during the checks posted (gc_guard's queued resume) arrives
    assert not running, f"QThreads still running after the test: {running}"
    assert not active, f"QTimers still active after the test: {active}"


@pytest.fixture
def settings_file(tmp_path, monkeypatch):
    path = tmp_path / "settings.ini"
    monkeypatch.setenv("SCRATCHFORMER_SETTINGS", str(path))
    return path


@pytest.fixture
def make_window(qtbot, settings_file):
    """Factory: a shown MainWindow (blog model, CPU) that is closed cleanly at teardown."""
    from app.startup.settings import AppSettings
    from app.window import MainWindow

    windows = []

    def make(source="machine learning using PyTorch", target="the answer", model="blog", persist=False):
        w = MainWindow(AppSettings(str(settings_file)), persist=persist)
        qtbot.addWidget(w)
        w.set_model(model)
        w.set_device("cpu")
        w.source_edit.setText(source)
        w.set_windows(None)  # the text is one sentence, even if the model's example was a batch of windows
        w.target_edit.setText(target)
        w.resize(1200, 800)
        w.show()
        windows.append(w)
        return w

    yield make
    for w in windows:
        w.close()


def run_and_wait(qtbot, window, timeout=60_000):
    """Press Run and wait until the run finished or failed."""
    window.run()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=timeout)


@pytest.fixture
def ran_window(qtbot, make_window):
    w = make_window()
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    return w


@pytest.fixture
def en_hi(qtbot, make_window):
    """A shown window that has run the bundled en-hi model on "the girl eats an apple" (translated, no target)."""
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    return w


@pytest.fixture
def automatic():
    """Automatic garbage collection for this test, whether or not a window was built before in this process (a
    window turns it off for good: app/work/gc_guard.py); the tests of the worker guard start from it."""
    from app.work import gc_guard

    was = gc_guard.collecting_at_safe_points()
    gc_guard.collect_at_safe_points(False)
    yield
    gc_guard.collect_at_safe_points(was)
