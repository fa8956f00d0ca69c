"""The window keeps the newest run: a result or a failure that arrives from a run the user has since replaced is
dropped (the worker usually skips such runs itself, but one already computing still reports), and a recompute
that fails says so in one sentence and leaves the window usable."""

from __future__ import annotations

from scratchformer.recording.lazy import Recompute
from tests.app.conftest import run_and_wait


def test_a_late_result_or_failure_of_a_replaced_run_is_ignored(qtbot, make_window):
    w = make_window(source="the cat sat")
    run_and_wait(qtbot, w)
    old = w._result
    w.source_edit.setText("a dog ran")
    run_and_wait(qtbot, w)
    assert w.current_trace().source_tokens[0] == ["a", " dog", " ran"]
    newest = w.worker.generation
    # the first run's result and a failure of it, reaching the window only now (as the worker thread posts them)
    w.worker.worker.finished.emit(newest - 1, old)
    w.worker.worker.failed.emit(newest - 1, "The old run failed.")
    qtbot.wait(50)
    assert w.current_trace().source_tokens[0] == ["a", " dog", " ran"]
    assert w.message_text() != "The old run failed."
    # the same signals for the newest run are taken: the guard tells runs apart, it does not drop everything
    w.worker.worker.failed.emit(newest, "The newest run failed.")
    assert w.message_text() == "The newest run failed."


def test_a_recompute_that_fails_is_one_sentence_and_the_window_stays_usable(qtbot, make_window):
    w = make_window(source="the cat sat")
    run_and_wait(qtbot, w)
    trace = w.current_trace()
    step = trace["encoder.0.self_attn.weights"]

    def broken():
        raise RuntimeError("the stored inputs are gone")

    # the step as a lazy trace leaves a large map: not held, rerun on demand (and here the rerun fails)
    step.data, step.parts = None, None
    step.sources = [Recompute("0:encoder.0.self_attn", broken, trace.cache)]
    assert not step.ready(0)
    w.go_to(step.index)
    qtbot.waitUntil(lambda: not w.is_recomputing(), timeout=30_000)
    message = w.message_text()
    assert message.startswith("Recomputing ")
    assert message.endswith(" for batch item 1 failed: the stored inputs are gone")
    assert "\n" not in w.message_text() and not w.is_busy()
    w.go_to(trace.index_of("encoder.0.self_attn.scores"))  # other steps still show
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=30_000)
    w.source_edit.setText("a dog ran")
    run_and_wait(qtbot, w)
    assert w.current_trace().source_tokens[0] == ["a", " dog", " ran"]
