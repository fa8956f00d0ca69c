"""Rotary plot data: the angles map is pos·ω_i with the model's θ and d_rot; the shift demonstration, on a run's own
q and k, gives the run's score at shift 0, the same score for every shift, unchanged lengths, and a score that
moves once sinusoids are added instead."""

import numpy as np
import pytest
import torch

from scratchformer.loading.bundle import load_model
from scratchformer.plotdata.rotary import (
    kv_head_of,
    omegas,
    rotary_angles,
    rotary_layers,
    rotary_shift,
    rotary_vectors,
    turn,
)
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.rotary import rotate


@pytest.fixture(scope="module")
def run():
    bundle = load_model("llama-tiny")
    text = "3 1 4 1 5 9 <sep> 9 5 1 4 1 3"  # the bundled llama-tiny reverses digits read as one sequence
    _, trace = bundle.run(bundle.prepare_run(text, text))
    return bundle, trace


def test_angles_are_position_times_frequency():
    c = TransformerConfig(d_model=32, n_heads=2, n_encoder_layers=0, positional="rotary", rope_theta=500.0)
    hm = rotary_angles(c, 12)
    assert hm.values.shape == (12, 8)  # d_rot = 16: 8 pairs
    omega = 500.0 ** (-np.arange(0, 16, 2) / 16)
    assert np.allclose(hm.extra["angles"], np.arange(12)[:, None] * omega[None, :])
    assert np.allclose(hm.values, np.cos(hm.extra["angles"]), atol=1e-6)
    assert hm.col_labels[0] == "0&8" and "θ = 500" in hm.subtitle


def test_turn_is_the_models_rotation():
    c = TransformerConfig(d_model=32, n_heads=2, n_encoder_layers=0, positional="rotary", rotary_fraction=0.5)
    from scratchformer.transformer.rotary import RotaryEmbedding

    x = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    cos, sin = RotaryEmbedding(c)(5)
    ours = rotate(x, cos.double(), sin.double())[0, 0]
    for pos in range(5):
        assert np.allclose(turn(x[0, 0, pos].numpy(), omegas(c), pos), ours[pos].numpy(), atol=1e-6)


def test_the_score_depends_on_the_distance_only(run):
    bundle, trace = run
    config = bundle.config
    attention = rotary_layers(trace)[1]
    assert attention == "decoder.1.self_attn"
    q, k, traced = rotary_vectors(trace, config, attention, head=3, query=5, key=2)
    shift = rotary_shift(q, k, omegas(config, 1), 5, 2, shifts=(0, 1, 7, 100, 1000))
    assert shift.rotary[0] == pytest.approx(traced, abs=1e-4)  # the run's own score
    assert shift.spread < 1e-9 * max(1.0, abs(shift.rotary[0]))  # the same at every shift
    assert np.allclose(shift.q_norms, shift.q_norm) and np.allclose(shift.k_norms, shift.k_norm)  # lengths kept
    assert shift.added_spread > 1e-3  # added sinusoids: the score moves with where the pair stands
    hm = shift.heatmap()
    assert hm.values.shape == (2, 5) and hm.col_labels[-1] == "s=1000"


def test_query_heads_read_their_shared_key_value_head():
    c = TransformerConfig(d_model=64, n_heads=8, n_kv_heads=2, n_encoder_layers=0, positional="rotary")
    assert [kv_head_of(c, h) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_the_order_experiment_on_a_rotary_decoder_only_model():
    """No encoder and nothing added to the embeddings: the decoder, causal mask off, sees order through the
    rotation alone — rows of a shuffled text put back match without it and differ with it."""
    from scratchformer.experiments import order

    bundle = load_model("llama-tiny")
    assert order.applies(bundle) is None
    out = order.run(bundle, "3 1 4 1 5 9 <sep> 9 5 1 4 1 3")
    assert out["stack"] == "decoder" and out["positions"] == "rotary positions"
    assert out["without_pe"]["max_diff_after_unpermuting"] < 1e-4
    assert out["with_pe"]["max_diff_after_unpermuting"] > 1e-2
    assert "causal mask off" in out["summary"]
