"""The Output view's top-k rows and its map (a top-k over up to 50,257 columns) are made off the UI thread, and
what it lists equals torch.topk of the trace's probabilities."""

from __future__ import annotations

import threading

import torch

import app.views.output_view as output_module
from app.views.output_view import OutputView
from tests.app.conftest import run_and_wait
from tests.app.test_views import show


def test_the_output_rows_are_made_off_the_ui_thread(qtbot, make_window, monkeypatch):
    threads: list[str] = []
    real = output_module.top_k_table
    monkeypatch.setattr(output_module, "top_k_table",
                        lambda *a: threads.append(threading.current_thread().name) or real(*a))  # fmt: skip
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    view = show(w, OutputView)
    assert threads and threading.main_thread().name not in threads
    probs = w.current_trace()["generator.probs"].tensor[0]  # (T, vocab)
    top = torch.topk(probs, view.k_spin.value(), dim=-1)
    assert view.table.rowCount() == probs.shape[0]
    first = view.table.tooltip(0, 2)
    assert f"(id {int(top.indices[0, 0])})" in first and f"p = {float(top.values[0, 0]):.6g}" in first
