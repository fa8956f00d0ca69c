"""A parallel layer (GPT-NeoX's x + Attention(LN₁(x)) + FFN(LN₂(x))) with a mixture of experts in place of the
feed-forward, with sandwich norms (post_norm) around both sublayers, and with both (issue 42: the first raised a
bare TypeError, the second built post-norms it never applied). Each is checked against the layer written out by
hand in float64, traced, drawn in the order it runs, explained and derived, and saved and reopened with its
post-norm weights in use."""

from __future__ import annotations

import math
import re

import pytest
import torch

from scratchformer import TransformerConfig
from scratchformer.loading.model_bundle import ModelBundle
from scratchformer.transformer.layers import DecoderLayer
from scratchformer.transformer.model import Transformer
from tests.scratchformer.modern_checks import check_explains_and_derives

D, H, FF, EXPERTS, TOP = 16, 4, 24, 4, 2
VARIANTS = {"experts": dict(n_experts=EXPERTS, experts_per_token=TOP), "sandwich": dict(post_norm=True),
            "experts+sandwich": dict(n_experts=EXPERTS, experts_per_token=TOP, post_norm=True),
            "plain": {}}  # fmt: skip


def _config(**kw) -> TransformerConfig:
    sizes = dict(d_model=D, n_heads=H, d_ff=FF, n_encoder_layers=0, n_decoder_layers=2, dropout=0.0, max_len=32,
                 norm_first=True, final_layer_norm=True, parallel_residual=True, positional="learned",
                 share_embeddings=False, bos_id=50256, eos_id=50256)  # fmt: skip
    return TransformerConfig(**{**sizes, **kw})


def _randomised(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter redrawn, norms away from γ = 1, β = 0 (which would hide a norm left out), in float64."""
    torch.manual_seed(seed)
    module = module.double().eval()
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.normal_(1.0, 0.5) if "norm" in name and name.endswith("weight") else p.normal_(0.0, 0.4)
    return module


# ---------------------------------------------------------------- the layer written out by hand, in float64


def _layer_norm(x: torch.Tensor, norm) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def _attention(x: torch.Tensor, attn) -> torch.Tensor:
    """Causal multi-head self-attention: Q, K, V from the fused W^Q; W^K; W^V, softmax(QKᵀ/√d_k) V, then W^O."""
    b, t, d = x.shape
    dk = d // H
    q, k, v = (x @ attn.qkv.weight.T + attn.qkv.bias).split(d, dim=-1)
    heads = lambda m: m.reshape(b, t, H, dk).transpose(1, 2)  # noqa: E731
    scores = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(dk)  # (B, H, T, T)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    context = (weights @ heads(v)).transpose(1, 2).reshape(b, t, d)
    return context @ attn.out_proj.weight.T + attn.out_proj.bias


def _ffn(x: torch.Tensor, ffn) -> torch.Tensor:
    return torch.relu(x @ ffn.w_1.weight.T + ffn.w_1.bias) @ ffn.w_2.weight.T + ffn.w_2.bias


def _moe(x: torch.Tensor, moe) -> torch.Tensor:
    """Token by token: the router's softmax, its TOP experts renormalised, their outputs weighted and added."""
    out = torch.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            p = torch.softmax(x[b, t] @ moe.router.weight.T, dim=-1)
            top = p.topk(TOP)
            for w, e in zip(top.values / top.values.sum(), top.indices.tolist()):
                out[b, t] += w * _ffn(x[b, t], moe.experts[e])
    return out


def _by_hand(layer: DecoderLayer, x: torch.Tensor) -> torch.Tensor:
    """x + PostNorm₁(Attention(LN₁(x))) + PostNorm₂(FFN or MoE(LN₂(x))), each PostNorm only where the layer has it."""
    a = _attention(_layer_norm(x, layer.add_norm1.norm), layer.self_attn)
    inner = _layer_norm(x, layer.add_norm3.norm)
    f = _ffn(inner, layer.ffn) if layer.ffn is not None else _moe(inner, layer.moe)
    if layer.add_norm1.post_norm is not None:
        a, f = _layer_norm(a, layer.add_norm1.post_norm), _layer_norm(f, layer.add_norm3.post_norm)
    return x + a + f


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_parallel_layer_equals_the_hand_computation(variant):
    config = _config(**VARIANTS[variant])
    layer = _randomised(DecoderLayer(config, 0))
    assert (layer.moe is not None) == ("experts" in variant)
    assert (layer.add_norm3.post_norm is not None) == ("sandwich" in variant)
    torch.manual_seed(1)
    x = torch.randn(2, 7, D, dtype=torch.float64)
    with torch.no_grad():
        got = layer(x, None, None, None, is_causal=True)
        want = _by_hand(layer, x)
    # the router's softmax is taken in float32 whatever the weights' precision (moe.route): ~1e-7 of the weights
    tolerance = 1e-6 if "experts" in variant else 1e-12
    assert (got - want).abs().max().item() < tolerance * want.abs().max().item(), variant


def test_the_post_norms_of_a_parallel_layer_change_its_output():
    """The bug the issue found: post-norm weights built and never read. Doubling their γ must change the output."""
    layer = _randomised(DecoderLayer(_config(post_norm=True), 0))
    x = torch.randn(1, 5, D, dtype=torch.float64)
    with torch.no_grad():
        before = layer(x, None, None, None, is_causal=True)
        layer.add_norm1.post_norm.weight.mul_(2.0)
        after = layer(x, None, None, None, is_causal=True)
    assert (after - before).abs().max().item() > 1e-3


# ---------------------------------------------------------------- the whole model: traced, drawn, explained


def _bundle(variant: str) -> ModelBundle:
    from scratchformer.loading.tokenizers import gpt2_tokenizer

    tok = gpt2_tokenizer()
    # RMSNorm, as the sandwich models (Gemma 2 and 3) have: the explanations of a post-norm are written for it
    model = _randomised(Transformer(_config(norm="rmsnorm", **VARIANTS[variant])), seed=2).float()
    return ModelBundle(model, tok, tok, f"parallel-{variant}", "preset")


@pytest.mark.parametrize("variant", ["experts+sandwich", "experts", "sandwich"])
def test_a_parallel_model_traces_draws_explains_and_derives_every_step(variant):
    from scratchformer.plotdata.blocks import architecture, block_key

    bundle = _bundle(variant)
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    names = {s.name for s in trace}
    for i in range(2):
        assert (f"decoder.{i}.moe.out" in names) == ("experts" in variant)
        assert (f"decoder.{i}.add_norm1.post_norm" in names) == ("sandwich" in variant)
        assert (f"decoder.{i}.add_norm3.post_norm" in names) == ("sandwich" in variant)
    formula = trace["decoder.1.add_norm3.residual"].formula
    assert ("PostNorm₁(" in formula) == ("sandwich" in variant) and ("MoE(" in formula) == ("experts" in variant)
    firsts = list(dict.fromkeys(block_key(s) for s in trace))
    assert firsts == [b.key for b in architecture(bundle.config)], "the trace walks the diagram's blocks in order"
    check_explains_and_derives(bundle, variant, cells=lambda step: 1)


def test_a_folder_with_parallel_post_norms_reopens_and_uses_them(tmp_path):
    """Saved and opened again (load_model of the folder), the model gives the same logits, and they depend on the
    stored post-norm weights."""
    from scratchformer.loading.bundle import load_model
    from scratchformer.loading.checkpoint import save_checkpoint

    bundle = _bundle("experts+sandwich")
    save_checkpoint(tmp_path / "m", bundle.model, bundle.src_tokenizer, bundle.tgt_tokenizer)
    reopened = load_model(str(tmp_path / "m"))
    assert reopened.config.parallel_residual and reopened.config.post_norm and reopened.config.n_experts == EXPERTS
    inputs = bundle.prepare("machine learning")
    want, _ = bundle.run(inputs)
    got, _ = reopened.run(inputs)
    assert torch.allclose(got, want, atol=1e-6)
    with torch.no_grad():
        reopened.model.decoder[0].add_norm3.post_norm.weight.zero_()
    changed, _ = reopened.run(inputs)
    assert not torch.allclose(changed, want, atol=1e-3)


@pytest.mark.parametrize("variant", ["plain", "experts"])
def test_a_parallel_residual_is_explained_from_the_layers_input(variant):
    # x is what the layer read (the step before its first norm), not the attention's output traced in between
    from scratchformer.explain import explain_step
    from tests.scratchformer.test_explain import NUMBER, number

    bundle = _bundle(variant)
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch"))
    step = trace["decoder.1.add_norm3.residual"]
    x = trace[trace.index_of("decoder.1.add_norm1.norm") - 1].tensor[0, 0, 0].item()
    r = step.tensor[0, 0, 0].item()
    ex = explain_step(trace, step, bundle.config)
    assert "Parallel attention and feed-forward" in ex.what
    found = re.search(rf"x = {NUMBER} plus both sublayers' outputs, {NUMBER} together, gives {NUMBER}", ex.numbers)
    assert found, ex.numbers
    assert number(found.group(1)) == pytest.approx(x, rel=6e-3, abs=1e-6)
    assert number(found.group(2)) == pytest.approx(r - x, rel=6e-3, abs=1e-6)
    assert number(found.group(3)) == pytest.approx(r, rel=6e-3, abs=1e-6)
