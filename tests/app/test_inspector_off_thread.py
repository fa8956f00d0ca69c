"""The inspector's statistics of a large step are made off the UI thread, for the step shown and ahead for the
next ones (holding Next finds them ready), and they are the tensor's own min, max, mean and std."""

from __future__ import annotations

import threading

import torch

import app.work.warmup as warmup_module
import app.work.worker as worker_module
from app.main import drawn
from scratchformer.plotdata import format_value
from tests.app.conftest import run_and_wait


def test_a_large_steps_statistics_are_made_off_the_ui_thread_and_ahead(qtbot, make_window, monkeypatch):
    monkeypatch.setattr(warmup_module, "STATS_OFF_THREAD", 1)  # every step counts as large here
    threads: list[tuple[str, str]] = []
    real = worker_module.tensor_stats
    monkeypatch.setattr(worker_module, "tensor_stats",
                        lambda t: threads.append(threading.current_thread().name) or real(t))  # fmt: skip
    w = make_window()
    run_and_wait(qtbot, w)
    threads.clear()
    name = "encoder.0.ffn.hidden"
    w.go_to_step(name)
    drawn(w)
    qtbot.waitUntil(lambda: not w.is_prefetching(), timeout=30_000)
    assert threads and threading.main_thread().name not in threads
    step = w.current_trace()[name]
    tensor = step.tensor[0].float()
    text = w.inspector_panel.text.toPlainText()
    assert f"mean {format_value(float(tensor.mean()))}" in text
    assert f"max  {format_value(float(tensor.max()))}" in text
    std = float(torch.std(tensor, correction=0))
    assert f"std  {format_value(std)}" in text
    result, visible = w.current_result(), w.visible_steps()
    following = [w.current_trace()[i] for i in visible[visible.index(step.index) + 1:][:3]]
    assert all(result.has_stats(s, 0) for s in following)  # made ahead, while the user looks at this step


def test_a_step_is_drawn_before_its_statistics_which_fill_in_when_ready(qtbot, make_window, monkeypatch):
    monkeypatch.setattr(warmup_module, "STATS_OFF_THREAD", 1)
    release = threading.Event()
    real = worker_module.tensor_stats

    def slow_stats(t):
        if threading.current_thread() is not threading.main_thread():
            release.wait(30)  # statistics that take their time (a large step on a busy machine)
        return real(t)

    w = make_window()
    run_and_wait(qtbot, w)
    monkeypatch.setattr(worker_module, "tensor_stats", slow_stats)
    name = "encoder.0.ffn.hidden"
    w.go_to_step(name)
    step = w.current_trace()[name]
    step_view = w.views[0]
    try:
        # the step is drawn at once, while its statistics are still being made
        qtbot.waitUntil(lambda: not w.is_drawing(), timeout=10_000)  # what benchmarks time a step up to
        assert step_view.heatmap.is_drawn() and not w.is_recomputing()
        assert step_view.heatmap.heatmap.title == w.heatmap_for(step, 0, 0).title  # this step's map
        assert "being computed…" in w.inspector_panel.text.toPlainText()
        assert w.is_busy()  # tests wait for the numbers too
    finally:
        release.set()
    qtbot.waitUntil(lambda: "being computed…" not in w.inspector_panel.text.toPlainText(), timeout=30_000)
    tensor = step.tensor[0].float()
    assert f"mean {format_value(float(tensor.mean()))}" in w.inspector_panel.text.toPlainText()
