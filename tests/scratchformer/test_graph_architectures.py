"""The local replacement model is exact for every layout the model core builds (issue 45): pre-LN and post-LN,
LayerNorm and RMSNorm, T5's relative positions, sandwich and post-norm-only layers, parallel layers, a mixture
of experts, soft-capping and sliding windows, each with random weights and random transcoders."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.points import ffn_input, ffn_steps
from scratchformer.graph import build_graph
from scratchformer.loading.bundle import load_model
from scratchformer.loading.model_bundle import ModelBundle
from scratchformer.transformer.model import Transformer
from tests.scratchformer.graph_fixtures import assert_exact, one_thread  # noqa: F401 - one PyTorch thread

VARIANTS = {
    "pre-LN encoder-decoder with final norms": ("en-hi", dict(norm_first=True, final_layer_norm=True)),
    "T5-like: RMSNorm, relative positions, no biases": (
        "en-hi",
        dict(
            norm="rmsnorm",
            norm_first=True,
            linear_bias=False,
            relative_buckets=8,
            positional="none",
            scale_attention=False,
            final_layer_norm=True,
        ),  # fmt: skip
    ),
    "embedding LayerNorm, logits bias, scaled output": (
        "en-hi",
        dict(embed_layer_norm=True, final_logits_bias=True, scale_decoder_output=True, ffn_gated=True),
    ),
    "GPT-2-like: pre-LN LayerNorm, learned positions": (
        "llama-tiny",
        dict(norm="layernorm", positional="learned", ffn_gated=False, activation="gelu", linear_bias=True),
    ),
    "parallel layers": ("llama-tiny", dict(parallel_residual=True)),
    "Gemma-like sandwich norms": ("llama-tiny", dict(post_norm=True, rmsnorm_plus_one=True)),
    "OLMo 2-like post-norm only, QK-norm": ("llama-tiny", dict(post_norm=True, post_norm_only=True, qk_norm="full")),
    "mixture of experts": ("llama-tiny", dict(n_experts=4, experts_per_token=2)),
    "soft-capping and a sliding window": ("llama-tiny", dict(attn_softcap=20.0, final_softcap=30.0, sliding_window=3)),
}


@pytest.fixture(scope="module")
def bases():
    return {name: load_model(name) for name in ("en-hi", "llama-tiny")}


def random_variant(base: ModelBundle, changes: dict) -> tuple[ModelBundle, dict]:
    config = dataclasses.replace(base.config, **changes)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # biases and norm gains away from 0 and 1, so they matter
                p.add_(torch.randn_like(p) * 0.1)
    bundle = ModelBundle(model, base.src_tokenizer, base.tgt_tokenizer, "variant", "preset")
    gen, sets = torch.Generator().manual_seed(1), {}
    for step in ffn_steps(model):
        d = Dictionary(
            config.d_model, 48, "standard", info=DictionaryInfo(ffn_input(model, step), step, kind="transcoder")
        )
        d.reset_parameters(gen)
        with torch.no_grad():
            d.b_enc.fill_(-0.05)
            d.b_dec.normal_(0, 0.1, generator=gen)
        sets[step] = d
    return bundle, sets


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_graph_is_exact_for_every_layout(bases, variant):
    base, changes = VARIANTS[variant]
    bundle, sets = random_variant(bases[base], changes)
    text, target = ("the girl eats an apple", "लड़की सेब") if bundle.config.has_encoder else ("3 1 4 1 5", "")
    result = build_graph(bundle, bundle.prepare_run(text, target), sets)
    assert result.graph.logit_error < 1e-4
    assert_exact(result, every=11)
    if bundle.config.final_softcap:
        assert any("before the cap" in n for n in result.notes)
