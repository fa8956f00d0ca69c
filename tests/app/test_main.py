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
