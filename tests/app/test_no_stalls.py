"""The window does its slow work where it cannot freeze the window: the LayerNorm comparison is computed off
the UI thread, the Heads and Masks tabs' plots are built ahead (a first visit builds none), and while the user
looks at a step the next steps' sublayers are recomputed in the background, so Next finds them ready. What is
drawn stays what the trace holds. (Timings are in benchmarks/bench_stalls.py, not here.)"""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F

from app.main import drawn
from app.views.heads_view import HeadsView
from app.views.masks_view import MasksView
from app.views.norm_view import NormView
from app.views.step_view import StepView
from app.work.warmup import neighbour_work
from tests.app.conftest import run_and_wait

LONG = "the model reads every token of this sentence " * 8


def show(w, cls):
    i = next(i for i, v in enumerate(w.views) if isinstance(v, cls))
    w.tabs.setCurrentIndex(i)
    drawn(w)
    return w.views[i]


def test_the_layer_norm_comparison_is_computed_off_the_ui_thread(qtbot, ran_window, monkeypatch):
    import app.views.norm_view as norm_view

    threads = []
    real = norm_view.norm_comparison

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(norm_view, "norm_comparison", recording)
    w = ran_window
    w.go_to_step("encoder.0.add_norm1.out")
    view = show(w, NormView)
    assert threads and all(t is not threading.main_thread() for t in threads)
    # what it draws is still LayerNorm's z = (x − μ)/σ of the step's input, row by row
    x = w.current_trace()["encoder.0.add_norm1.residual"].tensor[0]
    eps = w.current_bundle().config.layer_norm_eps
    np.testing.assert_allclose(view.current_heatmaps()[0].values, F.layer_norm(x, x.shape[-1:], eps=eps).numpy(),
                               atol=1e-4)


def test_the_heads_and_masks_plots_are_built_before_the_first_visit(qtbot, ran_window, monkeypatch):
    w = ran_window
    w.prebuild.finish()  # what the window builds while it waits for the user
    heads = next(v for v in w.views if isinstance(v, HeadsView))
    built = {id(t) for t in heads._spare}
    # at least one per head: a cold process may also have built some for the window's model before the run
    # (8 heads) while the run of this 2-head model was still going; a first visit must then build none
    assert len(built) >= w.current_bundle().config.n_heads

    def no_new_plots(*args, **kwargs):
        raise AssertionError("a first visit built a plot")

    monkeypatch.setattr("app.views.heads_view.HeatmapWidget", no_new_plots)
    monkeypatch.setattr("app.views.masks_view.HeatmapWidget", no_new_plots)
    w.go_to_step("encoder.0.self_attn.weights")
    view = show(w, HeadsView)
    assert len(view.thumbs) == w.current_bundle().config.n_heads and {id(t) for t in view.thumbs} <= built
    weights = w.current_trace()["encoder.0.self_attn.weights"].tensor[0]  # (head, q, k)
    for h, thumb in enumerate(view.thumbs):
        np.testing.assert_array_equal(thumb.heatmap.values, weights[h].numpy())
    view.thumbs[1].clicked.emit(0, 0)  # a reused thumbnail still enlarges its own head
    assert w.current_head() == 1
    masks = show(w, MasksView)
    assert masks.widgets and all(m.isVisible() for m in masks.widgets)


def test_the_next_steps_are_recomputed_while_the_user_looks(qtbot, make_window):
    w = make_window(source=LONG, target=LONG, model="paper")
    w.set_detail("all")
    run_and_wait(qtbot, w, timeout=120_000)
    trace = w.current_trace()
    assert trace is not None, w.message_text()
    visible = w.visible_steps()
    lazy = [i for i in visible if not trace[i].stored]  # a long run: these sublayers are recomputed when shown
    before = visible[visible.index(lazy[0]) - 1]
    qtbot.waitUntil(lambda: not w.is_prefetching(), timeout=60_000)  # it already prefetched from the first step
    trace.cache.clear()
    assert not trace[lazy[0]].ready(0)
    w.go_to(before)  # the user looks at the step before the first recomputed one
    qtbot.waitUntil(lambda: trace[lazy[0]].ready(0) and not w.is_prefetching(), timeout=60_000)
    w.next_step()  # Next: its sublayer is ready, so it is drawn at once, with no recompute to wait for
    assert w.current_step().index == lazy[0] and not w.is_recomputing()
    step = w.current_step()
    view = show(w, StepView)
    expected = step.item(0)
    expected = expected[0] if "head" in step.dims else expected  # head 1 of a per-head step
    np.testing.assert_array_equal(view.current_heatmaps()[0].values, expected.to(torch.float32).numpy())


def test_neighbour_work_recomputes_the_nearest_sublayers_first(qtbot, make_window):
    w = make_window(source=LONG, target=LONG, model="paper")
    run_and_wait(qtbot, w, timeout=120_000)
    trace = w.current_trace()
    qtbot.waitUntil(lambda: not w.is_prefetching(), timeout=60_000)  # the window's own prefetch, done
    trace.cache.clear()
    steps = list(trace)
    at = next(i for i, s in enumerate(steps) if not s.stored) - 1
    work = neighbour_work(steps, at, batch=0, ahead=len(steps), limit=2)
    assert len(work) == 2
    first = [s for s in steps[at + 1:] if not s.stored]
    sublayers = list(dict.fromkeys(s.sublayer for s in first))[:2]  # the two nearest recomputed sublayers
    for job in work:
        job()
    for s in first:
        assert s.ready(0) == (s.sublayer in sublayers)
    assert neighbour_work(steps, at, batch=0, ahead=1) == []  # the next step is ready: nothing left there
