"""Opening the window where there is no display gives one sentence, not Qt's abort."""

import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="DISPLAY decides only on Linux desktops")
def test_no_display_is_one_sentence_and_status_2():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run([sys.executable, "-m", "scratchformer"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("scratchformer: no display was found") and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("users", [None, "0"])
def test_the_window_paints_on_its_own_thread_unless_the_user_says_otherwise(users):
    """Qt's parallel fills made the UI thread wait behind the model's threads (app/main.py NO_GUI_THREADPOOL): the
    application switches them off before it exists, and a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "QT_NO_GUI_THREADPOOL"}
    env["QT_QPA_PLATFORM"] = "offscreen"
    if users is not None:
        env["QT_NO_GUI_THREADPOOL"] = users
    code = "import os; from app.main import _application; _application(); print(os.environ['QT_NO_GUI_THREADPOOL'])"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (users or "1")
