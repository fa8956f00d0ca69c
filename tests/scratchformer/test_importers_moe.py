"""Mixtures of experts (Mixtral, Qwen3-MoE): a small random model of each family (4 experts, 2 per token), saved
with save_pretrained and opened through load_model(path), equals transformers' eager implementation on every
hidden state, attention map and logit of a right-padded batch, and its router chooses the same experts; greedy
decoding with the KV cache equals generate(); the weighted sum of the chosen experts is checked by hand; every
step explains and derives; the lazy trace gives the eager trace's numbers."""

import re

import pytest
import torch

from scratchformer.loading.bundle import load_model
from scratchformer.transformer.departures import departures
from tests.scratchformer.modern_checks import (
    check_analyses,
    check_explains_and_derives,
    check_greedy_equals_generate,
    check_padded_batch,
    save_and_reopen,
    sharpened_reference,
)
from tests.scratchformer.test_importers_llama import EOT, SENTENCES, _batch

ATOL = 1e-5
BASE = dict(vocab_size=50257, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, bos_token_id=EOT, eos_token_id=EOT,
            num_experts_per_tok=2)  # fmt: skip
FAMILIES = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"num_local_experts": 4, "sliding_window": 5}),
    # layer 1 dense (mlp_only_layers), experts narrower than it, chosen probabilities not renormalised
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", {
        "num_experts": 4, "moe_intermediate_size": 40, "norm_topk_prob": False, "num_hidden_layers": 3,
        "mlp_only_layers": [1], "head_dim": 24}),
    "qwen3_moe-renormalised": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", {
        "num_experts": 4, "moe_intermediate_size": 40, "norm_topk_prob": True}),
}  # fmt: skip


def _spread(name: str) -> tuple[float, float]:
    """(mean, std) each parameter is drawn from: sharp attention maps and router rows."""
    if "q_norm" in name or "k_norm" in name:
        return 4.0, 1.0
    if "norm" in name:
        return 1.0, 0.2
    return (0.0, 0.5) if any(k in name for k in ("q_proj", "k_proj", "gate.weight")) else (0.0, 0.15)


def _save(directory, family, seed=0, **overrides):
    ref, model_name = sharpened_reference(FAMILIES, BASE, family, _spread, seed, **overrides)
    return save_and_reopen(ref, directory, model_name)


@pytest.fixture(scope="module", params=list(FAMILIES))
def folder(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, directory, _save(directory, request.param)


def _moe_layers(config):
    return [i for i in range(config.n_decoder_layers) if config.has_experts(i)]


def test_every_family_matches_transformers_and_routes_alike(folder):
    family, directory, ref = folder
    bundle = load_model(str(directory))
    ids, pad, trace = check_padded_batch(bundle, ref, family, SENTENCES, EOT, ATOL)
    with torch.no_grad():
        theirs = ref(input_ids=ids, attention_mask=(~pad).long(), output_router_logits=True).router_logits
    layers = _moe_layers(bundle.config)
    assert len(theirs) == len(layers) > 0
    k = bundle.config.experts_per_token
    for i, logits in zip(layers, theirs, strict=True):
        logits = logits.view(*ids.shape, -1)[~pad]  # (real tokens, E)
        ours = trace[f"decoder.{i}.moe.router_logits"].tensor[~pad]
        assert (ours - logits).abs().max() < ATOL * (1 + logits.abs().max())
        chosen = trace[f"decoder.{i}.moe.chosen_weights"].tensor[~pad]  # (real tokens, E): w or 0
        expected = logits.softmax(-1).topk(k, dim=-1).indices.sort(-1).values
        assert torch.equal((chosen > 0).nonzero()[:, 1].view(-1, k), expected), f"layer {i} routes differently"
        used = (chosen > 0).sum(0)
        assert (used > 0).sum() >= 3, f"layer {i}: the router sends every token to the same experts ({used})"


def test_greedy_decoding_with_the_cache_equals_generate(folder):
    _, directory, ref = folder
    check_greedy_equals_generate(load_model(str(directory)), ref, EOT)


def test_family_options_are_read_from_the_config(tmp_path_factory):
    expected = {
        "mixtral": dict(n_experts=4, experts_per_token=2, moe_renormalize=True, d_expert=None, moe_layers=None,
                        sliding_window=5, qk_norm="none", d_ff=96),
        "qwen3_moe": dict(n_experts=4, experts_per_token=2, moe_renormalize=False, d_expert=40, moe_layers=[0, 2],
                          qk_norm="head", d_ff=96),
        "qwen3_moe-renormalised": dict(moe_renormalize=True, moe_layers=None),
    }
    for family, options in expected.items():
        directory = tmp_path_factory.mktemp(f"{family}-config")
        _save(directory, family)
        config = load_model(str(directory)).config
        assert {k: getattr(config, k) for k in options} == options, family
        assert config.extra["architecture"] == family.split("-")[0]


def test_the_weighted_sum_of_the_chosen_experts_by_hand(folder):
    """Token by token: the router's top two, their weights (renormalised or not), each expert run on its own
    from its matrices, and the sum — against the trace's steps and the sublayer's output."""
    family, directory, _ = folder
    bundle = load_model(str(directory))
    c = bundle.config
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    i = _moe_layers(c)[0]
    n = f"decoder.{i}.moe"
    moe = bundle.model.decoder[i].moe
    x = trace[f"decoder.{i}.add_norm3.norm"].tensor[0].double()  # (T, d_model): what the sublayer read
    f64 = lambda name: moe.get_parameter(name).detach().double()  # noqa: E731
    p = torch.softmax(x @ f64("router.weight").T, -1)  # (T, E)
    torch.testing.assert_close(trace[f"{n}.router_weights"].tensor[0].double(), p, rtol=1e-5, atol=1e-6)
    for t in range(x.shape[0]):
        top = sorted(range(c.n_experts), key=lambda e: -p[t, e].item())[:2]
        w = [p[t, e].item() for e in top]
        if c.moe_renormalize:
            w = [v / sum(w) for v in w]
        total = torch.zeros(c.d_model, dtype=torch.float64)
        for j, (e, w_e) in enumerate(zip(top, w, strict=True)):
            g = lambda m: f64(f"experts.{e}.{m}.weight")  # noqa: E731, B023
            y = (torch.nn.functional.silu(g("w_1") @ x[t]) * (g("w_v") @ x[t])) @ g("w_2").T  # FFN_e(x_t)
            scale = float(y.abs().max())  # float32 sums over d_expert: near-zero entries keep float32's error
            torch.testing.assert_close(trace[f"{n}.choice_{j + 1}"].tensor[0, t].double(), y, rtol=1e-5,
                                       atol=1e-6 * max(scale, 1.0))  # fmt: skip
            assert trace[f"{n}.chosen_weights"].tensor[0, t, e].item() == pytest.approx(w_e, rel=1e-5)
            total += w_e * y
        assert (trace[f"{n}.chosen_weights"].tensor[0, t] > 0).sum() == 2  # the other experts get nothing
        torch.testing.assert_close(trace[f"{n}.out"].tensor[0, t].double(), total, rtol=1e-5,
                                   atol=1e-6 * max(float(total.abs().max()), 1.0))
        if not c.moe_renormalize:
            assert sum(w) < 1  # Qwen3-MoE without norm_topk_prob: the chosen weights keep their probabilities


def test_the_trace_names_the_router_and_the_choices(folder):
    family, directory, _ = folder
    bundle = load_model(str(directory))
    c = bundle.config
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    for i in range(c.n_decoder_layers):
        names = [s.name for s in trace if s.sublayer == f"decoder.{i}.moe"]
        if not c.has_experts(i):
            assert not names and trace.find(f"decoder.{i}.ffn.out") is not None  # a dense layer
            continue
        n = f"decoder.{i}.moe"
        assert names == [f"{n}.router_logits", f"{n}.router_weights", f"{n}.chosen_weights", f"{n}.choice_1",
                         f"{n}.choice_2", f"{n}.out"]  # fmt: skip
        for what in ("router_logits", "router_weights", "chosen_weights"):
            step = trace[f"{n}.{what}"]
            assert (step.kind, step.dims) == ("router", ("batch", "tgt_pos", "expert"))
        assert {trace[f"{n}.{s}"].kind for s in ("choice_1", "choice_2", "out")} == {"ffn_out"}
        sums = trace[f"{n}.router_weights"].tensor.sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums))
    listed = departures(c)
    assert any("mixture of experts" in d and f"2 of {c.n_experts}" in d for d in listed), listed
    if c.moe_layers is not None:
        assert any("mixture of experts in layers 1 and 3" in d for d in listed), listed


def test_every_step_explains_and_derives(folder):
    """The router, each choice and the weighted sum included (more cells of those)."""
    family, directory, _ = folder
    check_explains_and_derives(load_model(str(directory)), family, lambda step: 6 if "moe" in step.name else 2)


def test_the_router_explanation_says_where_a_token_goes(folder):
    from scratchformer.explain import explain_step

    _, directory, _ = folder
    bundle = load_model(str(directory))
    _, trace = bundle.run(bundle.prepare("machine learning"))
    n = f"decoder.{_moe_layers(bundle.config)[0]}.moe"
    text = explain_step(trace, trace[f"{n}.chosen_weights"], bundle.config).numbers
    assert re.search(r"'.+?' goes to experts \d and \d with weights [\d.]+ and [\d.]+", text), text
    sum_text = explain_step(trace, trace[f"{n}.out"], bundle.config)
    assert "weighted sum" in sum_text.what and sum_text.complete


def test_the_lazy_trace_gives_the_eager_numbers(folder):
    """The router's maps and the choices are recomputed from the sublayer's input when asked, bit for bit."""
    _, directory, _ = folder
    model = load_model(str(directory)).model
    ids, pad = _batch(load_model(str(directory)), SENTENCES)
    _, lazy = model.run_with_trace(None, ids, None, pad, keep_bytes=0)
    _, eager = model.run_with_trace(None, ids, None, pad, lazy=False)
    moe = [s for s in lazy if ".moe." in s.name]
    assert moe and all(not s.stored for s in moe if not s.name.endswith(".out"))
    for step in moe:
        assert torch.equal(step.tensor, eager[step.name].tensor), step.name
        assert torch.equal(step.item(1), eager[step.name].tensor[1]), step.name


def test_the_analyses_read_every_family(folder):
    family, directory = folder[0], folder[1]
    check_analyses(load_model(str(directory)), family, complete=False)



def test_a_folder_with_the_experts_stacked_in_one_tensor_gives_the_same_numbers(folder, tmp_path):
    """transformers holds the experts stacked — experts.gate_up_proj (E, 2·d_expert, d_model), the gate rows
    first, and experts.down_proj (E, d_model, d_expert) — and a folder can store them so. Written from the
    reference model's own state_dict, such a folder opens to transformers' numbers and to the per-expert folder's
    logits: a gate and up half taken the wrong way round, or a transposed stack, would not."""
    import shutil

    from safetensors import safe_open
    from safetensors.torch import save_file

    family, directory, ref = folder
    stacked = tmp_path / "stacked"
    stacked.mkdir()
    for f in directory.iterdir():
        if not f.name.startswith("model") or not f.name.endswith((".safetensors", ".json")):
            shutil.copy(f, stacked / f.name)  # config, generation config and tokenizer
    save_file({k: v.detach().clone().contiguous() for k, v in ref.state_dict().items()},
              str(stacked / "model.safetensors"), metadata={"format": "pt"})  # fmt: skip
    with safe_open(str(stacked / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        layouts = {k: tuple(f.get_slice(k).get_shape()) for k in keys if "experts" in k}
    bundle = load_model(str(stacked))
    c = bundle.config
    d, f_e = c.d_model, c.d_expert or c.d_ff
    assert not any(re.search(r"experts\.\d+\.", k) for k in keys)  # no per-expert matrix in the file
    for i in _moe_layers(c):
        assert layouts[f"model.layers.{i}.mlp.experts.gate_up_proj"] == (c.n_experts, 2 * f_e, d)
        assert layouts[f"model.layers.{i}.mlp.experts.down_proj"] == (c.n_experts, d, f_e)
    assert f_e != d  # a transposed stack cannot pass for the right one by its shape alone

    ids, pad, _ = check_padded_batch(bundle, ref, family, SENTENCES, EOT, ATOL)
    per_expert = load_model(str(directory))
    with torch.no_grad():
        ours = bundle.model(None, ids, None, pad)
        theirs = per_expert.model(None, ids, None, pad)
        hf = ref(input_ids=ids, attention_mask=(~pad).long()).logits
    real = ~pad
    assert (ours[real] - theirs[real]).abs().max() <= 1e-5
    assert (ours[real] - hf[real]).abs().max() <= 1e-5 * (1 + hf[real].abs().max())
    # and each expert's matrices are transformers' own: the gate rows (first half) are W_1, the up rows V
    first = _moe_layers(c)[0]
    gate_up = ref.state_dict()[f"model.layers.{first}.mlp.experts.gate_up_proj"]
    down = ref.state_dict()[f"model.layers.{first}.mlp.experts.down_proj"]
    for e, expert in enumerate(bundle.model.decoder[first].moe.experts):
        assert torch.equal(expert.w_1.weight, gate_up[e, :f_e]) and torch.equal(expert.w_v.weight, gate_up[e, f_e:])
        assert torch.equal(expert.w_2.weight, down[e])
