"""Start the window (`scratchformer` or `scratchformer gui ...`), or render it once to a PNG (--screenshot)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .startup.icon import _render_svg as _render_svg  # the icon lives in app/startup/icon.py; these names stay here too
from .startup.icon import application_icon
from .startup.icon import icon_path as icon_path
from .startup.icon import icon_pixmap as icon_pixmap

SCREENSHOT_SIZE = (1400, 900)
RUN_TIMEOUT_S = 600


# Platform-plugin chatter that says nothing to a user (the offscreen plugin used for --screenshot prints it).
QUIET_QT_MESSAGES = ("This plugin does not support propagateSizeHints()",)


def _qt_message(mode, context, message: str) -> None:
    if not message.startswith(QUIET_QT_MESSAGES):
        sys.stderr.write(message + "\n")


# The application name is also the X11 window class and the Wayland app id, so the desktop maps the window to the
# entry `scratchformer install-desktop` writes (scratchformer.desktop, StartupWMClass=scratchformer).
APP_ID = "scratchformer"


# How long a thread may hold the GIL before another that waits for it gets a turn (Python's default: 5 ms). Every
# Python slot and event handler of the UI thread must take the GIL; while a recompute thread runs Python code, each
# may wait this long, and a repaint runs dozens of them. A short interval keeps the window answering, at a small
# cost in the recompute's own speed (benchmarks/bench_stalls.py): 1 ms, then 0.2 ms, which took another 0.5–1 ms
# off the p90 of holding Next (each step paints while the prefetch recomputes the next sublayers).
UI_SWITCH_INTERVAL_S = 0.0002

# Qt's raster painter hands every fill taller than about 96 lines (a widget's background, a scroll bar's groove, a
# smooth image scale) to a pool of helper threads and waits for them. While the prefetch thread's PyTorch work holds
# the cores, the UI thread sat waiting for those helpers behind it: holding Next at 512 tokens, p90 10.5–12 ms per
# step with the pool and 7.8–9 ms without (benchmarks/bench_stalls.py). A user who sets the variable keeps theirs.
NO_GUI_THREADPOOL = ("QT_NO_GUI_THREADPOOL", "1")


def _application():
    from PySide6.QtCore import qInstallMessageHandler

    from .startup.qt_application import application
    from .work.gc_guard import collect_at_safe_points

    sys.setswitchinterval(UI_SWITCH_INTERVAL_S)
    os.environ.setdefault(*NO_GUI_THREADPOOL)  # Qt reads it once, at its first large fill: set it before any
    qInstallMessageHandler(_qt_message)
    app = application(sys.argv[0] if sys.argv else APP_ID, offscreen_without_display=False)
    collect_at_safe_points()  # the launch window too: the collector runs between events only (app/work/gc_guard.py)
    app.setApplicationName(APP_ID)
    app.setOrganizationName("scratchformer")
    app.setApplicationDisplayName("scratchformer")
    app.setDesktopFileName(APP_ID)  # scratchformer.desktop, written by `scratchformer install-desktop`
    app.setWindowIcon(application_icon())
    return app


def create_window(args, persist: bool = True, settings=None):
    """A window with the command line's choices applied over the remembered ones (nothing run yet)."""
    from .startup.settings import AppSettings
    from .window import MainWindow

    window = MainWindow(settings or AppSettings(), persist=persist)
    if getattr(args, "model", None):
        window.set_model(args.model)
    if getattr(args, "device", None):
        window.set_device(args.device)
    if getattr(args, "source", None) is not None:
        window.source_edit.setText(args.source)
        window.set_windows(None)
    if getattr(args, "target", None) is not None:
        window.target_edit.setText(args.target)
    if getattr(args, "step", None) is not None:
        window._pending_step = str(args.step)
    window.dictionaries = [str(d) for d in getattr(args, "dictionary", None) or []]  # attached to the first run
    return window


def wait_for_run(window, timeout_s: float = RUN_TIMEOUT_S) -> bool:
    """Process events until the queued run has finished or failed; True if a result is shown."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while window.is_busy() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    return not window.is_busy() and window.current_result() is not None


def drawn(window, timeout_s: float = RUN_TIMEOUT_S) -> None:
    """Process events until the window is neither running nor recomputing a step, then once more so it paints
    (benchmarks time a step change up to here)."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    QApplication.processEvents()
    while window.is_busy() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.0005)
    QApplication.processEvents()


def find_view(window, title: str):
    """The view whose tab title is `title` (any case), or None."""
    return next((v for v in window.views if v.title.casefold() == title.strip().casefold()), None)


def _derive_cell(window, step: str | None, index: str) -> bool:
    """Open the derivation of one cell of `step` and wait for it; False (and one sentence) when it fails."""
    from PySide6.QtWidgets import QApplication

    from .views.derivation_view import DerivationView

    try:
        cell = tuple(int(i) for i in index.split(","))
    except ValueError:
        cell = ()
    if step is None or not cell:
        print("scratchformer: --derive takes a cell of --step as comma-separated indices, e.g. 0,2,3,1.",
              file=sys.stderr)
        return False
    view = next(v for v in window.views if isinstance(v, DerivationView))
    view.derive(window.current_step().name, cell)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while view.is_deriving() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    if view.derivation is None:
        print(f"scratchformer: {window.message_text() or 'the derivation gave no result.'}", file=sys.stderr)
        return False
    return True


def _open_lesson(window, spec: str, page: int | None, wait: bool = True) -> bool:
    """Open a lesson (id or file) at `page` in the lesson dock and, with `wait`, until its page is drawn; False
    (and one sentence) when there is no such lesson."""
    from PySide6.QtWidgets import QApplication

    from scratchformer.errors import UserError
    from scratchformer.lessons import find_lesson

    from .lessons.lesson_panel import lesson_panel

    try:
        lesson = find_lesson(spec)
    except UserError as exc:
        print(f"scratchformer: {exc}", file=sys.stderr)
        return False
    if page is not None and not 1 <= page <= len(lesson.pages):
        print(f"scratchformer: the lesson {lesson.id!r} has pages 1 … {len(lesson.pages)}, not {page}.",
              file=sys.stderr)
        return False
    panel = lesson_panel(window)
    panel.open_lesson(lesson, page)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    busy = lambda: panel.is_busy() or window.is_busy() or window.current_view().is_busy()  # noqa: E731
    while wait and busy() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    return True


def screenshot(window, path: str, step: str | None, view: str | None = None, derive: str | None = None,
               lesson: str | None = None, page: int | None = None) -> int:
    """Run, go to `step` (and `view`, or the derivation of cell `derive` of the step, or page `page` of `lesson`),
    let the window paint, save it as a PNG. Returns the exit status."""
    from PySide6.QtWidgets import QApplication

    window.resize(*SCREENSHOT_SIZE)
    window.show()
    window.run()
    ok = wait_for_run(window)
    if not ok:
        print(f"scratchformer: {window.message_text()}", file=sys.stderr)
        window.close()
        return 2
    if step is not None and window.current_step() is not None:
        wanted = window.current_trace().find(step) if not step.lstrip("-").isdigit() else True
        if wanted is None:
            print(f"scratchformer: this model has no step named {step!r}.", file=sys.stderr)
            window.close()
            return 2
    if derive is not None and not _derive_cell(window, step, derive):
        window.close()
        return 2
    if lesson is not None and not _open_lesson(window, lesson, page):
        window.close()
        return 2
    if view is not None:
        shown = find_view(window, view)
        if shown is None:
            titles = ", ".join(repr(v.title) for v in window.views)
            print(f"scratchformer: there is no view titled {view!r}; the views are {titles}.", file=sys.stderr)
            window.close()
            return 2
        window.tabs.setCurrentWidget(shown)
        drawn(window)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while shown.is_busy() and time.monotonic() < deadline:
            QApplication.processEvents()
            time.sleep(0.01)
    for _ in range(5):
        QApplication.processEvents()
        time.sleep(0.05)
    out = Path(path)
    if out.parent and not out.parent.exists():
        print(f"scratchformer: the folder {out.parent} does not exist.", file=sys.stderr)
        window.close()
        return 2
    saved = window.grab().save(str(out), "PNG")
    window.close()
    if not saved:
        print(f"scratchformer: could not write {out}.", file=sys.stderr)
        return 2
    print(f"saved {out}")
    return 0


def run_gui(args) -> int:
    """Entry point of `scratchformer gui`: opens the window, or saves a screenshot with --screenshot FILE."""
    shot = getattr(args, "screenshot", None)
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if shot and headless and "QT_QPA_PLATFORM" not in os.environ:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a screenshot needs no screen
    if not shot and headless and "QT_QPA_PLATFORM" not in os.environ and sys.platform.startswith("linux"):
        # Qt would abort the interpreter with a page of plugin errors; say it in one sentence instead.
        print("scratchformer: no display was found (DISPLAY is not set); open the window on a desktop, use "
              "'scratchformer gui --screenshot FILE', or the headless commands (trace, export, translate).",
              file=sys.stderr)
        return 2
    app = _application()
    if shot:
        window = create_window(args, persist=False)
        status = screenshot(window, shot, getattr(args, "step", None), getattr(args, "view", None),
                            getattr(args, "derive", None), getattr(args, "lesson", None), getattr(args, "page", None))
    else:
        from .startup.launch import open_main_window

        # a window at once; PyTorch and the views load behind it (app/startup/launch.py)
        window, failure = open_main_window(lambda: create_window(args))
        if window is None:
            if failure:
                print(f"scratchformer: {failure}", file=sys.stderr)
            return 2 if failure else 0
        if getattr(args, "lesson", None):
            if not _open_lesson(window, args.lesson, getattr(args, "page", None), wait=False):
                dispose(window)
                return 2
        elif window.source_edit.text().strip():
            window.run()
        status = app.exec()
    dispose(window)
    return status


def dispose(window) -> None:
    """Destroy the window (and its thread) while the QApplication still exists: an interpreter-exit teardown
    in arbitrary order can crash in C++."""
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    window.close()
    window.deleteLater()
    QApplication.processEvents()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    for flag in ("--model", "--device", "--source", "--target", "--step", "--view", "--screenshot"):
        parser.add_argument(flag)
    sys.exit(run_gui(parser.parse_args()))
