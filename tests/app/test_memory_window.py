"""The memory budget in the window: the status bar shows what the trace holds; a run over the budget is one
sentence and keeps what the user typed."""

from __future__ import annotations

from app.memory_status import SETTING, budget_bytes
from tests.app.conftest import run_and_wait

LONG = "the model reads every token of this sentence " * 8


def test_status_bar_shows_the_trace_and_the_recomputed_interiors(qtbot, make_window):
    w = make_window(source=LONG, target=LONG, model="paper")
    run_and_wait(qtbot, w)
    trace = w.current_trace()
    assert trace is not None, w.message_text()
    lazy = [s for s in trace if not s.stored]  # paper at 70 tokens: Q/K/V, FFN hidden, logits are recomputed
    assert {"qkv", "ffn_hidden", "probabilities"} <= {s.kind for s in lazy}
    assert w.memory_status.text().startswith("Memory: trace ") and "budget" in w.memory_status.text()
    w.go_to(lazy[0].index)  # shown: its sublayer is recomputed for batch item 1 and cached
    assert trace.cache.misses >= 1 and trace.cache.bytes > 0
    assert "recomputed" in w.memory_status.text()


def test_a_run_over_the_budget_is_one_sentence_and_keeps_the_text(qtbot, make_window, monkeypatch):
    w = make_window(model="paper")
    w.settings.set(SETTING, 0.05)  # 50 MB: less than the paper preset's weights alone
    run_and_wait(qtbot, w)
    message = w.message_text()
    assert "budget" in message and "raise the memory budget" in message and "\n" not in message
    assert w.source_edit.text() == "machine learning using PyTorch"
    monkeypatch.setattr("app.memory_status.QInputDialog.getDouble", lambda *a, **k: (8.0, True))
    w.ask_memory_budget()
    assert budget_bytes(w.settings) == 8 * 2**30 and "budget 8.0 GB" in w.memory_status.text()
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()


def test_comparing_counts_the_changed_runs_trace_against_the_budget():
    import pytest

    from app.worker import RunRequest, compute
    from scratchformer.bundle import load_model
    from scratchformer.errors import UserError
    from scratchformer.interventions import HeadChange

    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare("the girl eats an apple", "लड़की सेब खाती है")
    _, trace = bundle.run(inputs, keep_output=False)
    one_run = bundle.memory_estimate(inputs).total
    change = (HeadChange("decoder.1.cross_attn", 0),)
    ask = dict(model="en-hi", device="cpu", source="the girl eats an apple", target="लड़की सेब खाती है",
               interventions=change)
    fits_one = one_run + trace.stored_bytes() // 2  # room for one run, not for a second trace beside it
    with pytest.raises(UserError, match="Comparing needs a second run"):
        compute(RunRequest(1, memory_budget=fits_one, **ask), {})
    result = compute(RunRequest(2, memory_budget=one_run + 4 * trace.stored_bytes(), **ask), {})
    assert result.before is not None and result.trace.interventions
