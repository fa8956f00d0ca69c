"""Plots built ahead (app/work/prebuild.py) are built while the window waits, never in the middle of what the user
does: each step, tab or lesson page postpones what is left by START_MS (a build takes 15–40 ms of the UI
thread, and landed between two presses of a held Next or inside a page turn)."""

from __future__ import annotations

import time

from PySide6.QtWidgets import QApplication

import app.work.prebuild as prebuild_module
from tests.app.conftest import run_and_wait


def test_stepping_and_switching_tabs_postpone_the_builds(qtbot, make_window, monkeypatch):
    # far longer than one step takes even on a loaded machine, where a step of 300 ms let a build in between
    monkeypatch.setattr(prebuild_module, "START_MS", 1500)
    w = make_window()
    run_and_wait(qtbot, w)
    w.prebuild.finish()
    built: list[float] = []
    w.prebuild.queue([lambda: built.append(time.perf_counter()) for _ in range(3)])

    last_action = 0.0
    for i in range(12):  # the user steps (and once switches tab) every 40 ms for half a second
        last_action = time.perf_counter()  # (the postponing happens inside the action, after this)
        if i == 4:
            w.tabs.setCurrentIndex(1)
            w.tabs.setCurrentIndex(0)
        else:
            w.next_step()
        end = time.perf_counter() + 0.04
        while time.perf_counter() < end:
            QApplication.processEvents()
            time.sleep(0.002)
    assert built == []  # nothing was built while the user kept acting, although START_MS passed long ago
    qtbot.waitUntil(lambda: len(built) == 3, timeout=5000)  # then, once they stop, everything is built
    assert built[0] - last_action >= 1.5 * 0.8  # about START_MS after the last action (Qt's coarse timers: ±5 %)
