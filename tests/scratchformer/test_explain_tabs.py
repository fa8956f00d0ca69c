"""Tab explanations (scratchformer.explain.tabs): what each tab shows and why, with numbers of this run that a
user can check against the tab itself."""

from __future__ import annotations

import math

import pytest

from scratchformer.explain.tabs import TABS, explain_tab
from scratchformer.loading.bundle import load_model


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    _, trace = bundle.run(bundle.prepare_run("the girl eats an apple"))
    return bundle, trace


def test_every_tab_has_a_what_a_why_and_numbers(en_hi):
    bundle, trace = en_hi
    for tab in TABS:
        ex = explain_tab(tab, trace, bundle.config)
        assert ex.what and ex.why and ex.numbers, tab
        assert "{" not in ex.numbers and "None" not in ex.numbers, (tab, ex.numbers)
    assert explain_tab("step", trace, bundle.config) is None  # the Step tab explains the step instead


def test_the_numbers_are_this_runs(en_hi):
    bundle, trace = en_hi
    src, tgt = len(trace.source_tokens[0]), len(trace.target_tokens[0])  # 6 source tokens (with </s>), 5 rows
    masks = explain_tab("masks", trace, bundle.config).numbers
    assert f"blocks {tgt * (tgt - 1) // 2} of its {tgt} × {tgt} cells" in masks
    assert f"Encoder self-attention is {src} × {src}" in masks and f"cross-attention is {tgt} × {src}" in masks
    assert "no padding" in masks
    pe = explain_tab("positional", trace, bundle.config).numbers
    assert f"{src} source positions and {tgt} target positions" in pe
    assert f"{2 * math.pi * 10000 ** (126 / 128):,.0f}" in pe  # the slowest sinusoid of d_model 128
    overview = explain_tab("overview", trace, bundle.config).numbers
    assert overview.startswith("24 maps in all") and "cross-attention: 2 layers × 4 heads" in overview
    norms = sum(s.kind == "layer_norm" for s in trace)
    assert f"LayerNorm {norms} times" in explain_tab("layernorm", trace, bundle.config).numbers
    assert "25 times" in explain_tab("importance", trace, bundle.config).numbers  # 24 heads + once untouched
    decoding = explain_tab("decoding", trace, bundle.config, facts={"translation": "लड़की सेब खाती है"}).numbers
    assert "(4 words) in 5 steps" in decoding
    training = explain_tab("training", trace, bundle.config, facts={"snapshot_steps": [32, 64],
                                                                    "total_steps": 2030}).numbers
    assert "2 snapshots, at steps 32, 64 of the 2,030" in training
    assert "no training snapshots" in explain_tab("training", trace, bundle.config).numbers
    smoothed = explain_tab("training", trace, bundle.config, facts={"label_smoothing": 0.1,
                                                                    "best_valid_loss": 0.0577}).numbers
    assert "never go below 0.94" in smoothed and "falls to 0.058" in smoothed  # 497 target tokens, ε = 0.1
    changed = explain_tab("compare", trace, bundle.config, facts={"interventions": ["decoder.1.cross_attn.head0:zero"]})
    assert "decoder.1.cross_attn.head0:zero" in changed.numbers


def test_the_smoothing_floor_is_the_least_loss_torch_can_give():
    import torch
    import torch.nn.functional as F

    from scratchformer.explain.tabs import smoothing_floor

    vocab, eps = 497, 0.1
    best = torch.full((1, vocab), math.log(eps / vocab))  # logits whose softmax is the smoothed target itself
    best[0, 3] = math.log(1 - eps + eps / vocab)
    least = F.cross_entropy(best, torch.tensor([3]), label_smoothing=eps).item()
    assert least == pytest.approx(smoothing_floor(eps, vocab), rel=1e-5)
    worse = F.cross_entropy(best * 2, torch.tensor([3]), label_smoothing=eps).item()  # more confident: higher
    assert worse > least


def test_a_padded_batch_item_counts_its_padding():
    bundle = load_model("en-hi")
    _, trace = bundle.run(bundle.prepare_padded("the girl eats an apple"))  # item k drops its last k words
    pads = int(trace.source_pad[1].sum()), int(trace.target_pad[1].sum())
    assert pads[0] >= 1
    text = explain_tab("masks", trace, bundle.config, batch=1).numbers
    assert f"Batch item 2 has {pads[0]} padded source and {pads[1]} padded target positions" in text
    assert "no padding" in explain_tab("masks", trace, bundle.config, batch=0).numbers


@pytest.mark.parametrize("positional,norm,first,says", [
    ("learned", "layernorm", True, ["learned its 16 position vectors", "pre-LN"]),
    ("none", "rmsnorm", False, ["adds no position vectors", "RMSNorm", "post-LN"]),
])
def test_other_architectures_say_what_they_do_instead(positional, norm, first, says):
    import torch

    from scratchformer.transformer.config import TransformerConfig
    from scratchformer.transformer.model import Transformer

    config = TransformerConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                               src_vocab_size=20, tgt_vocab_size=20, max_len=16, positional=positional, norm=norm,
                               norm_first=first)
    _, trace = Transformer(config).eval().run_with_trace(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 6]]))
    text = explain_tab("positional", trace, config).numbers + explain_tab("layernorm", trace, config).numbers
    for phrase in says:
        assert phrase in text
