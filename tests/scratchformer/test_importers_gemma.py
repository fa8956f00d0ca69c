"""Gemma decoders (Gemma, Gemma 2, Gemma 3 text): a small random model of each family, saved with save_pretrained
and opened through load_model(path), equals transformers' eager implementation on every hidden state, attention
map and logit of a right-padded batch; greedy decoding with the KV cache equals generate() past the sliding
window; every step explains and derives; departures name each of Gemma's; and what we do not implement is
refused in one sentence."""

import json

import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.transformer.departures import departures
from tests.scratchformer.modern_checks import (
    check_analyses,
    check_diagram_order,
    check_explains_and_derives,
    check_greedy_equals_generate,
    check_padded_batch,
    padded_batch,
    relative_diffs,
    save_and_reopen,
    sharpened_reference,
    transformers_pairs,
)

SENTENCES = ["machine learning using PyTorch is fun and quick", "Attention is all you need."]
ATOL = 1e-5
EOT = 50256
# hidden_size 48: √48 is not a whole number, so the rounded embedding scale is exercised; head_dim 16 ≠ 48 / 4
BASE = dict(vocab_size=50257, hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=64, bos_token_id=EOT, eos_token_id=EOT,
            pad_token_id=EOT)  # fmt: skip
# what each family is given on top of BASE, to exercise what it departs in (small caps, so that they bite)
FAMILIES = {
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"rope_parameters": {"rope_type": "default",
                                                                      "rope_theta": 1000.0}}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"sliding_window": 4, "query_pre_attn_scalar": 24,
                                                     "attn_logit_softcapping": 4.0, "final_logit_softcapping": 3.0}),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", {
        "sliding_window": 4, "query_pre_attn_scalar": 12, "final_logit_softcapping": 2.0,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}}),
}


def _spread(name: str) -> tuple[float, float]:
    """(mean, std) each parameter is drawn from: sharp attention maps."""
    if "q_norm" in name or "k_norm" in name:  # (1 + γ) sets |q| and |k|, hence how sharp the maps are
        return 3.0, 1.0
    if "norm" in name:  # Gemma stores γ as its offset from 1
        return 0.0, 0.2
    return (0.0, 0.5) if any(k in name for k in ("q_proj", "k_proj")) else (0.0, 0.15)


def _save(directory, family, seed=0, dtype=None, **overrides):
    ref, model_name = sharpened_reference(FAMILIES, BASE, family, _spread, seed, dtype, **overrides)
    return save_and_reopen(ref, directory, model_name)


@pytest.fixture(scope="module", params=list(FAMILIES))
def folder(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, directory, _save(directory, request.param)


def _batch(bundle, sentences):
    return padded_batch(bundle, sentences, EOT)


def test_every_family_matches_transformers_on_a_padded_batch(folder):
    family, directory, ref = folder
    check_padded_batch(load_model(str(directory)), ref, family, SENTENCES, EOT, ATOL)


def test_the_soft_caps_bite(folder):
    """The small caps of the test models change numbers, so the equality above tests them."""
    family, directory, _ = folder
    bundle = load_model(str(directory))
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch is fun"))
    c = bundle.config
    if c.attn_softcap:
        scaled, capped = (trace[f"decoder.0.self_attn.{s}"].tensor for s in ("scaled_scores", "capped_scores"))
        assert scaled.abs().max() > c.attn_softcap > capped.abs().max()
    if c.final_softcap:
        logits, capped = trace["generator.logits"].tensor, trace["generator.capped"].tensor
        assert logits.abs().max() > c.final_softcap > capped.abs().max()
        assert torch.allclose(trace["generator.probs"].tensor, capped.softmax(-1))


def test_greedy_decoding_with_the_cache_equals_generate(folder):
    _, directory, ref = folder
    check_greedy_equals_generate(load_model(str(directory)), ref, EOT)


def test_family_options_are_read_from_the_config(folder):
    family, directory, _ = folder
    c = load_model(str(directory)).config
    common = dict(scale_embedding=True, round_embed_scale=True, rmsnorm_plus_one=True, norm="rmsnorm",
                  activation="gelu_tanh", ffn_gated=True, tie_output=True, d_kv=16, n_kv_heads=2, linear_bias=False)
    expected = {
        "gemma": dict(post_norm=False, attn_scale_dim=None, attn_softcap=0.0, final_softcap=0.0, sliding_window=0,
                      qk_norm="none", rope_theta=1000.0, rope_local_theta=None),
        "gemma2": dict(post_norm=True, attn_scale_dim=24.0, attn_softcap=4.0, final_softcap=3.0, sliding_window=4,
                       sliding_layers=[0, 2], qk_norm="none"),
        "gemma3_text": dict(post_norm=True, attn_scale_dim=12.0, attn_softcap=0.0, final_softcap=2.0,
                            sliding_window=4, sliding_layers=[0, 1], qk_norm="head", rope_theta=10000.0,
                            rope_scaling="linear", rope_factor=2.0, rope_local_theta=10.0),
    }[family]
    options = {**common, **expected}
    assert {k: getattr(c, k) for k in options} == options


def test_departures_and_trace_name_each_of_gemmas(folder):
    family, directory, _ = folder
    bundle = load_model(str(directory))
    c = bundle.config
    listed = departures(c)
    phrases = ["(1 + γ)", "√d_model rounded", "gated feed-forward", "GELU (tanh approximation)", "rotary positions"]
    if c.post_norm:
        phrases += ["sandwich norms", "divided by √", "output logits soft-capped"]
    if c.attn_softcap:
        phrases.append("attention scores soft-capped")
    if c.rope_local_theta is not None:
        phrases.append("in the sliding-window layers")
    for phrase in phrases:
        assert any(phrase in d for d in listed), (family, phrase, listed)
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    names = trace.names()
    n = "decoder.0"
    if c.post_norm:  # norm → sublayer → post-norm → add, for both sublayers
        for k, sub in (("1", "self_attn"), ("3", "ffn")):
            post = trace[f"{n}.add_norm{k}.post_norm"]
            assert post.kind == "layer_norm" and post.formula.startswith("RMSNorm(") and "(1 + γ)" in post.formula
            assert names.index(f"{n}.{sub}.out") < post.index < names.index(f"{n}.add_norm{k}.residual")
    else:
        assert not any(".post_norm" in s for s in names)
    if c.attn_softcap:
        capped = trace[f"{n}.self_attn.capped_scores"]
        assert capped.kind == "softcap" and capped.index == names.index(f"{n}.self_attn.scaled_scores") + 1
        assert trace[f"{n}.self_attn.mask"].index == capped.index + 1
    else:
        assert not any(s.endswith("capped_scores") for s in names)
    assert (trace.find("generator.capped") is not None) == bool(c.final_softcap)
    assert trace["tgt_embed.scaled"].tensor.ne(trace["tgt_embed.lookup"].tensor).any()


def test_every_step_explains_and_derives(folder):
    """(1 + γ) norms, soft-caps and the local layers' rotation included."""
    family, directory, _ = folder
    check_explains_and_derives(load_model(str(directory)), family)


def test_the_diagram_walks_the_sandwich_in_order(folder):
    check_diagram_order(load_model(str(folder[1])))


def test_a_bfloat16_folder_opens_and_matches(tmp_path):
    ref = _save(tmp_path, "gemma2", seed=3, dtype=torch.bfloat16)
    bundle = load_model(str(tmp_path))
    ids, pad = _batch(bundle, SENTENCES)
    pairs, _ = transformers_pairs(bundle, ref, ids, pad)  # the same bfloat16 numbers, both computing in float32
    assert max(relative_diffs(pairs, pad).values()) < ATOL


def test_the_rounded_embedding_scale_matches_in_bfloat16():
    """Gemma multiplies by √d_model rounded to the weights' precision: in bfloat16, √48 = 6.93 becomes 6.94."""
    from scratchformer.transformer.config import TransformerConfig
    from scratchformer.transformer.embeddings import Embeddings

    config = TransformerConfig(d_model=48, n_heads=4, n_encoder_layers=0, n_decoder_layers=1, src_vocab_size=10,
                               tgt_vocab_size=10, round_embed_scale=True, positional="none", dropout=0.0)  # fmt: skip
    emb = Embeddings(config, 10, "tgt_pos", "tgt_embed").to(torch.bfloat16)
    ids = torch.arange(10)[None]
    rounded = emb.tokens(ids) * torch.tensor(48**0.5, dtype=torch.bfloat16)
    assert torch.equal(emb(ids), rounded)
    assert not torch.equal(rounded, emb.tokens(ids) * 48**0.5)


def test_what_is_not_implemented_is_refused_in_one_sentence(tmp_path):
    _save(tmp_path, "gemma3_text", num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"])
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    good = json.loads(path.read_text())
    config["rope_parameters"]["sliding_attention"] = {"rope_type": "yarn", "rope_theta": 10.0, "factor": 4.0,
                                                      "original_max_position_embeddings": 16}  # fmt: skip
    path.write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"sliding-window layers with rope_type 'yarn', which scratchformer does not "
                                        r"implement") as exc:
        load_model(str(tmp_path))
    assert str(exc.value).count(". ") == 0
    path.write_text(json.dumps({**good, "use_bidirectional_attention": True}))
    with pytest.raises(UserError, match="use_bidirectional_attention .* which scratchformer does not implement"):
        load_model(str(tmp_path))
    path.write_text(json.dumps({**good, "hidden_activation": "tanh"}))
    with pytest.raises(UserError, match="uses the activation 'tanh'"):
        load_model(str(tmp_path))


def test_options_without_what_they_need_are_refused():
    from scratchformer.transformer.config import TransformerConfig

    base = dict(n_encoder_layers=0, src_vocab_size=10, tgt_vocab_size=10)
    for bad, needs in ((dict(post_norm=True), "norm_first"), (dict(rmsnorm_plus_one=True), "norm = rmsnorm"),
                       (dict(attn_softcap=-1.0), "positive number"), (dict(rope_local_theta=10.0), "sliding_window"),
                       (dict(round_embed_scale=True, scale_embedding=False), "scale_embedding"),
                       (dict(attn_scale_dim=8.0, scale_attention=False), "scale_attention")):
        with pytest.raises(UserError, match=needs):
            TransformerConfig(**base, **bad)


def test_a_lazy_trace_recomputes_the_same_bits(folder):
    """Soft-capped maps and the capped logits, rerun when shown, are the pass's own numbers."""
    _, directory, _ = folder
    bundle = load_model(str(directory))
    ids, pad = _batch(bundle, SENTENCES)
    _, eager = bundle.model.run_with_trace(None, ids, None, pad, lazy=False)
    _, lazy = bundle.model.run_with_trace(None, ids, None, pad, lazy=True, keep_bytes=0)
    assert eager.names() == lazy.names()
    assert [s.name for s in eager if not torch.equal(s.tensor, lazy[s.name].tensor)] == []


def test_the_neuron_view_names_gemmas_divisor_and_cap(folder):
    from scratchformer.plotdata.neuron import AttentionPick, neuron_pair, neuron_summary

    _, directory, _ = folder
    bundle = load_model(str(directory))
    c = bundle.config
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    pair = neuron_pair(trace, AttentionPick("decoder.1.self_attn", 0, 1, 3), 2)
    text = neuron_summary(pair)
    scaled = trace["decoder.1.self_attn.scaled_scores"].tensor[0, 1, 3, 2].item()
    assert pair.scaled == pytest.approx(scaled, rel=1e-5)
    assert ("÷ √s" in text) == (c.attn_scale_dim is not None) and ("÷ √d_k" in text) == (c.attn_scale_dim is None)
    assert ("soft-capped" in text) == bool(c.attn_softcap)


def test_the_analyses_read_every_family(folder):
    family, directory = folder[0], folder[1]
    check_analyses(load_model(str(directory)), family, complete=False)

