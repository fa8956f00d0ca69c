"""The Q·K neuron view's and the weighted sum's numbers: recomputed by hand here from the trace's q, k and v (the
paper's eq. 1 written out), for self-, masked self- and cross-attention, and for a family without ÷ √d_k and with
a relative position bias (T5)."""

import math

import numpy as np
import pytest

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata.neuron import (
    AttentionPick,
    attention_sublayers,
    neuron_heatmaps,
    neuron_pair,
    neuron_summary,
    weighted_sum,
    weighted_sum_heatmaps,
    weighted_sum_summary,
)
from tests.scratchformer.test_derive import FAMILIES, SENTENCE, family_bundle


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    return bundle, trace


def cell(trace, name, *index) -> float:
    return float(trace[name].tensor[index])


def softmax(row: np.ndarray) -> np.ndarray:
    e = np.exp(row - row[np.isfinite(row)].max())
    return e / e.sum()


@pytest.mark.parametrize("sublayer", ["encoder.0.self_attn", "decoder.1.self_attn", "decoder.0.cross_attn"])
def test_the_pair_is_the_dot_product_scaled_and_its_place_in_the_softmax(en_hi, sublayer):
    bundle, trace = en_hi
    d_k = bundle.config.d_model // bundle.config.n_heads
    q_all, k_all = trace[f"{sublayer}.q"].tensor[0].double(), trace[f"{sublayer}.k"].tensor[0].double()
    for head, query, key in [(0, 1, 0), (3, 3, 2), (2, 2, 1)]:
        pair = neuron_pair(trace, AttentionPick(sublayer, 0, head, query), key)
        q, k = q_all[head, query].numpy(), k_all[head, key].numpy()
        assert np.allclose(pair.q, q) and np.allclose(pair.k, k)
        by_hand = sum(q[e] * k[e] for e in range(d_k))
        assert pair.score == pytest.approx(by_hand, rel=1e-9)
        assert pair.score == pytest.approx(cell(trace, f"{sublayer}.scores", 0, head, query, key), rel=1e-5, abs=1e-6)
        assert pair.root == pytest.approx(math.sqrt(d_k))
        assert pair.scaled == pytest.approx(by_hand / math.sqrt(d_k), rel=1e-9)
        row = np.array([float(q @ k_all[head, j].numpy()) / math.sqrt(d_k) for j in range(len(pair.row))])
        row[np.isneginf(pair.row)] = -np.inf  # the mask, by the rule: later positions for the decoder's self-attn
        assert np.allclose(pair.row[np.isfinite(pair.row)], row[np.isfinite(row)], rtol=1e-5, atol=1e-6)
        assert pair.weight == pytest.approx(softmax(row)[key], rel=1e-5, abs=1e-7)
        assert pair.rank() == 1 + sum(row > row[key])
    labels = trace.labels("src_pos" if "cross" in sublayer or "encoder" in sublayer else "tgt_pos", 0)
    assert pair.key_labels == list(labels)


def test_a_future_key_in_the_decoder_is_masked_with_weight_zero(en_hi):
    _, trace = en_hi
    pair = neuron_pair(trace, AttentionPick("decoder.0.self_attn", 0, 1, 1), 3)  # key 3 is after query 1
    assert pair.mask == -math.inf and pair.weight == 0.0
    assert "−∞" in neuron_summary(pair) and "exactly 0" in neuron_summary(pair)
    assert pair.visible_keys() == 2  # positions 0 and 1


def test_the_heatmaps_hold_the_products_whose_sum_is_the_score(en_hi):
    _, trace = en_hi
    pair = neuron_pair(trace, AttentionPick("decoder.0.cross_attn", 0, 2, 3), 2)
    qk, product, scores, weights = neuron_heatmaps(pair)
    assert qk.shape == (2, len(pair.q)) and np.allclose(qk.values[0], pair.q, atol=1e-6)
    assert float(product.values.astype(np.float64).sum()) == pytest.approx(pair.score, rel=1e-5, abs=1e-5)
    assert scores.col_labels == trace.labels("src_pos", 0) and scores.extra["selected"] == 2
    assert float(weights.values.sum()) == pytest.approx(1.0, abs=1e-5)
    text = neuron_summary(pair)
    assert f"{pair.score:.4f}" in text and f"√{len(pair.q)}" in text and f"{pair.weight:.4f}" in text


def test_without_scaling_and_with_a_relative_bias_the_pair_says_so(en_hi):
    bundle = family_bundle(en_hi[0], FAMILIES["t5_like"])
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    pair = neuron_pair(trace, AttentionPick("decoder.1.self_attn", 0, 2, 3), 1)
    assert pair.root is None and pair.scaled == pytest.approx(pair.score)
    bias = cell(trace, "decoder.1.self_attn.position_bias", 2, 3, 1)
    assert pair.bias == pytest.approx(bias, rel=1e-6)
    assert pair.masked_score == pytest.approx(pair.score + bias, rel=1e-5, abs=1e-6)
    assert "does not divide" in neuron_summary(pair) and "bias" in neuron_summary(pair)


@pytest.mark.parametrize("sublayer", ["encoder.1.self_attn", "decoder.1.self_attn", "decoder.1.cross_attn"])
def test_the_weighted_sum_rebuilds_the_heads_output_row(en_hi, sublayer):
    _, trace = en_hi
    ws = weighted_sum(trace, AttentionPick(sublayer, 0, 1, 2))
    v = trace[f"{sublayer}.v"].tensor[0, 1].double().numpy()  # (keys, d_v)
    a = trace[f"{sublayer}.weights"].tensor[0, 1, 2].double().numpy()
    by_hand = sum(a[j] * v[j] for j in range(len(a)))
    assert np.allclose(ws.total, by_hand, atol=1e-9)
    assert np.allclose(ws.total, trace[f"{sublayer}.context"].tensor[0, 1, 2].double().numpy(), atol=1e-5)
    values, weights, summed = weighted_sum_heatmaps(ws)
    assert summed.shape == (len(a) + 1, v.shape[1]) and np.allclose(summed.values[-1], by_hand, atol=1e-5)
    assert summed.row_labels[-1] == "Σ = head" and weights.shape == (len(a), 1)
    heaviest = int(np.argmax(a))
    assert weighted_sum_summary(ws).startswith(f"head2 = {a[heaviest]:.3f}·v({ws.key_labels[heaviest]})")


def test_picks_outside_the_run_get_one_sentence_with_the_valid_ranges(en_hi):
    _, trace = en_hi
    assert attention_sublayers(trace)[:2] == ["encoder.0.self_attn", "encoder.1.self_attn"]
    with pytest.raises(UserError, match=r"head 9 is out of range: .* has 4 \(0 to 3\)"):
        neuron_pair(trace, AttentionPick("encoder.0.self_attn", 0, 9, 0), 0)
    with pytest.raises(UserError, match=r"key position 6 is out of range: decoder.0.cross_attn has 6 \(0 to 5\)"):
        neuron_pair(trace, AttentionPick("decoder.0.cross_attn", 0, 0, 0), 6)
    with pytest.raises(UserError, match="not an attention sublayer of this run; it has: encoder.0.self_attn"):
        weighted_sum(trace, AttentionPick("encoder.0.ffn", 0, 0, 0))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_draws_both_pictures_for_every_attention(en_hi, family):
    bundle = family_bundle(en_hi[0], FAMILIES[family])
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    names = attention_sublayers(trace)
    assert names and len(names) == len(trace.attention_steps())
    for name in names:
        scores = trace[f"{name}.scores"].tensor[0].double()  # (heads, queries, keys)
        context = trace[f"{name}.context"].tensor[0].double()
        h, i, j = scores.shape[0] - 1, scores.shape[1] - 1, 0
        pair = neuron_pair(trace, AttentionPick(name, 0, h, i), j)
        assert pair.score == pytest.approx(float(scores[h, i, j]), rel=1e-5, abs=1e-5)
        assert float(pair.weights.sum()) == pytest.approx(1.0, abs=1e-5)
        ws = weighted_sum(trace, AttentionPick(name, 0, h, i))
        assert np.allclose(ws.total, context[h, i].numpy(), atol=1e-5)
