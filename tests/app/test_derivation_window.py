"""How this number was made, in the window: a click on a map cell derives it off the UI thread, its inputs go
back to their step with the cells outlined, and a click there derives them in turn."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QPointF, Qt

from app.views.derivation_view import DerivationView
from app.views.step_view import StepView
from scratchformer.analyses import derive


def view_of(w, cls):
    return next(v for v in w.views if isinstance(v, cls))


def click_cell(qtbot, heatmap, row, col):
    """A real left click on the centre of map cell (row, col)."""
    scene = heatmap.plot.getViewBox().mapViewToScene(QPointF(col, row))
    qtbot.mouseClick(heatmap.view.viewport(), Qt.MouseButton.LeftButton, pos=heatmap.view.mapFromScene(scene))


def wait_derived(qtbot, view):
    qtbot.waitUntil(lambda: not view.is_deriving() and view.derivation is not None, timeout=20_000)


def test_a_click_on_a_weight_derives_it_and_its_inputs_lead_back_to_the_map(qtbot, en_hi):
    w = en_hi
    step_view, view = view_of(w, StepView), view_of(w, DerivationView)
    w.tabs.setCurrentWidget(step_view)
    w.go_to_step("decoder.1.cross_attn.weights", head=2)
    qtbot.waitUntil(lambda: not w.is_busy())
    click_cell(qtbot, step_view.heatmap, 3, 1)
    wait_derived(qtbot, view)
    assert w.tabs.currentWidget() is view
    d = view.derivation
    assert (d.step, d.index) == ("decoder.1.cross_attn.weights", (0, 2, 3, 1))
    assert d.value == float(w.current_trace()["decoder.1.cross_attn.weights"].tensor[0, 2, 3, 1])
    assert d.agrees()
    text = view.browser.toPlainText()
    assert "equals the value in the trace" in text and "6 cells of" in text

    view.follow("cells:0")  # the row of masked scores the softmax read
    qtbot.waitUntil(lambda: not w.is_busy())
    assert w.current_step().name == "decoder.1.cross_attn.masked_scores"
    assert w.tabs.currentWidget() is step_view and w.current_head() == 2
    assert step_view.heatmap.highlighted == [(3, j) for j in range(6)]

    click_cell(qtbot, step_view.heatmap, 3, 4)  # one of the outlined cells: derived in turn
    qtbot.waitUntil(lambda: view.derivation.step == "decoder.1.cross_attn.masked_scores", timeout=20_000)
    assert view.derivation.index == (0, 2, 3, 4) and view.back_button.isEnabled()
    view.back()
    qtbot.waitUntil(lambda: view.derivation.step == "decoder.1.cross_attn.weights", timeout=20_000)
    assert view.derivation.index == (0, 2, 3, 1)


def test_a_token_row_and_a_vocabulary_column_derive_the_right_cell(qtbot, en_hi):
    w = en_hi
    step_view, view = view_of(w, StepView), view_of(w, DerivationView)
    w.tabs.setCurrentWidget(step_view)
    w.go_to_step("src_embed.tokens")
    qtbot.waitUntil(lambda: not w.is_busy())
    table = step_view.token_table
    rect = table.visualRect(table.model().index(1, 1))  # the token of position 1, "girl"
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    wait_derived(qtbot, view)
    assert view.derivation.index == (0, 1) and "girl" in view.derivation.expression

    w.tabs.setCurrentWidget(step_view)
    w.go_to_step("generator.probs")
    qtbot.waitUntil(lambda: not w.is_busy())
    shown = step_view.current_heatmaps()[0]
    vocab_id = int(shown.extra["vocab_ids"][0])  # the map shows chosen vocabulary columns, not ids 0, 1, 2 …
    click_cell(qtbot, step_view.heatmap, 2, 0)
    qtbot.waitUntil(lambda: view.derivation.step == "generator.probs", timeout=20_000)
    assert view.derivation.index == (0, 2, vocab_id)
    assert view.derivation.value == pytest.approx(float(w.current_trace()["generator.probs"].tensor[0, 2, vocab_id]))


def test_derivations_run_off_the_ui_thread_and_mistakes_are_one_sentence(qtbot, en_hi, monkeypatch):
    w, view = en_hi, view_of(en_hi, DerivationView)
    threads = []
    real = derive.compute

    def recording(*args):
        threads.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(derive, "compute", recording)
    view.derive("encoder.1.add_norm2.out", (0, 2, 5))
    wait_derived(qtbot, view)
    assert threads and threading.main_thread() not in threads
    view.derive("encoder.0.self_attn.weights", (0, 0, 9, 0))
    qtbot.waitUntil(lambda: not view.is_deriving())
    assert "out of range" in w.message_text() and "runs from 0 to 5" in w.message_text()
    assert view.derivation.step == "encoder.1.add_norm2.out"  # the last good derivation stays


def test_the_enlarged_head_and_the_positional_encoding_maps_derive_their_cells(qtbot, en_hi):
    from app.views.heads_view import HeadsView
    from app.views.pe_view import PositionalView

    w, view = en_hi, view_of(en_hi, DerivationView)
    heads = view_of(w, HeadsView)
    w.tabs.setCurrentWidget(heads)
    w.go_to_step("encoder.1.self_attn.weights", head=1)
    qtbot.waitUntil(lambda: not w.is_busy())
    click_cell(qtbot, heads.large, 2, 3)
    wait_derived(qtbot, view)
    assert (view.derivation.step, view.derivation.index) == ("encoder.1.self_attn.weights", (0, 1, 2, 3))

    pe = view_of(w, PositionalView)
    w.tabs.setCurrentWidget(pe)
    qtbot.waitUntil(lambda: not w.is_busy() and pe.heatmap.heatmap is not None)
    click_cell(qtbot, pe.heatmap, 3, 10)
    qtbot.waitUntil(lambda: view.derivation.step == "src_embed.positional_encoding", timeout=20_000)
    assert view.derivation.index == (3, 10) and "sin(3 / 10000^(10/128))" in view.derivation.expression
