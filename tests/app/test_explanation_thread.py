"""The explanation panel makes its text off the UI thread (its numbers read the step's tensor, which a long run
may have to recompute), shows only the latest step's, and turns a failure into one sentence."""

from __future__ import annotations

import threading

from app.panels import teaching
from tests.app.conftest import run_and_wait


def test_the_explanation_is_made_off_the_ui_thread_and_the_latest_wins(qtbot, make_window, monkeypatch):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    threads: list[str] = []
    real = teaching.explanation_for

    def recording(result, step, batch):
        threads.append(threading.current_thread().name)
        return real(result, step, batch)

    monkeypatch.setattr(teaching, "explanation_for", recording)
    for name in ("encoder.0.self_attn.scores", "encoder.0.self_attn.weights", "decoder.1.cross_attn.weights"):
        w.go_to_step(name)  # three quick steps: only the last one's text is wanted
    qtbot.waitUntil(lambda: not w.explain_panel.is_busy(), timeout=10_000)
    assert threads and threading.main_thread().name not in threads
    text = w.explain_panel.browser.toPlainText()
    assert "Cross-attention" in text and "Attention weights" in text


def test_a_failing_explanation_is_one_sentence_in_the_status_bar(qtbot, make_window, monkeypatch):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)

    def broken(result, step, batch):
        raise ValueError("a number could not be read")

    monkeypatch.setattr(teaching, "explanation_for", broken)
    w.go_to_step("encoder.0.self_attn.scores")
    qtbot.waitUntil(lambda: not w.explain_panel.is_busy(), timeout=10_000)
    qtbot.waitUntil(lambda: "No explanation for this step: a number could not be read" in w.message_text(),
                    timeout=5_000)
    assert "Dot products" in w.explain_panel.browser.toPlainText()  # the step's own title still shows
