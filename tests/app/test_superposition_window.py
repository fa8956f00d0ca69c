"""Lesson 16 in the window: the superposition experiment trains its toy model off the UI thread, draws the columns
of W on equal axes, WᵀW as a map and the norms; its switch redraws the dense setting without training again; the
lesson panel asks for a prediction, holds the view back, and takes the live result as the answer."""

from __future__ import annotations

import threading

import numpy as np
from PySide6.QtCore import Qt

from app.lessons.lesson_panel import lesson_panel
from app.views.experiments_view import ExperimentsView
from scratchformer.lessons import lessons_dir, load_lesson
from tests.app.test_derivation_window import view_of
from tests.app.test_experiments_window import experiment_threads


def test_the_toy_model_trains_off_the_ui_thread_and_draws_both_settings(qtbot, en_hi, monkeypatch):
    w, view = en_hi, view_of(en_hi, ExperimentsView)
    threads = experiment_threads(monkeypatch)
    view.show_experiment("superposition", sparse=True, sparsity=0.9)
    assert w.tabs.currentWidget() is view and view.sparsity.isVisible() and view.switch.text() == "sparse"
    qtbot.waitUntil(lambda: not view.is_busy() and view.result is not None, timeout=60_000)
    assert threads and threading.main_thread() not in threads  # trained off the UI thread
    result = view.result
    assert result["sparse"]["stored"] > result["dims"] >= result["dense"]["stored"]
    gram = view.current_heatmaps()[0]
    w_sparse = np.array(result["sparse"]["W"])
    assert gram.shape == (5, 5) and np.allclose(gram.values, w_sparse.T @ w_sparse, atol=1e-6)
    arrows = view.plots[0].getPlotItem()
    assert arrows.getViewBox().state["aspectLocked"]  # one unit as long on both axes: angles read true
    assert len(arrows.listDataItems()) == 5 and "5 of 5 stored" in arrows.titleLabel.text
    view.switch.setChecked(False)  # the dense setting: redrawn from the same result
    assert not view.is_busy() and len(threads) == 1
    assert "sparsity 0" in view.current_heatmaps()[0].title
    assert "2 of 5 stored" in view.plots[0].getPlotItem().titleLabel.text
    view.show_experiment("scaling", d_k=64)  # the next experiment's charts are not squared
    qtbot.waitUntil(lambda: not view.is_busy() and view.result["experiment"] == "scaling", timeout=30_000)
    assert not view.plots[0].getPlotItem().getViewBox().state["aspectLocked"]


def test_the_lesson_holds_the_toy_back_until_the_prediction(qtbot, en_hi):
    w = en_hi
    panel = lesson_panel(w)
    panel.open_lesson(load_lesson(lessons_dir() / "16-superposition.toml"), 3)
    qtbot.waitUntil(lambda: not panel.is_busy() and not w.is_busy() and panel.current_question() is not None,
                    timeout=120_000)  # fmt: skip
    view = view_of(w, ExperimentsView)
    assert w.tabs.currentWidget() is not view  # the prediction comes first
    q = panel.current_question()
    panel.number_edit.setText(str(int(q.number) - 1))
    qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
    assert panel.feedback.text().startswith("Not quite: the answer is ")
    assert w.tabs.currentWidget() is view  # answered: now the toy model is shown
    qtbot.waitUntil(lambda: not view.is_busy() and view.result is not None, timeout=60_000)
    assert q.number == view.result["sparse"]["stored"]  # the answer is the live training's count
    assert view.switch.isChecked() and "pentagon" in q.feedback
