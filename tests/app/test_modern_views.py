"""What the window shows for today's decoders: the Rotary positions view (the angles, and a score that stays the
same when query and key move together), which key/value head each query head reads under grouped-query
attention, and the router's tokens × experts map of a mixture of experts."""

import numpy as np
import pytest

from app.views.rotary_view import RotaryView
from tests.app.conftest import run_and_wait
from tests.app.test_views import show


@pytest.fixture
def llama_window(qtbot, make_window):
    w = make_window(source="3 1 4 1 5 9 2 6 <sep>", target="", model="llama-tiny")  # it continues: the reversal
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    return w


def test_the_rotary_view_shows_a_score_that_only_sees_the_distance(qtbot, llama_window):
    w = llama_window
    w.go_to_step("decoder.1.self_attn.q_rotated")
    view = show(w, RotaryView)
    value = view.value
    assert value is not None and view.body.isVisible() and not view.other.isVisible()
    assert value.pick.sublayer == "decoder.1.self_attn"
    s = value.shift
    assert s.rotary[0] == pytest.approx(s.traced, abs=1e-4)  # the run's own score at shift 0
    assert np.allclose(s.rotary, s.rotary[0], rtol=1e-9, atol=1e-9)  # and at every shift
    assert s.added_spread > 1e-3  # added sinusoids would move it
    assert "at every shift" in view.summary.text()
    assert "reads key/value head" in view.summary.text()  # 4 query heads share 2 key/value heads
    assert value.angles.values.shape[1] == 8  # d_head 16: 8 pairs
    titles = [m.title for m in view.current_heatmaps()]
    assert any("cos of the angle" in t for t in titles) and any("moved by s positions" in t for t in titles)
    view.show_pick("decoder.0.self_attn", 2, 5, 1)  # another head, query and key: still the same at every shift
    qtbot.waitUntil(lambda: view.value is not None and view.value.shift.m == 5 and view.value.key == 1)
    assert view.value.kv_head == 1 and view.value.shift.spread < 1e-9 * max(1.0, abs(view.value.shift.rotary[0]))


def test_the_rotary_view_explains_itself_for_a_model_without_it(qtbot, ran_window):
    view = show(ran_window, RotaryView)
    assert view.other.isVisible() and not view.body.isVisible()
    assert "does not use rotary positions" in view.other.text() and "sinusoids" in view.other.text()
    assert view.current_heatmaps() == []


def test_heads_and_neuron_views_say_which_key_value_head_each_query_head_reads(qtbot, llama_window):
    from app.views.heads_view import HeadsView
    from app.views.neuron_view import NeuronView

    w = llama_window
    w.go_to_step("decoder.0.self_attn.weights")
    heads = show(w, HeadsView)
    assert [m.title for m in heads.current_heatmaps()] == [
        "Head 1 · reads K/V head 1", "Head 2 · reads K/V head 1", "Head 3 · reads K/V head 2",
        "Head 4 · reads K/V head 2"]  # fmt: skip
    assert "4 query heads read 2 key/value heads" in heads.caption.text()
    assert "KV cache keeps 2·2·16 = 64 numbers per token and layer instead of 128" in heads.caption.text()
    w.set_head(2)
    neuron = show(w, NeuronView)
    qtbot.waitUntil(lambda: neuron.value is not None)
    assert "reads key/value head 2" in neuron.summary.text()


@pytest.fixture(scope="module")
def mixtral_folder(tmp_path_factory):
    from tests.scratchformer.test_importers_moe import _save

    directory = tmp_path_factory.mktemp("mixtral")
    _save(directory, "mixtral")
    return directory


def test_the_router_map_labels_its_experts_and_leaves_unchosen_ones_blank(qtbot, make_window, mixtral_folder):
    from app.views.step_view import StepView

    w = make_window(source="the cat sat on the mat", target="", model=str(mixtral_folder))
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    w.go_to_step("decoder.1.moe.chosen_weights")
    view = show(w, StepView)
    hm = view.current_heatmaps()[0]
    assert hm.col_labels == ["expert 1", "expert 2", "expert 3", "expert 4"]
    assert hm.row_labels[1].strip() == "the"  # a row per token
    chosen = ~hm.gaps
    assert (chosen.sum(axis=1) == 2).all()  # two experts per token, the others blank
    assert np.allclose(hm.values.sum(axis=1), 1.0, atol=1e-5)  # renormalised over the chosen two
    assert "blank: expert not chosen" in hm.subtitle


def test_run_menu_opens_a_bfloat16_folder_in_its_stored_precision(qtbot, make_window, tmp_path):
    """Run › Open model folders in their stored precision: the next Run opens the saved bfloat16 model as
    bfloat16 (half the memory); unticked, the same folder opens in float32 again."""
    import torch

    from tests.scratchformer.test_importers_llama import _save

    _save(tmp_path, "llama", num_hidden_layers=1, dtype=torch.bfloat16)
    w = make_window(source="the cat sat on the mat", target="", model=str(tmp_path))
    w.stored_precision_action.setChecked(True)
    run_and_wait(qtbot, w)
    assert w._result.request.precision == "stored"
    assert {p.dtype for p in w._result.bundle.model.parameters()} == {torch.bfloat16}
    w.stored_precision_action.setChecked(False)
    run_and_wait(qtbot, w)
    assert {p.dtype for p in w._result.bundle.model.parameters()} == {torch.float32}
