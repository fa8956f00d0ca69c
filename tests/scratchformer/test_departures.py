"""departures(config): nothing for the paper's own models, one phrase per option that departs from it; and the
pre-LN option computes what torch.nn.Transformer(norm_first=True) computes, traced with the norm first."""

import dataclasses

import pytest
import torch
from torch import nn

from scratchformer.errors import UserError
from scratchformer.loading.bundle import bundled_models
from scratchformer.loading.importers import from_torch_transformer
from scratchformer.plotdata.blocks import architecture
from scratchformer.transformer.config import PAPER_PRESETS, TransformerConfig, preset
from scratchformer.transformer.departures import departures
from scratchformer.transformer.model import Transformer

SMALL = dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, src_vocab_size=20,
             tgt_vocab_size=20, max_len=16)  # fmt: skip


@pytest.mark.parametrize("name", PAPER_PRESETS)
def test_presets_are_the_paper(name):
    assert departures(preset(name)) == []


def test_the_llama_preset_names_what_it_departs_in():
    said = " ".join(departures(preset("llama-tiny-random")))
    for phrase in ("rotary positions", "grouped-query attention: 2 key/value heads shared by 4 query heads",
                   "RMSNorm", "gated feed-forward"):
        assert phrase in said


def test_bundled_models_are_the_paper():
    """Every bundled model is the paper's, except one trained from a departing preset (llama-tiny, from
    llama-tiny-random), which departs in what its preset departs in and nothing more."""
    models = bundled_models()
    assert models, "the bundled models are missing"
    for name, directory in models.items():
        config = TransformerConfig.load(directory / "config.json")
        built_as = config.extra.get("preset")
        assert departures(config) == (departures(preset(built_as)) if built_as else []), name
    assert departures(TransformerConfig.load(models["llama-tiny"] / "config.json"))  # a Llama, not the paper


@pytest.mark.parametrize(("options", "phrase"), [
    (dict(norm_first=True), "pre-LN: LayerNorm before each sublayer"),
    (dict(positional="learned"), "learned position embeddings instead of sinusoids"),
    (dict(positional="learned", position_offset=2), "learned position embeddings instead of sinusoids, counted from 2"),
    (dict(positional="sinusoidal_halves"), "sinusoids laid out as all sines, then all cosines"),
    (dict(positional="none"), "no positional encoding"),
    (dict(activation="gelu"), "GELU instead of ReLU"),
    (dict(activation="gelu_tanh"), "GELU (tanh approximation) instead of ReLU"),
    (dict(activation="silu"), "SiLU (swish) instead of ReLU"),
    (dict(embed_layer_norm=True), "LayerNorm on the embeddings"),
    (dict(type_vocab_size=2), "token-type (segment) embeddings"),
    (dict(final_layer_norm=True), "a final LayerNorm after the encoder and decoder stacks"),
    (dict(final_logits_bias=True), "a bias added to the output logits"),
    (dict(scale_embedding=False), "embeddings not scaled by √d_model"),
    (dict(tie_output=False), "an output layer of its own, not tied to the embeddings"),
    (dict(n_encoder_layers=0), "decoder-only: no encoder and no cross-attention"),
    (dict(n_decoder_layers=0), "encoder-only: no decoder and no output layer"),
])  # fmt: skip
def test_each_option_is_named(options, phrase):
    listed = departures(TransformerConfig(**{**SMALL, **options}))
    assert len(listed) == 1 and listed[0].startswith(phrase), listed


def test_gpt2_like_config_lists_its_departures_in_order():
    c = TransformerConfig(**{**SMALL, "n_encoder_layers": 0}, norm_first=True, final_layer_norm=True,
                          positional="learned", activation="gelu_tanh", scale_embedding=False)  # fmt: skip
    assert departures(c) == [
        "decoder-only: no encoder and no cross-attention",
        "learned position embeddings instead of sinusoids",
        "embeddings not scaled by √d_model",
        "pre-LN: LayerNorm before each sublayer, x + Sublayer(LayerNorm(x))",
        "GELU (tanh approximation) instead of ReLU in the feed-forward network",
        "a final LayerNorm after the decoder stack",
    ]


def test_new_options_are_validated():
    with pytest.raises(UserError, match="position_offset applies to learned position embeddings only"):
        TransformerConfig(**SMALL, position_offset=2)
    with pytest.raises(UserError, match="position_offset must be zero or a positive whole number"):
        TransformerConfig(**SMALL, positional="learned", position_offset=-1)
    with pytest.raises(UserError, match="norm_first must be true or false"):
        TransformerConfig(**SMALL, norm_first="yes")
    c = TransformerConfig(**SMALL, norm_first=True, positional="learned", position_offset=2)
    assert TransformerConfig.from_dict(c.to_dict()) == c


def test_pre_norm_equals_torch_nn_transformer_norm_first():
    """Pre-LN encoder-decoder with final norms = nn.Transformer(norm_first=True), padding on both sides."""
    torch.manual_seed(0)
    kw = dict(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=24, dropout=0.0,
              batch_first=True)  # fmt: skip
    ref = nn.Transformer(norm_first=True, **kw).eval()
    with torch.no_grad():  # LayerNorm weights away from 1 and 0, so a norm in the wrong place shows
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.5)
    post = nn.Transformer(norm_first=False, **kw)
    post.load_state_dict(ref.state_dict())  # the same tensors under the same names
    ours_post = from_torch_transformer(post, src_vocab_size=20, tgt_vocab_size=20, dropout=0.0)
    ours = Transformer(dataclasses.replace(ours_post.config, norm_first=True)).eval()
    ours.load_state_dict(ours_post.state_dict())

    gen = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(0, 20, (2, 7), generator=gen), torch.randint(0, 20, (2, 5), generator=gen)
    src_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    tgt_pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    causal = nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.bool)
    with torch.no_grad():
        x_src, x_tgt = ours.src_embed(src), ours.tgt_embed(tgt)
        expected = ref(x_src, x_tgt, tgt_mask=causal, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                       memory_key_padding_mask=src_pad)  # fmt: skip
        got = ours.decode(tgt, ours.encode(src, src_pad), src_pad, tgt_pad)
        _, trace = ours.run_with_trace(src, tgt, src_pad, tgt_pad)
    assert (got - expected).abs().max() < 1e-5
    assert (trace["decoder.final_norm.out"].tensor - got).abs().max() < 1e-5, "traced and fast paths must agree"
    assert (ours_post.decode(tgt, ours_post.encode(src, src_pad), src_pad, tgt_pad) - expected).abs().max() > 1e-2

    names = trace.names()
    layer = [n for n in names if n.startswith("decoder.0.") and not n.startswith(("decoder.0.self_attn.",
                                                                                   "decoder.0.cross_attn."))]
    assert layer == ["decoder.0.add_norm1.norm", "decoder.0.add_norm1.residual", "decoder.0.add_norm2.norm",
                     "decoder.0.add_norm2.residual", "decoder.0.add_norm3.norm", "decoder.0.ffn.hidden",
                     "decoder.0.ffn.out", "decoder.0.add_norm3.residual"]  # fmt: skip
    assert names.index("decoder.0.add_norm2.norm") < names.index("decoder.0.cross_attn.q_proj")
    keys = [b.key for b in architecture(ours.config) if b.key.startswith("encoder.0.")]
    assert keys == ["encoder.0.add_norm1.norm", "encoder.0.self_attn", "encoder.0.add_norm1",
                    "encoder.0.add_norm2.norm", "encoder.0.ffn", "encoder.0.add_norm2"]  # fmt: skip


def test_post_norm_trace_names_are_unchanged():
    _, trace = Transformer(TransformerConfig(**SMALL, dropout=0.0)).eval().run_with_trace(
        torch.tensor([[1, 2, 3]]), torch.tensor([[1, 4]]))
    layer = [n for n in trace.names() if n.startswith("encoder.0.add_norm")]
    assert layer == ["encoder.0.add_norm1.residual", "encoder.0.add_norm1.out", "encoder.0.add_norm2.residual",
                     "encoder.0.add_norm2.out"]  # fmt: skip


def test_post_norm_only_is_named_validated_and_off_for_the_paper():
    """OLMo 2's norms after the sublayers alone: its own departure, and refused without what it needs."""
    assert TransformerConfig().post_norm_only is False
    olmo = dict(norm_first=True, post_norm=True, post_norm_only=True, norm="rmsnorm")
    listed = departures(TransformerConfig(**SMALL, **olmo))
    assert any(d.startswith("post-norm only: an RMSNorm after each sublayer and none before it") for d in listed)
    assert not any(d.startswith(("sandwich", "pre-LN")) for d in listed), listed
    for bad in (dict(post_norm_only=True), dict(norm_first=True, post_norm_only=True),
                dict(**olmo, parallel_residual=True, n_encoder_layers=0), dict(**{**olmo, "post_norm_only": 1})):
        with pytest.raises(UserError, match="post_norm_only"):
            TransformerConfig(**{**SMALL, **bad})
