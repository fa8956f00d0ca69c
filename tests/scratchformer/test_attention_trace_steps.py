"""What a traced multi-head attention shows people, step by step: each step's name, kind, axes, title and formula
(the paper's §3.2.1 and §3.2.2 notation, and T5's departures), and each step's numbers, worked out here from
W^Q, W^K, W^V and W^O sliced by hand and softmax written out (exp over the allowed keys ÷ their sum)."""

from __future__ import annotations

import math

import torch

from scratchformer.recording.trace import tracing
from scratchformer.transformer.attention import MultiHeadAttention, RelativePositionBias
from scratchformer.transformer.masks import causal_mask


def _trace(mha, x, memory=None, mask=None, position_bias=None, cache=None, lazy=False):
    with tracing(lazy=lazy, keep_bytes=0 if lazy else 256 * 1024) as tracer, torch.no_grad():
        out = mha(x, memory, mask, cache, position_bias=position_bias)
    return out, {s.name: s for s in tracer.steps}


def _heads(x, h):  # (B, T, h·d) → (B, h, T, d), one head's columns at a time
    d = x.shape[-1] // h
    return torch.stack([x[..., i * d:(i + 1) * d] for i in range(h)], dim=1)


def _expected(mha, x, keys_from, mask, position_bias=None):
    """Every intermediate, from the weights sliced by hand: {step: tensor}."""
    d, h = mha.d_attn, mha.n_heads
    lin = (lambda t, w, b: t @ w.T + (b if b is not None else 0))  # noqa: E731
    with torch.no_grad():
        if mha.cross:
            wkv, bkv = mha.kv_proj.weight, mha.kv_proj.bias
            q = lin(x, mha.q_proj.weight, mha.q_proj.bias)
            k = lin(keys_from, wkv[:d], None if bkv is None else bkv[:d])
            v = lin(keys_from, wkv[d:], None if bkv is None else bkv[d:])
        else:
            w, b = mha.qkv.weight, mha.qkv.bias
            q, k, v = (lin(x, w[i * d:(i + 1) * d], None if b is None else b[i * d:(i + 1) * d]) for i in range(3))
        qh, kh, vh = _heads(q, h), _heads(k, h), _heads(v, h)
        scores = torch.einsum("bhic,bhjc->bhij", qh, kh)
        scaled = scores / math.sqrt(mha.d_head) if mha.scale else scores
        biased = scaled + position_bias if position_bias is not None else scaled
        b_, tq, tk = scores.shape[0], scores.shape[2], scores.shape[3]
        allowed = torch.ones(b_, tq, tk, dtype=torch.bool) if mask is None else mask.expand(b_, tq, tk)
        m = torch.zeros(b_, tq, tk).masked_fill(~allowed, -math.inf)
        masked = biased + m[:, None]
        e = torch.exp(masked - masked.amax(-1, keepdim=True).clamp(min=-1e30))  # 0 where blocked
        weights = torch.nan_to_num(e / e.sum(-1, keepdim=True))  # a row with no key: 0, not NaN
        context = torch.einsum("bhij,bhjc->bhic", weights, vh)
        concat = torch.cat([context[:, i] for i in range(h)], dim=-1)
        out = lin(concat, mha.out_proj.weight, mha.out_proj.bias)
    return {"q": qh, "k": kh, "v": vh, "scores": scores, "scaled_scores": scaled, "mask": m,
            "masked_scores": masked, "weights": weights, "context": context, "concat": concat, "out": out}  # fmt: skip


def _check_values(steps, name, expected):
    for part, value in expected.items():
        got = steps[f"{name}.{part}"].tensor
        assert got.shape == value.shape, part
        assert torch.allclose(got, value, atol=1e-5), part  # −∞ == −∞ for the masked cells


def _texts(steps, name):
    return {s.removeprefix(name + "."): (st.kind, st.dims, st.title, st.formula, st.major, st.sublayer)
            for s, st in steps.items()}  # fmt: skip


def test_self_attention_steps_of_the_paper():
    torch.manual_seed(0)
    d, h, n = 8, 2, "decoder.0.self_attn"
    mha = MultiHeadAttention(d, h, False, "tgt_pos", "tgt_pos", n).eval()
    x = torch.randn(2, 3, d)
    mask = causal_mask(3)[None].expand(2, 3, 3).clone()
    mask[1, :, 2] = False  # the second sentence's last token is padding
    out, steps = _trace(mha, x, mask=mask)
    texts = _texts(steps, n)
    heads, att = ("batch", "head", "tgt_pos", "d_head"), ("batch", "head", "tgt_pos", "tgt_pos")
    assert texts == {
        "qkv": ("qkv", ("batch", "tgt_pos", "d_qkv"), "Fused Q, K, V projection", "[Q K V] = X [W^Q W^K W^V] + b",
                False, n),
        "q": ("heads", heads, "Queries split into 2 heads", "Q → h=2 heads of d_k=4", False, n),
        "k": ("heads", heads, "Keys split into 2 heads", "K → h=2 heads of d_k=4", False, n),
        "v": ("heads", heads, "Values split into 2 heads", "V → h=2 heads of d_v=4", False, n),
        "scores": ("scores", att, "Dot products QKᵀ", "S = Q Kᵀ", False, n),
        "scaled_scores": ("scaled_scores", att, "Scaled by √d_k", "S / √d_k  (√4 = 2.000)", False, n),
        "mask": ("mask", ("batch", "tgt_pos", "tgt_pos"), "Mask (0 = allowed, −∞ = blocked)", "M", False, n),
        "masked_scores": ("masked_scores", att, "Mask added", "S / √d_k + M", False, n),
        "weights": ("attention_weights", att, "Attention weights (softmax)", "A = softmax(QKᵀ/√d_k + M)", True, n),
        "context": ("context", heads, "Weighted sum of values", "head_i = A_i V_i", False, n),
        "concat": ("concat", ("batch", "tgt_pos", "d_model"), "Heads concatenated", "Concat(head_1, …, head_h)",
                   False, n),
        "out": ("projection", ("batch", "tgt_pos", "d_model"), "Output projection",
                "MultiHead = Concat(head_1, …, head_h) W^O", True, n),
    }  # fmt: skip
    assert list(texts)[:5] == ["qkv", "q", "k", "v", "scores"] and list(texts)[-3:] == ["context", "concat", "out"]
    expected = _expected(mha, x, x, mask)
    _check_values(steps, n, expected)
    assert torch.allclose(steps[f"{n}.qkv"].tensor, x @ mha.qkv.weight.T + mha.qkv.bias, atol=1e-6)
    assert torch.allclose(out, expected["out"], atol=1e-5)


def test_cross_attention_steps_name_the_decoder_and_the_encoder():
    torch.manual_seed(1)
    d, h, n = 6, 3, "decoder.1.cross_attn"
    mha = MultiHeadAttention(d, h, True, "tgt_pos", "src_pos", n).eval()
    x, memory = torch.randn(1, 2, d), torch.randn(1, 4, d)
    mask = torch.tensor([[[True, True, True, False]] * 2])  # the source's last token is padding
    out, steps = _trace(mha, x, memory, mask)
    texts = _texts(steps, n)
    assert list(texts)[:3] == ["q_proj", "kv_proj", "q"] and "qkv" not in texts
    assert texts["q_proj"] == ("qkv", ("batch", "tgt_pos", "d_model"), "Queries from the decoder", "Q = X_dec W^Q",
                               False, n)  # fmt: skip
    assert texts["kv_proj"] == ("qkv", ("batch", "src_pos", "d_kv"), "Keys and values from the encoder output",
                                "[K V] = X_enc [W^K W^V]", False, n)  # fmt: skip
    assert texts["q"][1:4] == (("batch", "head", "tgt_pos", "d_head"), "Queries split into 3 heads",
                               "Q → h=3 heads of d_k=2")  # fmt: skip
    assert texts["k"][1:4] == (("batch", "head", "src_pos", "d_head"), "Keys split into 3 heads",
                               "K → h=3 heads of d_k=2")  # fmt: skip
    assert texts["v"][1:4] == (("batch", "head", "src_pos", "d_head"), "Values split into 3 heads",
                               "V → h=3 heads of d_v=2")  # fmt: skip
    assert texts["scaled_scores"][3] == "S / √d_k  (√2 = 1.414)"
    assert texts["weights"][1] == ("batch", "head", "tgt_pos", "src_pos")
    assert texts["mask"][1] == ("batch", "tgt_pos", "src_pos")
    with torch.no_grad():
        assert torch.allclose(steps[f"{n}.q_proj"].tensor, x @ mha.q_proj.weight.T + mha.q_proj.bias, atol=1e-6)
        assert torch.allclose(steps[f"{n}.kv_proj"].tensor, memory @ mha.kv_proj.weight.T + mha.kv_proj.bias,
                              atol=1e-6)  # fmt: skip
    expected = _expected(mha, x, memory, mask)
    _check_values(steps, n, expected)
    assert torch.allclose(out, expected["out"], atol=1e-5)
    # decoding one token at a time: the encoder's K and V are projected once, so later steps show no kv_proj
    cache = {}
    _, first = _trace(mha, x[:, :1], memory, mask[:, :1], cache=cache)
    _, second = _trace(mha, x[:, 1:], memory, mask[:, 1:], cache=cache)
    assert f"{n}.kv_proj" in first and f"{n}.kv_proj" not in second and f"{n}.q_proj" in second
    assert torch.allclose(second[f"{n}.out"].tensor, expected["out"][:, 1:], atol=1e-5)
    assert torch.allclose(second[f"{n}.k"].tensor, expected["k"], atol=1e-5)


def test_t5_attention_steps_name_its_departures():
    torch.manual_seed(2)
    d, h, d_head, n = 4, 2, 3, "encoder.0.self_attn"  # h·d_head = 6 ≠ d_model
    table = RelativePositionBias(h, num_buckets=4, max_distance=8, bidirectional=True)
    with torch.no_grad():
        table.weight.copy_(torch.randn(4, h))
    mha = MultiHeadAttention(d, h, False, "src_pos", "src_pos", n, d_head=d_head, bias=False, scale=False,
                             relative_bias=table).eval()  # fmt: skip
    x = torch.randn(1, 3, d)
    bias = table(3, 3)
    out, steps = _trace(mha, x, position_bias=bias)
    texts = _texts(steps, n)
    att = ("batch", "head", "src_pos", "src_pos")
    assert texts["qkv"][3] == "[Q K V] = X [W^Q W^K W^V]"  # no biases
    assert texts["q"][2:4] == ("Queries split into 2 heads", "Q → h=2 heads of d_k=3")
    assert texts["scaled_scores"] == ("scaled_scores", att, "Not scaled (no ÷√d_k)",
                                      "S  — no scaling (T5 folds it into the initialisation)", False, n)  # fmt: skip
    assert texts["position_bias"] == ("position_bias", ("head", "src_pos", "src_pos"),
                                      "Relative position bias (computed here for the whole stack)",
                                      "B[h, i, j] = b_h[bucket(j − i)]  (4 bidirectional buckets, distances ≥ 8 "
                                      "share the last)", False, n)  # fmt: skip
    assert list(texts).index("position_bias") == list(texts).index("scaled_scores") + 1
    causal = RelativePositionBias(h, num_buckets=32, max_distance=128, bidirectional=False)  # a decoder's table
    assert causal.describe() == "32 causal buckets, distances ≥ 128 share the last"
    assert texts["masked_scores"][2:4] == ("Relative position bias and mask added", "S + B + M")
    assert texts["weights"][3] == "A = softmax(QKᵀ + B + M)"
    assert texts["concat"][1] == ("batch", "src_pos", "d_attn")  # h·d_k, not d_model
    assert texts["out"][1] == ("batch", "src_pos", "d_model")
    assert torch.equal(steps[f"{n}.position_bias"].tensor, bias)
    assert (steps[f"{n}.mask"].tensor == 0).all()  # no mask: nothing blocked
    expected = _expected(mha, x, x, None, bias)
    _check_values(steps, n, expected)
    assert torch.allclose(out, expected["out"], atol=1e-5)
    # a later layer of the stack reuses the first layer's map
    later = MultiHeadAttention(d, h, False, "src_pos", "src_pos", "encoder.1.self_attn", d_head=d_head, bias=False,
                               scale=False).eval()  # fmt: skip
    _, steps = _trace(later, x, position_bias=bias)
    shared = steps["encoder.1.self_attn.position_bias"]
    assert (shared.title, shared.formula) == ("Relative position bias (shared, from layer 1)",
                                              "B[h, i, j] = b_h[bucket(j − i)]  (the first layer's map, reused)")
    # decoding one token at a time from the KV cache, the step still shows the bias row of its position
    decoder = MultiHeadAttention(d, h, False, "tgt_pos", "tgt_pos", "d", d_head=d_head, bias=False, scale=False)
    cache = {}
    _trace(decoder.eval(), x[:, :1], mask=causal_mask(1)[None], position_bias=bias[:, :1, :1], cache=cache)
    _, steps = _trace(decoder, x[:, 1:2], mask=causal_mask(1, offset=1)[None], position_bias=bias[:, 1:2, :2],
                      cache=cache)  # fmt: skip
    assert torch.equal(steps["d.position_bias"].tensor, bias[:, 1:2, :2])
    assert steps["d.weights"].formula == "A = softmax(QKᵀ + B + M)"
    # with the scaling on and a bias: "S / √d_k + B"
    scaled = MultiHeadAttention(d, h, False, "src_pos", "src_pos", "e", d_head=d_head).eval()
    _, steps = _trace(scaled, x, position_bias=bias)
    assert steps["e.masked_scores"].formula == "S / √d_k + B + M"
    assert steps["e.weights"].formula == "A = softmax(QKᵀ/√d_k + B + M)"


def test_a_lazy_trace_recomputes_each_step_from_the_kept_inputs():
    torch.manual_seed(3)
    d, h, n = 8, 2, "encoder.0.self_attn"
    mha = MultiHeadAttention(d, h, False, "src_pos", "src_pos", n).eval()
    x = torch.randn(2, 3, d)
    mask = torch.tensor([[True, True, True], [True, True, False]])[:, None].expand(2, 3, 3)
    for bias in (torch.randn(h, 3, 3), None):  # with T5's position bias and without
        out, steps = _trace(mha, x, mask=mask, position_bias=bias, lazy=True)
        assert steps[f"{n}.weights"].data is None  # not held: recomputed on demand
        expected = _expected(mha, x, x, mask, bias)
        _check_values(steps, n, expected)
        assert torch.allclose(out, expected["out"], atol=1e-5)


def test_a_lazy_trace_keeps_the_inputs_it_reruns_from_and_redoes_the_interventions():
    from scratchformer.patching.interventions import HeadChange, Interventions
    from scratchformer.recording.intervention_context import applying
    from scratchformer.recording.trace import Trace

    torch.manual_seed(4)
    d, h, n = 8, 2, "encoder.0.self_attn"
    mha = MultiHeadAttention(d, h, False, "src_pos", "src_pos", n).eval()
    x = torch.randn(2, 3, d)
    mask = torch.ones(2, 3, 3, dtype=torch.bool)
    mask[1, :, 2] = False
    with tracing(lazy=True, keep_bytes=0) as tracer, torch.no_grad(), applying(Interventions([HeadChange(n, 0)])):
        out = mha(x, mask=mask)
    held = {s.name.removeprefix(n + ".") for s in tracer.steps if s.data is not None}
    assert held == {"out"}  # everything else is recomputed on demand
    # what the trace holds: the output (2·3·8 floats) and the rerun's inputs x (2·3·8 floats) and the mask (18 bools)
    assert Trace(steps=tracer.steps).stored_bytes() == 2 * 3 * 8 * 4 + 2 * 3 * 8 * 4 + 18
    # the rerun, after the pass has ended, zeroes head 1 again as the pass did (HeadChange(…, 0) = "zero")
    steps = {s.name.removeprefix(n + "."): s for s in tracer.steps}
    expected = _expected(mha, x, x, mask)
    assert (steps["context"].tensor[:, 0] == 0).all()
    assert torch.allclose(steps["context"].tensor[:, 1], expected["context"][:, 1], atol=1e-5)
    assert torch.allclose(steps["out"].tensor, out, atol=1e-6)
    assert not torch.allclose(out, expected["out"], atol=1e-3)  # the zeroed head did change the output
