"""Launch: a window on screen at once, the model library loaded behind it.

Importing PyTorch and the views takes one to three seconds (more on a cold disk). Rather than show nothing for
that long, `open_main_window` shows a plain window where the main window will be — the same title, icon and saved
geometry — saying what is loading, imports PyTorch and app.window on a worker thread while the UI thread keeps
painting, then builds the main window in its place. A broken installation (PyTorch missing or failing to import)
is one sentence in that window, not a traceback in a terminal the user may not see.
"""

from __future__ import annotations

import importlib

from PySide6.QtCore import QEventLoop, Qt, Signal
from PySide6.QtWidgets import QLabel, QProgressBar, QVBoxLayout, QWidget

from ..work.jobs import JobRunner  # Qt and light modules only: PyTorch is what this job loads
from .icon import icon_pixmap
from .settings import AppSettings

TITLE = "scratchformer — step through the Transformer"
DEFAULT_SIZE = (1400, 900)  # the main window's size before any is remembered (app/window.py)
LOADED_MODULES = ("torch", "app.window")  # imported off the UI thread, in this order


def warm_up() -> None:
    """Build, on the loading thread, what a first run would otherwise build on a worker while the window paints:
    GPT-2's tokenizer (the paper and blog presets' vocabulary). Making it holds Python's lock for about 80 ms in
    one native call (transformers copies the Rust tokenizer through JSON), which would freeze the window that
    long in the middle of a run. A failure here is left for that run to report in its own words."""
    from scratchformer.loading.tokenizers import gpt2_tokenizer

    try:
        gpt2_tokenizer()  # cached (functools.lru_cache): runs reuse this one
    except Exception:  # noqa: BLE001, S110 (the run that needs it says what is wrong)
        pass


def load_library(modules: tuple[str, ...] = LOADED_MODULES) -> str:
    """Import the modules the main window needs, then warm_up (the work of the launch's job: never on the UI
    thread). Returns "" or one sentence saying what failed to load and how to repair it."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 (any failure of an import is the same sentence to the user)
            what = "PyTorch" if name == "torch" else "the window's modules"
            return (f"scratchformer could not load {what} ({type(exc).__name__}: {exc}); reinstall it with "
                    "'bash scripts/setup.sh' or 'pip install -e .' in the project's .venv.")
    warm_up()
    return ""


class LaunchWindow(QWidget):
    """What stands where the main window will be while the library loads; `closed` when the user closes it."""

    closed = Signal()

    def __init__(self, settings: AppSettings) -> None:
        super().__init__()
        self.setWindowTitle(TITLE)
        self.resize(*DEFAULT_SIZE)
        geometry = settings.get_bytes("geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        self.icon = QLabel()
        self.icon.setPixmap(icon_pixmap(96))
        self.label = QLabel("Loading PyTorch and the views…")
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setStyleSheet("font-size: 13pt; color: #333;")
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy, with no fraction: an import reports none
        self.progress.setFixedWidth(360)
        self.progress.setTextVisible(False)
        layout = QVBoxLayout(self)
        layout.addStretch(2)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(self.label)
        layout.addWidget(self.progress, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(3)

    def show_failure(self, sentence: str) -> None:
        self.label.setText(sentence)
        self.progress.hide()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        self.closed.emit()
        super().closeEvent(event)


def open_main_window(make_window, settings: AppSettings | None = None, modules: tuple[str, ...] = LOADED_MODULES):
    """Show a launch window at once, load the library off the UI thread, then build the main window with
    `make_window()` (on the UI thread, as Qt requires), show it where the launch window stood and put that one
    away. Returns (the main window or None, "" or the sentence saying why the library did not load). None when the
    user closed the launch window first, or the library failed to load (the launch window then says why until it
    is closed)."""
    launch = LaunchWindow(settings or AppSettings())
    launch.show()
    failures: list[str] = []
    user_closed: list[bool] = []
    loop = QEventLoop()

    def loaded(sentence: str) -> None:
        if sentence:
            failures.append(sentence)
        loop.quit()

    loader = JobRunner("scratchformer-launch", on_error=loaded)
    loader.start(lambda job: load_library(modules), on_result=loaded, doing="Loading PyTorch and the views")
    launch.closed.connect(lambda: (user_closed.append(True), loop.quit()))
    loop.exec()
    loader.wait()  # after a close the import still ends (it cannot be interrupted); the process then exits
    if user_closed:
        return None, ""
    if failures:
        launch.show_failure(failures[0])
        loop.exec()  # until the user has read it and closed the window
        return None, failures[0]
    window = make_window()
    if window.settings.get_bytes("geometry") is None:
        window.setGeometry(launch.geometry())  # where the user may have moved it while it loaded
    window.show()
    launch.hide()
    launch.deleteLater()
    return window, ""
