"""What if, from the window: right-click a head to ablate it, the Interventions list, Compare, the Output tab's
before → after, and head importance in a worker thread."""

from __future__ import annotations

import numpy as np
import pytest

from app.views.compare_view import CompareView
from app.views.importance_view import ImportanceView
from app.views.output_view import OutputView
from app.views.overview_view import OverviewView
from tests.app.conftest import run_and_wait
from tests.app.test_views import show

SENTENCE = "the girl eats an apple"
ATTENTION = "decoder.1.cross_attn"  # en-hi's guided head is head0 here, head 1 in the window


def view_of(w, cls):
    return next(v for v in w.views if isinstance(v, cls))


def trigger(menu, text):
    action = next(a for a in menu.actions() if a.text() == text)
    assert action.isEnabled(), text
    action.trigger()


def wait_for_run(qtbot, w, old):
    qtbot.waitUntil(lambda: not w.is_busy() and w.current_result() is not old, timeout=60_000)


@pytest.fixture
def en_hi(qtbot, make_window):
    w = make_window(source=SENTENCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    assert w.current_result().inputs.decoder_input == "generated", w.message_text()
    return w


def ablate_from_heads_tab(qtbot, w, how="Ablate head (zero)"):
    w.go_to_step(f"{ATTENTION}.weights", head=0)
    heads = show(w, type(w.views[1]))
    old = w.current_result()
    menu = heads.thumbs[0].context_menu((0, 0))  # right-click on head 1's thumbnail
    assert "Decoder 2 › Cross-attention, head 1" in [a.text() for a in menu.actions()]
    trigger(menu, how)
    wait_for_run(qtbot, w, old)
    return w.current_result()


def test_right_click_ablates_a_head_and_the_list_switches_it_off(qtbot, en_hi):
    w = en_hi
    untouched = w.current_result()
    result = ablate_from_heads_tab(qtbot, w)
    context = result.trace[f"{ATTENTION}.context"]
    assert "head 1 zeroed" in context.title
    assert float(context.tensor[0, 0].abs().max()) == 0.0
    assert result.request.interventions and result.trace.interventions[0].spec() == f"{ATTENTION}.head0:zero"
    panel = w.interventions_panel
    assert panel.isVisible()
    assert panel.texts() == [f"Decoder 2 › Cross-attention, head 1 zeroed   [{ATTENTION}.head0:zero]"]
    assert w.current_step().name == f"{ATTENTION}.weights"  # the re-run stays where the user was

    old = w.current_result()
    panel.list.item(0).setCheckState(panel.list.item(0).checkState().__class__.Unchecked)  # the user unticks it
    wait_for_run(qtbot, w, old)
    restored = w.current_result()
    assert restored.before is None and not restored.trace.interventions
    assert restored.inputs.translation == untouched.inputs.translation
    assert np.array_equal(restored.trace["generator.probs"].tensor, untouched.trace["generator.probs"].tensor)
    assert "zeroed" not in restored.trace[f"{ATTENTION}.context"].title


def test_overview_and_step_view_offer_the_same_menu_and_undo(qtbot, en_hi):
    w = en_hi
    overview = show(w, OverviewView)
    mosaic = overview._maps["decoder.cross_attn"]
    tile_cols = mosaic.extra["tile_cols"]
    menu = overview.widgets["decoder.cross_attn"].context_menu((0, tile_cols + 1))  # decoder 1, head 2
    assert "Decoder 1 › Cross-attention, head 2" in [a.text() for a in menu.actions()]
    old = w.current_result()
    trigger(menu, "Ablate head (mean)")
    wait_for_run(qtbot, w, old)
    assert "decoder.0.cross_attn.head1:mean" in [i.spec() for i in w.current_result().trace.interventions]

    w.go_to_step("decoder.0.cross_attn.context", head=1)
    step_view = show(w, type(w.views[0]))
    menu = step_view.heatmap.context_menu(None)
    assert "Decoder 1 › Cross-attention, head 2" in [a.text() for a in menu.actions()]
    old = w.current_result()
    trigger(menu, "Undo: remove the changes to this head")
    wait_for_run(qtbot, w, old)
    assert w.interventions_panel.entries == [] and not w.current_result().trace.interventions

    w.go_to_step("encoder.0.add_norm1.out")  # no head axis: only the export entries
    assert not any("Ablate" in a.text() for a in step_view.heatmap.context_menu(None).actions())


def test_compare_shows_the_change_after_the_head_and_none_before(qtbot, en_hi):
    w = en_hi
    result = ablate_from_heads_tab(qtbot, w)
    assert result.before is not None
    compare = show(w, CompareView)
    w.go_to_step(f"{ATTENTION}.context", head=0)
    c = compare.comparison
    assert c.largest > 0 and np.abs(c.difference.values).max() > 0
    assert c.after.values.max() == c.after.values.min() == 0.0  # head 1's context is zeroed
    lo, hi = c.difference.levels
    assert lo == -hi and c.difference.colormap == "RdBu_r"
    assert "same decoder input" in compare.caption.text()
    w.go_to_step("encoder.1.add_norm2.out")  # the encoder runs before the ablated head: nothing changes
    assert compare.comparison.largest == 0.0
    assert "no change" in compare.caption.text()
    w.go_to_step(f"{ATTENTION}.context", head=2)  # another head of the same attention is untouched
    assert compare.comparison.largest == 0.0


def test_output_tab_shows_before_and_after(qtbot, en_hi):
    w = en_hi
    untouched = w.current_result().inputs.translation
    ablate_from_heads_tab(qtbot, w, "Keep only this head")
    result = w.current_result()
    assert result.before_output == untouched
    assert result.after_output == result.inputs.translation
    output = show(w, OutputView)
    text = output.caption.text()
    assert f"Decoded output before: <b>{untouched}</b>" in text
    assert f"Decoded output after: <b>{result.after_output}</b>" in text
    cell = output.table.text(0, 2)
    assert "→" in cell
    p_before, p_after = (float(x) for x in cell.split()[-3::2])
    assert 0.0 <= p_before <= 1.0 and 0.0 <= p_after <= 1.0


def test_head_importance_fills_layers_by_heads_maps(qtbot, en_hi):
    w = en_hi
    view = show(w, ImportanceView)
    view.measure()
    assert view.is_measuring() and view.cancel_button.isVisible()
    qtbot.waitUntil(lambda: not view.is_measuring(), timeout=60_000)
    kinds = [m.extra["kind"] for m in view.maps]
    assert kinds == ["decoder.cross_attn", "decoder.self_attn", "encoder.self_attn"]
    config = w.current_bundle().config
    assert all(m.shape == (2, config.n_heads) for m in view.maps)
    cross = view.maps[0]
    assert np.abs(cross.values).max() > 0
    assert "Measured on en-hi" in view.status.text()
    heads = sum(m.values.size for m in view.maps)  # each head's progress reached the bar before the maps did
    assert (view.progress.value(), view.progress.maximum(), view.progress.format()) == (heads, heads, "head %v of %m")
    view.widgets[0].clicked.emit(1, 0)  # a click on layer 2, head 1 goes there
    assert w.current_step().name == "decoder.1.cross_attn.weights" and w.current_head() == 0


def test_head_importance_can_be_cancelled(qtbot, ran_window):
    w = ran_window  # the blog model: 2 attentions of 2 heads
    view = show(w, ImportanceView)
    view.measure()
    view.cancel()  # ends between two heads; its thread is waited for
    assert not view.is_measuring()
    assert view.status.text() == "Cancelled." and view.measure_button.isEnabled()
    assert view.maps == []


def test_head_importance_needs_a_decoder_input(qtbot, make_window):
    w = make_window(target="")
    w.input_bar.start_only.setChecked(True)
    run_and_wait(qtbot, w)
    view = show(w, ImportanceView)
    view.measure()
    assert not view.is_measuring()
    assert "at least one token after the start token" in view.status.text()
