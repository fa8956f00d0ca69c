"""Launch: a window shows before PyTorch has loaded, and the main window takes its place (app/startup/launch.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMainWindow

from app.startup.launch import LaunchWindow, open_main_window
from app.startup.settings import AppSettings

ROOT = Path(__file__).resolve().parents[2]


def _settings(tmp_path) -> AppSettings:
    return AppSettings(str(tmp_path / "settings.ini"))


def _launch_windows() -> list[LaunchWindow]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, LaunchWindow) and w.isVisible()]


def test_the_first_window_shows_before_torch_is_imported(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "SCRATCHFORMER_SETTINGS": str(tmp_path / "s.ini")}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_probe.py"), str(time.time())],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["status"] == 0, proc.stderr
    assert result["torch_at_first_window"] is False
    assert 0 < result["launch_window_s"] < result["main_window_s"]


def test_the_model_core_loads_its_names_on_first_use():
    code = ("import sys, scratchformer, scratchformer.cli as cli; cli.gui_parser(); before = 'torch' in sys.modules; "
            "t = scratchformer.Transformer; print(before, 'torch' in sys.modules, t.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.stdout.split() == ["False", "True", "scratchformer.transformer.model"], out.stderr


def test_the_main_window_takes_the_launch_windows_place(qapp, tmp_path):
    made = []

    def make():
        window = QMainWindow()
        window.settings = _settings(tmp_path)  # nothing remembered: it takes the launch window's geometry
        made.append(window)
        return window

    from scratchformer.loading.tokenizers import gpt2_tokenizer

    gpt2_tokenizer.cache_clear()
    window, failure = open_main_window(make, _settings(tmp_path), modules=("json",))
    try:
        assert failure == "" and window is made[0] and window.isVisible()
        assert gpt2_tokenizer.cache_info().currsize == 1  # built while loading, not in the middle of a first run
        assert not _launch_windows()
        assert (window.width(), window.height()) == (1400, 900)
    finally:
        window.close()


def test_a_library_that_fails_to_load_is_one_sentence_in_the_window(qapp, tmp_path):
    seen = []

    def read_and_close():
        launched = _launch_windows()
        if launched and launched[0].progress.isHidden():
            seen.append(launched[0].label.text())
            launched[0].close()
        else:
            QTimer.singleShot(20, read_and_close)

    QTimer.singleShot(20, read_and_close)
    window, failure = open_main_window(lambda: None, _settings(tmp_path), modules=("scratchformer_no_such_module",))
    assert window is None
    assert seen == [failure]
    assert failure.startswith("scratchformer could not load the window's modules (ModuleNotFoundError")
    assert "\n" not in failure


def test_closing_the_launch_window_while_it_loads_opens_nothing(qapp, tmp_path, monkeypatch):
    (tmp_path / "slow_module_for_launch.py").write_text("import time\ntime.sleep(1.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []
    QTimer.singleShot(100, lambda: [w.close() for w in _launch_windows()])
    window, failure = open_main_window(lambda: made.append(1), _settings(tmp_path), modules=("slow_module_for_launch",))
    assert (window, failure, made) == (None, "", [])
