"""One Qt application per process, whatever asks for it first: a figure drawn before a dialog is built (a notebook
that plots, then opens something; a test worker that ran an export test before a widget test) must not abort the
process, and the Qt tests pass in any order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=env)  # fmt: skip


def test_a_figure_then_a_dialog_in_one_process_works_and_prints_nothing():
    # en-hi's decoder speaks Devanagari: its labels make Qt fall back between fonts, which logged a warning per
    # font on stderr (a red box in a notebook) before the first figure
    code = (
        "import scratchformer as sf\n"
        "run = sf.run('en-hi', 'the girl eats an apple')\n"
        "png = run.plot('decoder.1.cross_attn.weights', head=None)._repr_png_()\n"
        "assert png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
        "from app.panels.menus import about_box\n"
        "box = about_box(None)\n"
        "from PySide6.QtWidgets import QApplication\n"
        "print(type(QApplication.instance()).__name__, box.windowTitle())\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == "QApplication About scratchformer"
    assert done.stderr == ""


def test_a_gui_application_made_elsewhere_is_refused_in_one_sentence():
    code = (
        "import os; os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        "from PySide6.QtGui import QGuiApplication\n"
        "made = QGuiApplication([])\n"
        "from app.startup.qt_application import application\n"
        "from scratchformer.errors import UserError\n"
        "try:\n"
        "    application()\n"
        "except UserError as e:\n"
        "    print(e)\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    sentence = done.stdout.strip()
    assert sentence.startswith("This process already runs a Qt QGuiApplication, which cannot draw windows")
    assert sentence.count("\n") == 0 and sentence.endswith(".")


# Tests that make or use the process's Qt application from both sides: first those that draw pictures without
# pytest-qt's application (the notebook's plot: before the fix they made a QGuiApplication), then those that build
# widgets on pytest-qt's `qapp` (the About box aborted the process after them), and pictures drawn on `qapp`.
QT_TESTS = [
    "tests/scratchformer/test_api.py::test_plot_draws_the_export_figure_with_token_labels",
    "tests/scratchformer/test_api.py::test_plot_save_and_its_mistakes",
    "tests/scratchformer/test_install_desktop.py::test_application_icon_and_about_box_show_the_svg",
    "tests/app/test_bar_axis.py",
    "tests/app/test_export_render.py",
]


@pytest.mark.parametrize("order", ["as listed", "reverse", "7"])
def test_the_qt_tests_pass_in_any_order(order):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env.pop("SCRATCHFORMER_TEST_ORDER", None)
    if order != "as listed":
        env["SCRATCHFORMER_TEST_ORDER"] = order
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *QT_TESTS],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)  # fmt: skip
    assert done.returncode == 0, f"order {order}:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
