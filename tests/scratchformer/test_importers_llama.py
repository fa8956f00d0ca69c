"""Llama-style decoders (Llama, Mistral, Qwen2, Qwen3, Phi-3), OLMo 2 and GPT-NeoX (Pythia): a small random model
of each family, saved with save_pretrained and opened through load_model(path), equals transformers' eager
implementation on every hidden state, attention map and logit of a right-padded batch; greedy decoding with the KV
cache equals generate(); a bfloat16, sharded folder opens; and what we do not implement is refused in one
sentence."""

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
BASE = dict(vocab_size=50257, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, bos_token_id=EOT, eos_token_id=EOT)  # fmt: skip
# what each family is given on top of BASE, to exercise what it departs in
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-llama3-rope": ("LlamaConfig", "LlamaForCausalLM", {"rope_parameters": {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}, "tie_word_embeddings": True}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 4}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"num_hidden_layers": 3, "use_sliding_window": True,
                                                  "sliding_window": 3, "max_window_layers": 1}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 24, "num_key_value_heads": 1}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"sliding_window": 5, "pad_token_id": EOT}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"rope_parameters": {
        "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}}),
    "gpt_neox-sequential": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"use_parallel_residual": False}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {"pad_token_id": EOT, "attention_bias": True}),
}


def _spread(name: str) -> tuple[float, float]:
    """(mean, std) each parameter is drawn from: sharp attention maps."""
    if "q_norm" in name or "k_norm" in name:  # QK-norm fixes |q| and |k|: its γ sets how sharp maps are
        return 4.0, 1.0
    if "norm" in name and name.endswith("weight"):
        return 1.0, 0.2
    if "bias" in name:
        return 0.0, 0.3
    return (0.0, 0.5) if any(k in name for k in ("q_proj", "k_proj", "qkv_proj", "query_key_value")) else (0.0, 0.15)


def _save(directory, family, seed=0, dtype=None, shard=None, **overrides):
    ref, model_name = sharpened_reference(FAMILIES, BASE, family, _spread, seed, dtype, **overrides)
    return save_and_reopen(ref, directory, model_name, shard)


@pytest.fixture(scope="module", params=list(FAMILIES))
def folder(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, directory, _save(directory, request.param)


def _batch(bundle, sentences):
    return padded_batch(bundle, sentences, EOT)


def test_every_family_matches_transformers_on_a_padded_batch(folder):
    family, directory, ref = folder
    check_padded_batch(load_model(str(directory)), ref, family, SENTENCES, EOT, ATOL)


def test_greedy_decoding_with_the_cache_equals_generate(folder):
    _, directory, ref = folder
    check_greedy_equals_generate(load_model(str(directory)), ref, EOT)


def test_the_trace_names_rotation_grouped_heads_and_the_gate(folder):
    family, directory, _ = folder
    bundle = load_model(str(directory))
    c = bundle.config
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    names = trace.names()
    n = "decoder.0.self_attn"
    q, k = names.index(f"{n}.q"), names.index(f"{n}.k")
    normed = c.qk_norm != "none"
    assert names[q + 1 : q + 2 + normed] == ([f"{n}.q_normed"] if normed else []) + [f"{n}.q_rotated"]
    assert names[k + 1 : k + 2 + normed] == ([f"{n}.k_normed"] if normed else []) + [f"{n}.k_rotated"]
    rotated = trace[f"{n}.q_rotated"]
    assert (rotated.kind, rotated.dims) == ("rotary", ("batch", "head", "tgt_pos", "d_head"))
    shared = c.kv_heads < c.n_heads
    assert trace[f"{n}.k_rotated"].dims == ("batch", "kv_head" if shared else "head", "tgt_pos", "d_head")
    assert trace[f"{n}.k"].tensor.shape[1] == c.kv_heads and c.n_heads == trace[f"{n}.weights"].tensor.shape[1]
    listed = departures(c)
    phrases = ["rotary positions (RoPE)"]
    if family == "gpt_neox-sequential":  # use_parallel_residual false: two pre-norm sublayers, one after the other
        order = [names.index(f"decoder.1.{s}") for s in ("add_norm1.norm", "self_attn.out", "add_norm1.residual",
                                                           "add_norm3.norm", "ffn.out", "add_norm3.residual")]
        assert order == sorted(order) and not c.parallel_residual
        phrases += ["pre-LN: LayerNorm before each sublayer"]
    elif family == "gpt_neox":  # Pythia: LayerNorm, GELU, parallel sublayers, a quarter of each head turning
        order = [names.index(f"decoder.1.{s}") for s in ("add_norm1.norm", "self_attn.out", "add_norm3.norm",
                                                           "ffn.out", "add_norm3.residual")]  # fmt: skip
        assert order == sorted(order) and "decoder.1.add_norm1.residual" not in names
        phrases += ["on 4 of each head's 16 dimensions", "attention and feed-forward side by side"]
    elif family == "olmo2":  # each sublayer reads x itself, then its output is normalised before the add
        for k, sub in (("1", "self_attn"), ("3", "ffn")):
            post = trace[f"decoder.1.add_norm{k}.post_norm"]
            assert post.kind == "layer_norm" and post.formula.startswith("RMSNorm(Sublayer(x))")
            assert names.index(f"decoder.1.{sub}.out") < post.index < names.index(f"decoder.1.add_norm{k}.residual")
            assert f"decoder.1.add_norm{k}.norm" not in names
        norms = [bundle.model.get_submodule(f"{n}.{w}_norm").weight.shape for w in "qk"]
        assert norms == [(c.d_attn,), (c.kv_heads * c.d_head,)]  # one γ over all heads' numbers, then split
        phrases += ["post-norm only", "key/value head", "gated feed-forward"]
    else:
        assert trace["decoder.0.ffn.gate"].kind == "ffn_gate" and trace["decoder.0.ffn.linear"].kind == "ffn_gate"
        assert shared
        phrases += ["key/value head", "RMSNorm", "gated feed-forward"]
    for phrase in phrases:
        assert any(phrase in d for d in listed), (family, phrase, listed)
    assert not trace["tgt_embed.positional_encoding"].tensor.any()  # nothing added at the bottom


def test_family_options_are_read_from_the_config(tmp_path_factory):
    """What each family departs in lands in its TransformerConfig option (the numbers above depend on them)."""
    expected = {
        "llama": dict(qkv_bias=None, qk_norm="none", sliding_window=0, rope_scaling="none", tie_output=False),
        "llama-llama3-rope": dict(rope_scaling="llama3", rope_factor=8.0, rope_theta=500000.0, tie_output=True),
        "mistral": dict(sliding_window=4, sliding_layers=None),
        "qwen2": dict(qkv_bias=True, linear_bias=False, sliding_window=3, sliding_layers=[1, 2]),
        "qwen3": dict(qk_norm="head", d_kv=24, n_kv_heads=1),
        "phi3": dict(sliding_window=5, sliding_layers=None, ffn_gated=True, qk_norm="none"),
        "gpt_neox": dict(parallel_residual=True, rotary_fraction=0.25, norm="layernorm", linear_bias=True,
                         ffn_gated=False, activation="gelu", tie_output=False),
        "gpt_neox-sequential": dict(parallel_residual=False, norm_first=True, norm="layernorm", linear_bias=True),
        "olmo2": dict(qk_norm="full", post_norm=True, post_norm_only=True, norm_first=True, norm="rmsnorm",
                      rmsnorm_plus_one=False, linear_bias=True, ffn_bias=False, ffn_gated=True, activation="silu",
                      tie_output=False, final_layer_norm=True, sliding_window=0, rope_scaling="none"),
    }
    for family, options in expected.items():
        directory = tmp_path_factory.mktemp(f"{family}-config")
        _save(directory, family, num_hidden_layers=FAMILIES[family][2].get("num_hidden_layers", 1))
        config = load_model(str(directory)).config
        assert {k: getattr(config, k) for k in options} == options, family


def test_a_bfloat16_sharded_folder_opens_and_matches(tmp_path):
    ref = _save(tmp_path, "llama", seed=3, dtype=torch.bfloat16, shard="200KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    bundle = load_model(str(tmp_path))
    ids, pad = _batch(bundle, SENTENCES)
    pairs, _ = transformers_pairs(bundle, ref, ids, pad)  # the same bfloat16 numbers, both computing in float32
    assert max(relative_diffs(pairs, pad).values()) < ATOL


def test_what_is_not_implemented_is_refused_in_one_sentence(tmp_path):
    _save(tmp_path, "llama", num_hidden_layers=1)
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                 "original_max_position_embeddings": 16}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="rope_type 'yarn', which scratchformer does not implement"):
        load_model(str(tmp_path))
    config["model_type"] = "mamba"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"is a 'mamba' model; scratchformer can open .*llama.*qwen3"):
        load_model(str(tmp_path))



@pytest.mark.parametrize(("family", "change", "refusal"), [
    ("phi3", {"rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 8,
                                  "long_factor": [2.0] * 8, "original_max_position_embeddings": 16}},
     "rope_type 'longrope', which scratchformer does not implement"),
    ("qwen2", {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}},
     "rope_type 'dynamic', which scratchformer does not implement"),
    ("llama", {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
     "sets partial_rotary_factor 0.5, but this family's attention turns every dimension"),
    ("olmo2", {"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                   "original_max_position_embeddings": 16}},
     "rope_type 'yarn', which scratchformer does not implement"),
])  # fmt: skip
def test_each_family_refuses_a_rotation_it_cannot_reproduce(tmp_path, family, change, refusal):
    _save(tmp_path, family, num_hidden_layers=1)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(UserError, match=refusal) as exc:
        load_model(str(tmp_path))
    message = str(exc.value)
    assert "\n" not in message and message.count(". ") == 0 and message.endswith("."), message


def test_a_phi3_that_turns_part_of_each_head_matches(tmp_path):
    """Phi-3's attention honours partial_rotary_factor (Phi-4-mini turns 3/4 of each head): so do we."""
    ref = _save(tmp_path, "phi3", rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                   "partial_rotary_factor": 0.5})  # fmt: skip
    bundle = load_model(str(tmp_path))
    assert bundle.config.rotary_fraction == 0.5 and bundle.config.d_rotary == 8
    ids, pad = _batch(bundle, SENTENCES)
    pairs, _ = transformers_pairs(bundle, ref, ids, pad)
    assert max(relative_diffs(pairs, pad).values()) < ATOL


def test_bias_options_a_family_ignores_are_ignored_as_transformers_does(tmp_path):
    """Mistral's attention and Qwen3's feed-forward have no biases whatever attention_bias / mlp_bias say, and a
    Llama with both has them everywhere: the numbers still equal transformers'."""
    both = {"attention_bias": True, "mlp_bias": True}
    # family → (attention biases, feed-forward biases) as transformers builds them
    for family, biases in (("mistral", (False, False)), ("qwen3", (True, False)), ("llama", (True, True))):
        directory = tmp_path / family
        ref = _save(directory, family, num_hidden_layers=1, **both)
        bundle = load_model(str(directory))
        assert (bundle.config.linear_bias, bundle.config.ffn_bias) == biases, family
        ids, pad = _batch(bundle, SENTENCES)
        pairs, _ = transformers_pairs(bundle, ref, ids, pad)
        assert max(relative_diffs(pairs, pad).values()) < ATOL, family

def test_every_step_explains_and_derives(folder):
    """Rotations, shared heads and windows included."""
    family, directory, _ = folder
    check_explains_and_derives(load_model(str(directory)), family)


def test_the_diagram_says_positions_are_in_attention(folder):
    check_diagram_order(load_model(str(folder[1])))


def test_the_analyses_read_every_family(folder):
    family, directory, _ = folder
    check_analyses(load_model(str(directory)), family, complete=family != "qwen3")


def test_a_model_too_big_for_memory_is_refused_before_its_weights_are_read(tmp_path, monkeypatch):
    import scratchformer.loading.importers.weights as weights

    _save(tmp_path, "llama", num_hidden_layers=1, dtype=torch.bfloat16)
    read = []
    monkeypatch.setattr(weights, "read_weights", lambda d: read.append(d))  # must not be reached
    monkeypatch.setattr(weights, "available_memory", lambda: 2 * 2**20)  # 2 MB free
    with pytest.raises(UserError, match=r"needs about 37 MB of memory to open \(6\.5 million parameters in "
                                        r"float32, plus 12 MB of narrower weights while they are widened\) and "
                                        r"this machine has 2 MB free; close other programs"):  # fmt: skip
        load_model(str(tmp_path))
    assert read == []


def test_a_model_opens_without_a_random_initialisation_and_keeps_its_tied_weights(tmp_path, monkeypatch):
    """Built on the meta device and given the file's tensors: nothing is initialised at random first, nothing is
    left on the meta device, and the tied output layer is the embedding table itself."""
    from scratchformer.transformer.model import Transformer

    _save(tmp_path, "llama-llama3-rope", num_hidden_layers=1)
    monkeypatch.setattr(Transformer, "reset_parameters", lambda self: None if next(self.parameters()).is_meta
                        else pytest.fail("a loaded model was initialised at random"))  # fmt: skip
    bundle = load_model(str(tmp_path))
    model = bundle.model
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])
    assert model.generator.proj.weight is model.tgt_embed.tokens.weight
    assert torch.equal(model.rotary.inv_freq, model.rotary.frequencies())


def test_a_bfloat16_folder_opens_in_its_own_precision_when_asked(tmp_path):
    """--precision stored: the weights stay bfloat16 (half the memory) and the walkthrough runs on them; the
    prediction agrees with the float32 run where float32's first choice clearly leads."""
    from scratchformer.cli import main

    ref = _save(tmp_path, "qwen3", dtype=torch.bfloat16)
    narrow = load_model(str(tmp_path), precision="stored")
    wide = load_model(str(tmp_path))
    assert {p.dtype for p in narrow.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in wide.model.parameters()} == {torch.float32}
    inputs = narrow.prepare("machine learning using PyTorch is fun")
    got, trace = narrow.run(inputs)
    want, _ = wide.run(inputs)
    top2 = want.topk(2, dim=-1).values
    sure = top2[..., 0] - top2[..., 1] > 0.5  # positions where float32's first choice leads by half a logit
    assert sure.any() and torch.equal(got.float().argmax(-1)[sure], want.argmax(-1)[sure])
    assert trace["decoder.0.self_attn.q_rotated"].tensor.dtype == torch.bfloat16
    with torch.no_grad():  # the same as transformers' bfloat16 model, to bfloat16's precision
        theirs = ref.to(torch.bfloat16)(input_ids=inputs.tgt).logits.float()
    assert (got.float() - theirs).abs().max() < 0.25 * theirs.abs().max()
    assert main(["trace", "--model", str(tmp_path), "--precision", "stored", "--source", "machine learning",
                 "--start-only", "--json"]) == 0


def test_a_shared_key_head_is_drawn_one_head_at_a_time(folder):
    """The keys and values of grouped-query attention (dims batch, kv_head, tgt_pos, d_head) show as one key/value
    head's positions × d_head map, like a query head's, and a clicked cell maps back to its full index."""
    from scratchformer.plotdata.cells import cell_index, map_cell
    from scratchformer.plotdata.heatmap import matrix_of, step_heatmap

    family, directory, _ = folder
    bundle = load_model(str(directory))
    _, trace = bundle.run(bundle.prepare("machine learning"))
    k = trace["decoder.0.self_attn.k_rotated"]
    last = k.n_heads - 1
    values, rows, cols = matrix_of(k, 0, last)
    assert (rows, cols) == ("tgt_pos", "d_head") and values.shape == tuple(k.shape[2:])
    assert torch.equal(torch.from_numpy(values), k.tensor[0, last])
    index = cell_index(k, 0, last, 1, 2)
    assert index == (0, last, 1, 2) and map_cell(k, index) == (0, last, (1, 2))
    what = "key/value head" if k.head_dim == "kv_head" else "head"
    assert f"{what} {last + 1}" in step_heatmap(trace, k.name, 0, last).subtitle, family


# Llama 3 scaling whose three bands each hold frequencies (head_dim 16, θ 500: wavelengths 2π·500^(i/8) = 6.3,
# 13.7, 29.7, 64.6, 140, 305, 664, 1445 positions). The band limits are original / high = 16 and original / low
# = 85.3 positions: two wavelengths are kept, two blended, four slowed. low_freq_factor ≠ 1, so the blend's offset
# counts.
THREE_BANDS = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.5,
               "high_freq_factor": 8.0, "original_max_position_embeddings": 128}  # fmt: skip


def _llama3_by_hand(p: dict, d_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ω before scaling, ω after) in float64, from Meta's description of Llama 3.1's scaling: a wavelength
    λ = 2π/ω above original / low_freq_factor is slowed by the factor, one below original / high_freq_factor is
    kept, and between them ω' = (1 − s)·ω/factor + s·ω with s = (original/λ − low) / (high − low)."""
    omega = p["rope_theta"] ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    original, low, high, factor = (p[k] for k in ("original_max_position_embeddings", "low_freq_factor",
                                                  "high_freq_factor", "factor"))  # fmt: skip
    out = []
    for w in omega.tolist():
        wavelength = 2 * torch.pi / w
        if wavelength < original / high:
            out.append(w)
        elif wavelength > original / low:
            out.append(w / factor)
        else:
            s = (original / wavelength - low) / (high - low)
            out.append((1 - s) * w / factor + s * w)
    return omega, torch.tensor(out, dtype=torch.float64)


def test_llama3_scaling_with_frequencies_in_all_three_bands_matches_transformers(tmp_path):
    """Every frequency of a Llama 3 scaling whose config reaches its kept, blended and slowed bands equals
    transformers' ROPE_INIT_FUNCTIONS["llama3"] and a float64 computation by hand; the traced rotated queries equal
    transformers' own rotation of the same queries, and the model's numbers equal transformers' eager Llama."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from scratchformer.transformer.rotary import inverse_frequencies

    ref = _save(tmp_path, "llama", num_hidden_layers=1, max_position_embeddings=256, rope_parameters=THREE_BANDS)
    bundle = load_model(str(tmp_path))
    c = bundle.config
    assert (c.rope_scaling, c.rope_original_max_len, c.d_head) == ("llama3", 128, 16)
    omega, by_hand = _llama3_by_hand(THREE_BANDS, c.d_head)
    wavelength = 2 * torch.pi / omega
    kept, slowed = wavelength < 128 / 8.0, wavelength > 128 / 1.5
    blended = ~kept & ~slowed
    assert [int(b.sum()) for b in (kept, blended, slowed)] == [2, 2, 4]  # each band holds frequencies
    assert torch.equal(by_hand[kept], omega[kept])
    assert torch.allclose(by_hand[slowed], omega[slowed] / 8.0)
    middle = by_hand[blended] / omega[blended]  # strictly between 1/factor and 1
    assert ((middle > 1 / 8.0 + 0.05) & (middle < 0.95)).all(), middle

    ours = inverse_frequencies(c)
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](ref.config, "cpu")
    assert ours.shape == theirs.shape == by_hand.shape
    assert torch.allclose(ours.double(), theirs.double(), rtol=1e-6, atol=0)
    assert torch.allclose(ours.double(), by_hand, rtol=1e-6, atol=0)
    assert torch.equal(bundle.model.rotary.inv_freq, ours)

    # the traced rotation: the trace's queries before rotation, turned by transformers' own cos/sin and formula
    ids, pad = _batch(bundle, SENTENCES)
    pairs, trace = transformers_pairs(bundle, ref, ids, pad)
    assert max(relative_diffs(pairs, pad).values()) < ATOL
    n = "decoder.0.self_attn"
    q, k = trace[f"{n}.q"].tensor, trace[f"{n}.k"].tensor  # (B, h, T, d_head), (B, h_kv, T, d_head)
    positions = torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1)  # (B, T)
    with torch.no_grad():
        cos, sin = ref.model.rotary_emb(q, positions)
        q_theirs, k_theirs = apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.allclose(trace[f"{n}.q_rotated"].tensor, q_theirs, rtol=1e-5, atol=1e-5)
    assert torch.allclose(trace[f"{n}.k_rotated"].tensor, k_theirs, rtol=1e-5, atol=1e-5)
    # the slow band turns visibly differently from the unscaled rotation at these positions, so the checks bite
    angles = (ids.shape[1] - 1) * omega
    assert (angles[slowed] * (1 - 1 / 8.0)).max() > 0.3
