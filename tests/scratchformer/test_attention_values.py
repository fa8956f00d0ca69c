"""Attention's numbers against hand computations on tiny tensors: softmax(QKᵀ/√d_k + B + M)V cell by cell, the
fused kernel path equal to the written-out one in every case it takes, multi-head attention against its formula
with W^Q, W^K, W^V, W^O sliced by hand, the KV cache step by step, and T5's buckets against transformers'."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.models.t5.modeling_t5 import T5Attention

from scratchformer.transformer.attention import (
    MultiHeadAttention,
    RelativePositionBias,
    attention,
    fast_attention,
    relative_position_bucket,
)
from scratchformer.transformer.masks import causal_mask


def by_hand(q, k, v, mask, scale=True, bias=None):
    """softmax over each query row's allowed keys, with plain Python sums; a row with no key gives zeros."""
    b_, h_, tq, d = q.shape
    tk = k.shape[2]
    out = torch.zeros(b_, h_, tq, v.shape[-1], dtype=torch.float64)
    weights = torch.zeros(b_, h_, tq, tk, dtype=torch.float64)
    for b in range(b_):
        for h in range(h_):
            for i in range(tq):
                s = [float(sum(q[b, h, i, c] * k[b, h, j, c] for c in range(d))) for j in range(tk)]
                s = [x / math.sqrt(d) if scale else x for x in s]
                s = [x + float(bias[h, i, j]) if bias is not None else x for j, x in enumerate(s)]
                allowed = [j for j in range(tk) if mask is None or bool(mask[b, i, j])]
                if not allowed:
                    continue
                top = max(s[j] for j in allowed)
                e = {j: math.exp(s[j] - top) for j in allowed}
                z = sum(e.values())
                for j in allowed:
                    weights[b, h, i, j] = e[j] / z
                    out[b, h, i] += weights[b, h, i, j] * v[b, h, j].double()
    return out.float(), weights.float()


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 3, 4, generator=g) for _ in range(3))  # (B, h, T, d_k)
    return q, k, v


MASK = torch.tensor([[[1, 0, 0], [1, 1, 0], [1, 1, 1]], [[1, 1, 0], [0, 0, 0], [0, 1, 1]]], dtype=torch.bool)


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("mask", [None, MASK], ids=["no mask", "mask with an empty row"])
def test_attention_is_the_formula_cell_by_cell(qkv, scale, with_bias, mask):
    q, k, v = qkv
    bias = torch.arange(18, dtype=torch.float32).reshape(2, 3, 3) / 10 if with_bias else None
    context, maps = attention(q, k, v, mask, scale, bias)
    expected, weights = by_hand(q, k, v, mask, scale, bias)
    assert torch.allclose(maps["weights"], weights, atol=1e-6)
    assert torch.allclose(context, expected, atol=1e-6)
    assert torch.allclose(maps["scores"], q @ k.transpose(-2, -1), atol=1e-6)
    assert torch.allclose(maps["scaled_scores"], maps["scores"] / (2.0 if scale else 1.0), atol=1e-6)  # √4 = 2
    if mask is not None:
        assert maps["masked_scores"][1, :, 1].isinf().all()  # the row with no key: −∞ kept, weights 0
        assert (maps["weights"][1, :, 1] == 0).all()
        assert not maps["weights"].isnan().any()
    # the fused kernel gives the same numbers (no mask, a mask, and "exactly causal")
    assert torch.allclose(fast_attention(q, k, v, mask, False, scale, bias), expected, atol=1e-5)


@pytest.mark.parametrize("with_bias", [False, True])
def test_the_fused_kernels_causal_shortcut_equals_the_causal_mask(qkv, with_bias):
    q, k, v = qkv
    bias = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(1)) if with_bias else None
    causal = causal_mask(3)[None].expand(2, 3, 3)
    expected, _ = by_hand(q, k, v, causal, True, bias)
    assert torch.allclose(fast_attention(q, k, v, None, True, True, bias), expected, atol=1e-5)
    # (is_causal is only passed with no cache offset: Decoder.forward's pure_causal)


def _heads(x, h):  # (B, T, h·d) → (B, h, T, d), by hand
    b, t, d = x.shape
    return torch.stack([x[:, :, i * (d // h):(i + 1) * (d // h)] for i in range(h)], dim=1)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_attention_is_concat_of_heads_times_w_o(cross):
    torch.manual_seed(2)
    d, h = 8, 2
    mha = MultiHeadAttention(d, h, cross, "tgt_pos", "src_pos" if cross else "tgt_pos", "decoder.0.x").eval()
    x, memory = torch.randn(2, 3, d), torch.randn(2, 4, d)
    mask = causal_mask(3)[None].expand(2, 3, 3) if not cross else torch.tensor([[1, 1, 1, 0]] * 3)[None].expand(
        2, 3, 4).bool()  # fmt: skip
    if cross:
        w_q, b_q = mha.q_proj.weight, mha.q_proj.bias
        w_k, w_v = mha.kv_proj.weight[:d], mha.kv_proj.weight[d:]
        b_k, b_v = mha.kv_proj.bias[:d], mha.kv_proj.bias[d:]
        keys_from = memory
    else:
        w_q, w_k, w_v = mha.qkv.weight[:d], mha.qkv.weight[d : 2 * d], mha.qkv.weight[2 * d :]
        b_q, b_k, b_v = mha.qkv.bias[:d], mha.qkv.bias[d : 2 * d], mha.qkv.bias[2 * d :]
        keys_from = x
    with torch.no_grad():
        q, k, v = x @ w_q.T + b_q, keys_from @ w_k.T + b_k, keys_from @ w_v.T + b_v
        heads, _ = by_hand(_heads(q, h), _heads(k, h), _heads(v, h), mask)  # (B, h, T, d_k)
        concat = torch.cat([heads[:, i] for i in range(h)], dim=-1)  # (B, T, h·d_k)
        expected = concat @ mha.out_proj.weight.T + mha.out_proj.bias
        got = mha(x, memory if cross else None, mask)
        named = mha.interior(x, memory if cross else None, mask, None)
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(named["out"], expected, atol=1e-5) and torch.allclose(named["concat"], concat, atol=1e-5)
    assert named["mask"].shape == (2, 3, 4 if cross else 3) and (named["mask"][0, 0, 1:] == -math.inf).all() != cross


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_the_kv_cache_one_query_at_a_time_equals_the_whole_sequence(cross):
    torch.manual_seed(3)
    d, h = 8, 2
    mha = MultiHeadAttention(d, h, cross, "tgt_pos", "src_pos", "decoder.0.x").eval()
    x, memory = torch.randn(1, 4, d), torch.randn(1, 5, d)
    with torch.no_grad():
        whole = mha(x, memory if cross else None, None if cross else causal_mask(4)[None], is_causal=False)
        cache, rows = {}, []
        for t in range(4):  # a query at absolute position t sees the cached keys 0 … t
            mask = None if cross else causal_mask(1, offset=t)[None]
            rows.append(mha(x[:, t : t + 1], memory if cross else None, mask, cache))
            assert cache["k"].shape[2] == (5 if cross else t + 1)
    assert torch.allclose(torch.cat(rows, dim=1), whole, atol=1e-5)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (8, 16), (6, 20)])
def test_t5_buckets_equal_transformers(bidirectional, buckets, distance):
    relative = torch.arange(-150, 151)[None, :]  # key − query
    ours = relative_position_bucket(relative, bidirectional, buckets, distance)
    theirs = T5Attention._relative_position_bucket(relative, bidirectional, buckets, distance)
    assert torch.equal(ours, theirs)


def test_relative_bias_reads_the_bucket_of_key_minus_query_with_an_offset():
    bias = RelativePositionBias(n_heads=2, num_buckets=8, max_distance=16, bidirectional=False)
    with torch.no_grad():
        bias.weight.copy_(torch.arange(16, dtype=torch.float32).reshape(8, 2))  # bucket b, head h → 2b + h
    got = bias(2, 4, offset=2)  # queries at positions 2 and 3 over keys 0 … 3: (h, 2, 4)
    for i, query in enumerate((2, 3)):
        for key in range(4):
            bucket = relative_position_bucket(torch.tensor(key - query), False, 8, 16)
            assert got[0, i, key] == 2 * bucket and got[1, i, key] == 2 * bucket + 1
    assert bias.buckets(2, 4, offset=2).tolist() == [[2, 1, 0, 0], [3, 2, 1, 0]]  # distance back, exact under 2


def test_bidirectional_bias_looks_both_ways_as_integer_buckets_on_the_tables_device():
    bias = RelativePositionBias(n_heads=1, num_buckets=8, max_distance=16, bidirectional=True)
    with torch.no_grad():
        bias.weight.copy_(torch.arange(8, dtype=torch.float32)[:, None])  # bucket b → b
    # keys after the query take the upper half of the buckets (4 + distance), keys before it the lower half
    assert bias.buckets(3, 3).tolist() == [[0, 5, 6], [1, 0, 5], [2, 1, 0]]
    assert bias.buckets(3, 3).dtype == torch.long
    assert torch.equal(bias(3, 3)[0], bias.buckets(3, 3).float())  # no offset: the queries start at 0
    assert relative_position_bucket(torch.tensor([[-1, 0, 1]]), True, 8, 16).dtype == torch.long
    assert bias.to("meta").buckets(2, 2).device.type == "meta"  # built where the table is (a GPU, say)


def test_grouped_query_attention_by_hand():
    """Four query heads, two key/value heads: query heads 1–2 read key/value head 1 and 3–4 read head 2, each
    computing its own map from the shared keys, softmax(q kᵀ/√d_k) v head by head — and the fused kernel agrees."""
    from scratchformer.transformer.attention import attention, fast_attention

    torch.manual_seed(0)
    q = torch.randn(1, 4, 3, 8, dtype=torch.float64)  # (B, h, Tq, d_k)
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64)  # (B, h_kv, Tk, d_k)
    v = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    context, maps = attention(q, k, v, None)
    for h in range(4):
        g = h // 2  # the key/value head this query head shares
        weights = torch.softmax(q[0, h] @ k[0, g].T / 8**0.5, dim=-1)  # (Tq, Tk)
        torch.testing.assert_close(maps["weights"][0, h], weights)
        torch.testing.assert_close(context[0, h], weights @ v[0, g])
    assert not torch.allclose(maps["weights"][0, 0], maps["weights"][0, 1])  # shared keys, maps of their own
    torch.testing.assert_close(fast_attention(q, k, v, None), context)
