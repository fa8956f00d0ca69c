"""A GPT-2 folder in the window: Run continues the text (greedy, or sampled with a seed) as transformers'
generate() does, the stepper walks the text and its continuation, and the Decoding view steps through the new
tokens with their self-attention rows and top-k."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.app.conftest import run_and_wait
from tests.scratchformer.test_importers_gpt2 import _save_gpt2

PROMPT = "machine learning using PyTorch"
START = 50256  # <|endoftext|>, GPT-2's start and end token


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2-window")
    ref = _save_gpt2(directory, seed=1, n_layer=1)
    with torch.no_grad():  # sharper logits: no near-ties for float noise to flip
        ref.transformer.ln_f.weight.mul_(5.0)
        ref.transformer.ln_f.bias.mul_(5.0)
    ref.save_pretrained(str(directory), safe_serialization=True)
    return directory, ref.eval()


def _theirs(ref, ids: list[int], n: int, **sampling) -> list[int]:
    with torch.no_grad():
        out = ref.generate(torch.tensor([ids]), max_new_tokens=n, pad_token_id=START, **sampling)
    new = out[0, len(ids):].tolist()
    return new[: new.index(START)] if START in new else new


def test_run_continues_the_text_and_the_decoding_view_steps_through_it(qtbot, make_window, gpt2):
    from app.views.decoding_view import DecodingView

    directory, ref = gpt2
    w = make_window(source=PROMPT, target="", model=str(directory))
    controls = w.input_bar.continuation_controls
    controls.new_tokens.setValue(5)  # greedy by default
    run_and_wait(qtbot, w)
    result = w.current_result()
    assert result is not None, w.message_text()
    prompt = result.bundle.tgt_tokenizer.encode(PROMPT)
    expected = _theirs(ref, [START, *prompt], 5, do_sample=False)
    assert len(expected) == 5
    assert result.inputs.decoder_input == "generated" and result.inputs.generated == expected
    # the input bar: the continuation's controls in the target's place; the banner shows the new text
    assert controls.isVisible() and not w.target_edit.isVisible()
    assert w.input_bar.target_caption.text() == "Continue"
    assert w.input_bar.decoder_label.text() == "decoder input = text + continuation"
    new_text = result.bundle.tgt_tokenizer.decode(expected).strip()
    assert new_text in w.banner.translation_text() and "greedy" in w.banner.caption.text()

    # the stepper walks the whole text: every decoder step has 1 + 6 + 5 positions, labelled with the new tokens
    n = 1 + len(prompt) + 5
    assert w.go_to_step("decoder.0.self_attn.weights")
    assert w.current_step().shape == (1, 4, n, n)
    labels = result.trace.target_tokens[0]
    assert labels[-5:] == result.bundle.tgt_tokenizer.token_strings(expected)

    # the Decoding view: one step per new token, its self-attention row over what was read, the model's top-k
    view = next(v for v in w.views if isinstance(v, DecodingView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.timeline is not None and not view.is_busy(), timeout=30_000)
    assert [s.token_id for s in view.timeline.steps] == expected
    assert not view.mode_box.isVisible() and "continuation" in view.target_label.text()
    with torch.no_grad():
        full = ref(torch.tensor([[START, *prompt, *expected]]), output_attentions=True)
    first = 1 + len(prompt) - 1  # step 0 reads the text's last token
    probs = full.logits[0, first].softmax(-1)
    top = probs.topk(view.top_table.rowCount())
    shown = [float(view.top_table.item(i, 1).text()) for i in range(view.top_table.rowCount())]
    assert shown == pytest.approx(top.values.tolist(), abs=1e-3)
    assert view.top_table.item(0, 0).toolTip() == view.timeline.steps[0].token  # greedy: the top token is emitted
    assert view.heatmap.heatmap.shape == (1, 1 + len(prompt))
    view.next_button.click()
    view.next_button.click()
    heat = view.heatmap.heatmap
    assert heat.shape == (3, 1 + len(prompt) + 2)
    rows = full.attentions[0][0].mean(0)  # (T, T): the one layer, heads averaged
    np.testing.assert_allclose(heat.values, rows[first : first + 3, : first + 3].numpy(), atol=1e-4)


def test_sampled_runs_repeat_with_their_seed(qtbot, make_window, gpt2):
    directory, ref = gpt2
    w = make_window(source=PROMPT, target="", model=str(directory))
    controls = w.input_bar.continuation_controls
    controls.new_tokens.setValue(6)
    controls.method.setCurrentIndex(controls.method.findData("sample"))
    w.resize(1024, 700)
    controls.temperature.setValue(1.5)
    controls.top_k.setValue(20)
    controls.seed.setValue(7)
    run_and_wait(qtbot, w)
    result = w.current_result()
    assert result is not None, w.message_text()
    prompt = result.bundle.tgt_tokenizer.encode(PROMPT)
    torch.manual_seed(7)
    expected = _theirs(ref, [START, *prompt], 6, do_sample=True, temperature=1.5, top_k=20, top_p=1.0)
    assert result.inputs.generated == expected
    assert "sampled at temperature 1.5 from the top 20, seed 7" in w.banner.caption.text()
    # sampling shows all five controls, and they fit a 1024-pixel window
    qtbot.waitUntil(lambda: w.width() == 1024)
    bar = w.input_bar
    assert controls.seed.isVisible() and bar.minimumSizeHint().width() <= bar.width()
    assert controls.seed.mapTo(bar, controls.seed.rect().topRight()).x() <= bar.width()
    run_and_wait(qtbot, w)
    assert w.current_result().inputs.generated == expected  # the same seed, the same text
    controls.new_tokens.setValue(0)  # none: the model reads the text only
    assert w.input_bar.decoder_label.text() == "decoder input = your text (a decoder-only model)"
    run_and_wait(qtbot, w)
    assert w.current_result().inputs.decoder_input == "typed"



def test_a_trained_decoder_only_models_snapshots_read_the_text_and_its_continuation(qtbot, make_window, tmp_path):
    """The Training tab runs each snapshot on what the window's model read, continuation included: rows line up."""
    from app.views.training_view import TrainingView
    from scratchformer.cli import main

    text = tmp_path / "text.txt"
    text.write_text(" ".join(["the cat sat on the mat and the dog ran to the park"] * 40), encoding="utf-8")
    assert main(["train", "--text", str(text), "--out", str(tmp_path / "m"), "--d-model", "16", "--heads", "2",
                 "--layers", "1", "--d-ff", "32", "--seq-len", "16", "--epochs", "1", "--max-steps", "2",
                 "--snapshots", "2", "--quiet"]) == 0  # fmt: skip
    w = make_window(source="the cat sat", target="", model=str(tmp_path / "m"))
    w.input_bar.continuation_controls.new_tokens.setValue(4)
    run_and_wait(qtbot, w)
    result = w.current_result()
    assert result is not None and result.inputs.decoder_input == "generated", w.message_text()
    view = next(v for v in w.views if isinstance(v, TrainingView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy() and view.current_run() is not None, timeout=60_000)
    n = result.inputs.tgt.shape[1]  # the start token, the text and its continuation
    assert view.final_map.heatmap.shape == (n, n)
    qtbot.waitUntil(lambda: view.snapshot_map.heatmap is not None, timeout=30_000)
    assert view.snapshot_map.heatmap.shape == (n, n)
