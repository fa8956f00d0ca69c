"""The fused-kernel path (`fast_attention`, and MultiHeadAttention when nothing is traced) as a caller meets it:
its defaults, the device it works on, and multi-head attention against torch.nn.MultiheadAttention with the same
weights. Expected values come from softmax(QKᵀ/√d_k + B + M)V written out in float64 here, or from torch.nn."""

from __future__ import annotations

import math

import torch
from torch import nn

from scratchformer.transformer.attention import MultiHeadAttention, fast_attention
from scratchformer.transformer.masks import causal_mask


def _formula(q, k, v, mask=None, scale=True, bias=None):
    """softmax(QKᵀ/√d_k + B + M)V in float64; a query with no key it may see gets zeros."""
    q, k, v = q.double(), k.double(), v.double()
    s = torch.einsum("bhic,bhjc->bhij", q, k)
    s = s / math.sqrt(q.shape[-1]) if scale else s
    s = s + bias.double() if bias is not None else s
    allowed = torch.ones(s.shape, dtype=torch.bool) if mask is None else mask[:, None].expand(s.shape)
    e = torch.where(allowed, torch.exp(s - s.amax(-1, keepdim=True)), torch.zeros(()))
    w = e / e.sum(-1, keepdim=True).clamp(min=1e-300)
    return torch.einsum("bhij,bhjc->bhic", w, v).float()


def _qkv(b=2, h=2, tq=3, tk=3, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, tq, d, generator=g), torch.randn(b, h, tk, d, generator=g), torch.randn(b, h, tk, d,
                                                                                                      generator=g)


def test_by_default_the_mask_is_read_and_scores_are_divided_by_root_d_k():
    q, k, v = _qkv()
    # a padding mask (not causal): the second sentence's last key is padding, every query may see the keys after it
    padding = torch.tensor([[True, True, True], [True, True, False]])[:, None].expand(2, 3, 3)
    assert torch.allclose(fast_attention(q, k, v, padding), _formula(q, k, v, padding), atol=1e-5)
    assert torch.allclose(fast_attention(q, k, v, None), _formula(q, k, v), atol=1e-5)
    assert not torch.allclose(_formula(q, k, v), _formula(q, k, v, scale=False), atol=1e-3)  # the test can tell
    # "exactly causal" without a bias still honours scale=False (no ÷√d_k)
    causal = causal_mask(3)[None].expand(2, 3, 3)
    assert torch.allclose(fast_attention(q, k, v, None, True, False), _formula(q, k, v, causal, False), atol=1e-5)


def test_the_causal_shortcut_with_a_bias_builds_its_mask_on_the_tensors_device():
    # T5's decoder on a GPU: the causal mask the bias path builds must be where q is ("meta" stands in for a GPU,
    # and a mask made on the CPU cannot be combined with it)
    q, k, v = (t.to("meta") for t in _qkv())
    bias = torch.zeros(2, 3, 3, device="meta")
    out = fast_attention(q, k, v, None, True, False, bias)
    assert out.device.type == "meta" and out.shape == (2, 2, 3, 4)


def test_fused_multi_head_attention_equals_torch_nn_multihead_attention():
    torch.manual_seed(4)
    d, h = 8, 2
    ours = MultiHeadAttention(d, h, False, "tgt_pos", "tgt_pos", "decoder.0.self_attn").eval()
    ref = nn.MultiheadAttention(d, h, batch_first=True).eval()
    with torch.no_grad():  # the fused [W^Q W^K W^V] is laid out like torch.nn's in_proj_weight
        ref.in_proj_weight.copy_(ours.qkv.weight)
        ref.in_proj_bias.copy_(ours.qkv.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(2, 4, d)
    pad = torch.tensor([[False, False, False, False], [False, False, False, True]])  # torch.nn: True = ignore
    causal = causal_mask(4)
    mask = causal[None] & ~pad[:, None]  # ours: True = may attend
    with torch.no_grad():
        expected, _ = ref(x, x, x, key_padding_mask=pad, attn_mask=~causal)
        assert torch.allclose(ours(x, mask=mask), expected, atol=1e-5)
        expected, _ = ref(x, x, x, attn_mask=~causal)
        assert torch.allclose(ours(x, mask=causal[None], is_causal=True), expected, atol=1e-5)
        expected, _ = ref(x, x, x)
        assert torch.allclose(ours(x), expected, atol=1e-5)


def _hand(mha, x, position_bias, allowed):
    """Q, K, V from W^Q, W^K, W^V sliced by hand, then the formula per head: (B, h, T, d_k)."""
    d, h = mha.d_attn, mha.n_heads
    w = mha.qkv.weight
    b = mha.qkv.bias if mha.qkv.bias is not None else torch.zeros(3 * d)
    q, k, v = (x @ w[i * d:(i + 1) * d].T + b[i * d:(i + 1) * d] for i in range(3))
    heads = [torch.stack([t[..., j * mha.d_head:(j + 1) * mha.d_head] for j in range(h)], 1) for t in (q, k, v)]
    return _formula(*heads, allowed, mha.scale, position_bias)


def _output(mha, context):  # Concat(head_1, …, head_h) W^O (+ b)
    concat = torch.cat([context[:, j] for j in range(context.shape[1])], dim=-1)
    return concat @ mha.out_proj.weight.T + (mha.out_proj.bias if mha.out_proj.bias is not None else 0)


def test_t5_attention_adds_its_position_bias_on_the_fused_path_too():
    torch.manual_seed(5)
    d, h, d_head = 4, 2, 3
    mha = MultiHeadAttention(d, h, False, "tgt_pos", "tgt_pos", "decoder.0.self_attn", d_head=d_head, bias=False,
                             scale=False).eval()  # fmt: skip
    x, bias = torch.randn(1, 4, d), torch.randn(h, 4, 4)
    causal = causal_mask(4)[None]
    with torch.no_grad():
        expected = _output(mha, _hand(mha, x, bias, causal))
        assert torch.allclose(mha(x, mask=causal, position_bias=bias), expected, atol=1e-5)
        assert torch.allclose(mha(x, mask=causal, is_causal=True, position_bias=bias), expected, atol=1e-5)
        cache, rows = {}, []
        for t in range(4):  # one query at a time, the bias row of its position
            rows.append(mha(x[:, t:t + 1], mask=causal_mask(1, offset=t)[None], cache=cache,
                            position_bias=bias[:, t:t + 1, :t + 1]))  # fmt: skip
    assert torch.allclose(torch.cat(rows, 1), expected, atol=1e-5)
    # without biases the projections have weights only: the parameters a T5 checkpoint fills
    cross = MultiHeadAttention(d, h, True, "tgt_pos", "src_pos", "decoder.0.cross_attn", d_head=d_head, bias=False)
    assert sorted(cross.state_dict()) == ["kv_proj.weight", "out_proj.weight", "q_proj.weight"]
    assert sorted(mha.state_dict()) == ["out_proj.weight", "qkv.weight"]


def test_head_and_key_interventions_apply_when_nothing_is_traced():
    from scratchformer.patching.interventions import HeadChange, Interventions, KeyKnockout
    from scratchformer.recording.intervention_context import applying

    torch.manual_seed(6)
    d, h, n = 8, 2, "decoder.0.self_attn"
    mha = MultiHeadAttention(d, h, False, "tgt_pos", "tgt_pos", n).eval()
    x, bias = torch.randn(1, 4, d), torch.randn(h, 4, 4)
    causal = causal_mask(4)[None]
    # key 1 knocked out in every head, head 1 replaced by the mean of its rows 0 … t (a causal mean)
    allowed = causal.clone()
    allowed[..., 1] = False
    with torch.no_grad():
        context = _hand(mha, x, bias, allowed)
        running = context[:, 1].cumsum(1) / torch.arange(1, 5, dtype=torch.float32)[:, None]
        context = torch.stack([context[:, 0], running], 1)
        expected = _output(mha, context)
        changes = Interventions([KeyKnockout(n, (1,)), HeadChange(n, 1, "mean")])
        with applying(changes):
            whole = mha(x, mask=causal, is_causal=True, position_bias=bias)
            cache, rows = {}, []
            for t in range(4):
                rows.append(mha(x[:, t:t + 1], mask=causal_mask(1, offset=t)[None], cache=cache,
                                position_bias=bias[:, t:t + 1, :t + 1]))  # fmt: skip
        untouched = mha(x, mask=causal, position_bias=bias)
    assert torch.allclose(whole, expected, atol=1e-5)
    assert torch.allclose(torch.cat(rows, 1), expected, atol=1e-5)
    assert not torch.allclose(untouched, expected, atol=1e-3)  # the changes do change the output
