"""The `scale` and `mean` head interventions give the values their definitions give, computed here by hand from
an untouched run (not "cached equals uncached", which shares the formula): scale multiplies one head's context
by the factor; an encoder's mean replaces every row by the average over all positions; a decoder's mean replaces
row t by the average of rows 0 … t (count t + 1), so no later token leaks in."""

import pytest
import torch

from scratchformer.bundle import load_model
from scratchformer.interventions import HeadChange, intervene

SENTENCE = ("the girl eats an apple", "लड़की सेब खाती है")


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    inputs = bundle.prepare(*SENTENCE)
    _, clean = bundle.run(inputs)
    return bundle, inputs, clean


def changed(bundle, inputs, change):
    with intervene(bundle.model, [change]):
        _, trace = bundle.run(inputs)
    return trace


def test_scale_multiplies_one_heads_context_by_the_factor(en_hi):
    bundle, inputs, clean = en_hi
    name = "decoder.1.cross_attn.context"
    trace = changed(bundle, inputs, HeadChange("decoder.1.cross_attn", 2, "scale", 0.25))
    before, after = clean[name].tensor, trace[name].tensor  # (B, h, T, d_k)
    assert torch.allclose(after[:, 2], 0.25 * before[:, 2], atol=1e-6)
    others = [0, 1, 3]
    assert torch.allclose(after[:, others], before[:, others], atol=1e-6)
    # and the output projection reads the changed heads: out = concat W^Oᵀ + b, by hand
    mha = bundle.model.get_submodule("decoder.1.cross_attn")
    concat = after.transpose(1, 2).reshape(after.shape[0], after.shape[2], -1)  # (B, T, h·d_k)
    by_hand = concat @ mha.out_proj.weight.T + mha.out_proj.bias
    assert torch.allclose(trace["decoder.1.cross_attn.out"].tensor, by_hand, atol=1e-5)


def test_an_encoders_mean_is_the_average_over_all_positions(en_hi):
    bundle, inputs, clean = en_hi
    name = "encoder.1.self_attn.context"
    trace = changed(bundle, inputs, HeadChange("encoder.1.self_attn", 1, "mean"))
    before, after = clean[name].tensor[0, 1], trace[name].tensor[0, 1]  # (S, d_k)
    average = sum(before[j] for j in range(before.shape[0])) / before.shape[0]
    for row in after:
        assert torch.allclose(row, average, atol=1e-6)


def test_a_decoders_mean_is_the_running_average_of_the_rows_so_far(en_hi):
    bundle, inputs, clean = en_hi
    name = "decoder.0.self_attn.context"
    trace = changed(bundle, inputs, HeadChange("decoder.0.self_attn", 3, "mean"))
    before, after = clean[name].tensor[0, 3], trace[name].tensor[0, 3]  # (T, d_k)
    for t in range(before.shape[0]):
        running = sum(before[j] for j in range(t + 1)) / (t + 1)
        assert torch.allclose(after[t], running, atol=1e-6), t
    assert not torch.allclose(after[0], before.mean(dim=0), atol=1e-4)  # not the all-positions mean
