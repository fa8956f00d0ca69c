"""The one Qt application of a process, made so that widgets can always be built on it.

Qt allows one application object per process, and its class decides for good what the process can do: a
QGuiApplication draws images but aborts the whole process ("Fatal Python error: Aborted") as soon as anything
builds a widget. A notebook that calls `run.plot()` (a figure drawn with QPainter) and later opens a dialog, or a
test that draws a figure before another builds a window, met exactly that. So every part of scratchformer that
needs Qt asks here, and gets a QApplication: widgets, pictures and the window all work on it, in any order.

Qt's font database also logs a line for each font without the OpenType tables of a script it falls back from
("OpenType support missing for …, script 11" when Devanagari is drawn): nothing is wrong with the drawing, and a
notebook showed each as a red error box. The rule that silences that one category is set as soon as the application
starts, so not even the first plot prints it.
"""

from __future__ import annotations

import os
import sys

from scratchformer.errors import UserError

# Qt 6.11 logs them as info (earlier versions as warnings): both levels of that one category are off.
QUIET_LOGGING_RULES = "qt.text.font.db.info=false\nqt.text.font.db.warning=false"


def quiet_font_warnings() -> None:
    """Silence Qt's font-database warnings (see the module's docstring); other Qt messages are untouched."""
    from PySide6.QtCore import QLoggingCategory

    QLoggingCategory.setFilterRules(QUIET_LOGGING_RULES)


def application(name: str = "scratchformer", offscreen_without_display: bool = True):
    """The process's QApplication: the running one, or a new one (offscreen when there is no display, unless
    `offscreen_without_display` is false: the window would rather say it found no display). A plain
    QGuiApplication or QCoreApplication that someone else made first cannot show widgets: one sentence says so."""
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    existing = QCoreApplication.instance()
    if existing is not None:
        if not isinstance(existing, QApplication):
            raise UserError(f"This process already runs a Qt {type(existing).__name__}, which cannot draw windows "
                            "or dialogs; create a QApplication instead (or restart the kernel and let scratchformer "
                            "make one).")  # fmt: skip
        return existing
    no_display = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if offscreen_without_display and no_display and not os.environ.get("QT_QPA_PLATFORM"):
        if os.name == "posix" and sys.platform != "darwin":
            os.environ["QT_QPA_PLATFORM"] = "offscreen"
    made = QApplication([name])
    quiet_font_warnings()  # after: Qt reads its logging rules afresh when the application starts
    return made
