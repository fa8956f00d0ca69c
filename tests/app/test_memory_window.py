"""The memory budget in the window: the status bar shows what the trace holds; a run over the budget is one
sentence and keeps what the user typed."""

from __future__ import annotations

from app.widgets.memory_status import SETTING, budget_bytes
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
    w.go_to(lazy[0].index)  # shown: its sublayer is recomputed for batch item 1 (off the UI thread) and cached
    qtbot.waitUntil(lambda: lazy[0].ready(0) and not w.is_busy(), timeout=30_000)
    assert trace.cache.misses >= 1 and trace.cache.bytes > 0
    assert "recomputed" in w.memory_status.text()


def test_a_run_over_the_budget_is_one_sentence_and_keeps_the_text(qtbot, make_window, monkeypatch):
    w = make_window(model="paper")
    w.settings.set(SETTING, 0.05)  # 50 MB: less than the paper preset's weights alone
    run_and_wait(qtbot, w)
    message = w.message_text()
    assert "budget" in message and "raise the memory budget" in message and "\n" not in message
    assert w.source_edit.text() == "machine learning using PyTorch"
    monkeypatch.setattr("app.widgets.memory_status.QInputDialog.getDouble", lambda *a, **k: (8.0, True))
    w.ask_memory_budget()
    assert budget_bytes(w.settings) == 8 * 2**30 and "budget 8.0 GB" in w.memory_status.text()
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()


def test_comparing_counts_the_changed_runs_trace_against_the_budget():
    import pytest

    from app.work.worker import RunRequest, compute
    from scratchformer.errors import UserError
    from scratchformer.loading.bundle import load_model
    from scratchformer.patching.interventions import HeadChange

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


def test_recomputing_a_step_never_runs_on_the_ui_thread(qtbot, make_window):
    import threading

    w = make_window(source=LONG, target=LONG, model="paper")
    run_and_wait(qtbot, w)
    trace = w.current_trace()
    qtbot.waitUntil(lambda: not w.is_prefetching(), timeout=30_000)  # the neighbours of the first step, prefetched
    trace.cache.clear()
    threads = []
    compute = trace.cache.get_or_compute

    def recorded(key, fn):
        return compute(key, lambda: (threads.append(threading.current_thread()), fn())[1])

    trace.cache.get_or_compute = recorded
    lazy = [s for s in trace if not s.stored and s.kind in ("qkv", "ffn_hidden")]
    for step in lazy[:3]:  # step onto three sublayers the trace did not keep
        w.go_to(step.index)
        qtbot.waitUntil(lambda step=step: step.ready(0) and not w.is_busy(), timeout=30_000)
        assert w.current_step() is step
    assert len(threads) >= 3 and threading.main_thread() not in threads


def test_the_overview_of_a_long_run_is_prepared_off_the_ui_thread(qtbot, make_window):
    import threading

    from app.views.overview_view import OverviewView

    w = make_window(source=LONG * 2, target=LONG * 2, model="paper")  # about 140 tokens: attention maps not kept
    run_and_wait(qtbot, w)
    trace = w.current_trace()
    assert not any(s.stored for s in trace.attention_steps())
    threads = []
    compute = trace.cache.get_or_compute
    trace.cache.get_or_compute = lambda key, fn: compute(key, lambda: (threads.append(threading.current_thread()),
                                                                       fn())[1])  # fmt: skip
    view = next(v for v in w.views if isinstance(v, OverviewView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert set(view._maps) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    assert threads and threading.main_thread() not in threads


def test_no_tab_recomputes_on_the_ui_thread_with_or_without_interventions(qtbot, make_window):
    """Every tab at a few steps of a long run (nothing recomputed kept between tabs), then again with a head
    ablated (the Compare and Output tabs then also read the run without it): the window recomputes what a tab
    needs in its recompute job, never on the UI thread."""
    import threading

    from app.views.importance_view import ImportanceView
    from scratchformer.patching.interventions import HeadChange

    w = make_window(source=LONG * 2, target=LONG * 2, model="paper")
    run_and_wait(qtbot, w)
    on_ui_thread = []

    def watch(trace, where):
        compute = trace.cache.get_or_compute

        def recorded(key, fn):
            def run():
                if threading.current_thread() is threading.main_thread():
                    on_ui_thread.append((where[0], key))
                return fn()
            return compute(key, run)

        trace.cache.get_or_compute = recorded

    def visit_every_tab():
        where = [""]
        traces = [t for t in (w.current_result().trace, w.current_result().before) if t is not None]
        for trace in traces:
            watch(trace, where)
        for name in ("encoder.0.add_norm1.out", "decoder.1.cross_attn.context", "decoder.0.ffn.hidden"):
            w.go_to(w.current_trace()[name].index)
            qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
            for i, view in enumerate(w.views):
                if isinstance(view, ImportanceView):  # measures in its own worker, only when asked
                    continue
                for trace in traces:
                    trace.cache.clear()
                where[0] = f"{type(view).__name__} at {name}"
                w.tabs.setCurrentIndex(i)
                qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)

    visit_every_tab()
    old = w.current_result()
    w.interventions_panel.add(HeadChange("decoder.1.cross_attn", 0, "zero"))
    qtbot.waitUntil(lambda: not w.is_busy() and w.current_result() is not old, timeout=120_000)
    assert w.current_result().before is not None
    visit_every_tab()
    assert not on_ui_thread, on_ui_thread[:5]
