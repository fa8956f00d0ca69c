"""The decoding timeline tab: teacher forcing vs free-running, stepping, the attention rows, unknown words."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QWidget

from scratchformer.loading.bundle import ModelBundle
from scratchformer.loading.tokenizers import word_level_tokenizer
from scratchformer.running.decoding import greedy, teacher_forced_hidden
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.model import Transformer


def _bundle(**extra) -> ModelBundle:
    src_tok = word_level_tokenizer(["we are friends", "the boy eats an apple"], "en")
    tgt_tok = word_level_tokenizer(["हम दोस्त हैं", "लड़का सेब खाता है"], "hi")
    config = TransformerConfig(
        d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2, dropout=0.0,
        src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, max_len=24, share_embeddings=False,
        pad_id=0, bos_id=1, eos_id=2, extra={"src_suffix": ["</s>"], **extra},
    )  # fmt: skip
    torch.manual_seed(0)
    return ModelBundle(Transformer(config).eval(), src_tok, tgt_tok, "tiny", "test")


class FakeWindow(QWidget):
    """What a view needs from the main window: the current run and the hover/export hooks."""

    def __init__(self, bundle, source, target, decoder_input=None) -> None:
        super().__init__()
        self.result = SimpleNamespace(bundle=bundle, request=SimpleNamespace(source=source, target=target,
                                                                              windows=None),
                                      inputs=SimpleNamespace(decoder_input=decoder_input or
                                                             ("typed" if target else "start_only")))
        self.errors: list[str] = []

    def current_result(self):
        return self.result

    def show_hover(self, text):
        pass

    def request_export(self, what):
        pass

    def show_error(self, message):
        self.errors.append(message)


@pytest.fixture
def view_for(qtbot):
    from app.views.decoding_view import DecodingView

    made = []

    def make(source="we are friends", target="हम दोस्त हैं", decoder_input=None, **extra):
        window = FakeWindow(_bundle(**extra), source, target, decoder_input)
        qtbot.addWidget(window)
        view = DecodingView(window)
        qtbot.addWidget(view)
        made.append((window, view))
        return window, view

    yield make
    for window, view in made:
        window.close()  # the view waits for its worker when the window closes
        view.shutdown()


def _wait(qtbot, view):
    qtbot.waitUntil(lambda: view.timeline is not None and not view.is_busy(), timeout=30_000)


def test_teacher_forcing_steps_through_the_typed_target(qtbot, view_for):
    window, view = view_for()
    view.refresh()
    _wait(qtbot, view)
    tl = view.timeline
    assert tl.mode == "teacher"
    assert [s.token for s in tl.steps] == ["हम", "दोस्त", "हैं", "</s>"]
    assert view.heatmap.heatmap.shape == (1, 4)  # one row so far, over "we are friends </s>"
    assert view.top_table.rowCount() > 0
    view.next_button.click()
    view.next_button.click()
    assert view.position == 2
    assert view.heatmap.heatmap.shape == (3, 4)
    assert "दोस्त" in view.step_label.text() and "हैं" in view.step_label.text()
    # the rows drawn are the rows the timeline computed: by default the last layer, heads averaged
    assert view.layer_box.currentText() == "2" and view.head_box.currentText() == "averaged"
    expected = np.stack([s.cross_attention[-1].mean(0) for s in tl.steps[:3]])
    np.testing.assert_allclose(view.heatmap.heatmap.values, expected, atol=1e-6)
    view.first_button.click()
    assert view.position == 0 and not view.prev_button.isEnabled()


def test_teacher_forced_rows_equal_the_full_pass(qtbot, view_for):
    """The causal mask at work: the step-by-step rows are the rows of one teacher-forced pass."""
    window, view = view_for(source="the boy eats an apple", target="लड़का सेब खाता है")
    view.refresh()
    _wait(qtbot, view)
    stepped = np.stack([s.hidden for s in view.timeline.steps])
    full = teacher_forced_hidden(window.result.bundle, "the boy eats an apple", "लड़का सेब खाता है")
    np.testing.assert_allclose(stepped, full, atol=1e-5)


def test_free_running_follows_greedy_and_play_runs_to_the_end(qtbot, view_for):
    window, view = view_for(target="")
    view.mode_box.setCurrentIndex(1)  # free-running
    _wait(qtbot, view)
    tl = view.timeline
    assert tl.mode == "free"
    bundle = window.result.bundle
    expected = greedy(bundle, bundle.encode_source("we are friends"), len(tl.steps))
    assert [s.token_id for s in tl.steps][: len(expected)] == expected
    view.timer.setInterval(10)
    view.play_button.setChecked(True)
    qtbot.waitUntil(lambda: not view.play_button.isChecked(), timeout=10_000)
    assert view.position == len(tl.steps) - 1
    assert not view.timer.isActive()


def test_teacher_mode_without_a_target_explains_itself(qtbot, view_for):
    window, view = view_for(target="")
    view.refresh()
    assert view.timeline is None and not view.is_busy()
    assert "target" in view.empty.text()


def test_a_run_on_the_models_own_output_shows_the_free_running_timeline(qtbot, view_for):
    window, view = view_for(target="", decoder_input="generated")
    view.refresh()
    _wait(qtbot, view)
    assert view.mode_box.currentData() == "free" and view.timeline.mode == "free"


def test_unknown_words_are_marked(qtbot, view_for):
    window, view = view_for(source="we are zebras", target="")
    view.mode_box.setCurrentIndex(1)
    _wait(qtbot, view)
    assert view.timeline.unknown_words == ["zebras"]
    assert "zebras" in view.source_label.text() and "&lt;unk&gt;" in view.source_label.text()


def test_layer_and_head_choice_changes_the_rows(qtbot, view_for):
    window, view = view_for()
    view.refresh()
    _wait(qtbot, view)
    view.layer_box.setCurrentIndex(2)  # decoder layer 2
    view.head_box.setCurrentIndex(1)  # head 1
    row = view.timeline.steps[0].cross_attention[1, 0]
    np.testing.assert_allclose(view.heatmap.heatmap.values[0], row, atol=1e-6)
    assert "layer 2" in view.heatmap.heatmap.title and "head 1" in view.heatmap.heatmap.title


def test_in_the_real_window(qtbot, make_window):
    """In the window (its Output group), the view decodes the window's run (the blog preset: GPT-2 vocabulary)."""
    from app.views.decoding_view import DecodingView
    from tests.app.conftest import run_and_wait

    w = make_window(source="machine learning using PyTorch", target="the answer")
    run_and_wait(qtbot, w)
    view = next(v for v in w.views if isinstance(v, DecodingView))
    w.tabs.setCurrentWidget(view)
    _wait(qtbot, view)
    assert view.timeline.mode == "teacher"
    assert [s.token for s in view.timeline.steps] == ["the", " answer", "<|endoftext|>"]
    assert view.heatmap.heatmap is not None and view.current_heatmaps()


def test_a_guided_head_is_shown_first_and_labelled(qtbot, view_for):
    window, view = view_for(alignment_layer=0, guided_alignment={"layer": 0, "head": 1, "weight": 0.5})
    view.refresh()
    _wait(qtbot, view)
    assert view.layer_box.currentText() == "1"
    assert view.head_box.currentText() == "2 (guided in layer 1)"
    np.testing.assert_allclose(view.heatmap.heatmap.values[0], view.timeline.steps[0].cross_attention[0, 1],
                               atol=1e-6)
