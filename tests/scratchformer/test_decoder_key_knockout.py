"""Knocking out keys of the decoder's self-attention while generating (`decoder.1.self_attn.keys:1`, as --ablate
writes it): generating with the KV cache gives the tokens that re-running the whole prefix gives; at every step of
the cached timeline the knocked-out key gets exactly zero weight; and the tokens are those of a mask applied by
hand — softmax(QKᵀ/√d_k) with the causal mask and the knocked-out column at −∞, computed here from an untouched
run's scores — which here differ from the unchanged model's (without "the girl" it has written, it writes it
again)."""

import math

import pytest
import torch

from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import Patch, intervene, parse_spec
from scratchformer.running.decoding import greedy, timeline

SOURCE = "the girl eats an apple"
ATTENTION, LAYER, KEY = "decoder.1.self_attn", 1, 1  # key 1: the first generated token, "लड़की"


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    src = bundle.prepare(SOURCE).src  # (1, S)
    return bundle, src, parse_spec(f"{ATTENTION}.keys:{KEY}", bundle.model)


def _by_hand(bundle, src, ys):
    """Logits (T, vocab) and self-attention weights (h, T, T) of layer LAYER over the decoder input `ys` with key
    KEY masked by hand; the scores QKᵀ come from an untouched run (the knockout changes nothing before them)."""
    tgt = torch.tensor([ys])  # (1, T)
    with torch.no_grad():
        _, clean = bundle.model.run_with_trace(src, tgt)
    scores = clean[f"{ATTENTION}.scores"].tensor[0]  # (h, T, T): QKᵀ, before scaling and masking
    t = len(ys)
    allowed = torch.ones(t, t).tril().bool()  # (T, T): query i sees keys 0 … i
    allowed[:, KEY] = False
    d_k = bundle.config.d_model // bundle.config.n_heads
    weights = (scores / math.sqrt(d_k)).masked_fill(~allowed, float("-inf")).softmax(-1)  # (h, T, T)
    with torch.no_grad(), intervene(bundle.model, [Patch(f"{ATTENTION}.weights", weights[None])]):
        logits = bundle.model(src, tgt)[0]  # (T, vocab)
    return logits, weights


def test_cached_generation_equals_uncached_under_a_decoder_key_knockout(en_hi):
    bundle, src, knockout = en_hi
    ids = src[0].tolist()
    with intervene(bundle.model, [knockout]):
        cached, uncached = greedy(bundle, ids, 20), greedy(bundle, ids, 20, cache=False)
    assert cached == uncached and len(cached) > KEY + 1


def test_the_knocked_out_key_gets_zero_weight_at_every_generated_step(en_hi):
    bundle, src, knockout = en_hi
    with intervene(bundle.model, [knockout]):
        steps = timeline(bundle, SOURCE).steps
        generated = greedy(bundle, src[0].tolist(), 20)
    assert [s.token_id for s in steps][: len(generated)] == generated
    assert len(steps) > KEY + 2
    for step in steps:
        row = torch.from_numpy(step.self_attention[LAYER])  # (h, pos + 1): this step's new query row
        assert row.shape[-1] == step.position + 1
        if step.position >= KEY:
            assert torch.equal(row[:, KEY], torch.zeros(row.shape[0])), step.position
        assert torch.allclose(row.sum(-1), torch.ones(row.shape[0]), atol=1e-6)
        other = torch.from_numpy(step.self_attention[1 - LAYER])  # the other layer attends as before
        if step.position >= KEY:
            assert (other[:, KEY] > 0).all(), step.position


def test_the_knockout_generates_what_a_hand_applied_mask_predicts(en_hi):
    bundle, src, knockout = en_hi
    ids = src[0].tolist()
    start, end = bundle.start_id(), bundle.config.eos_id
    plain = greedy(bundle, ids, 20)
    with intervene(bundle.model, [knockout]):
        knocked = greedy(bundle, ids, 20)
        _, traced = bundle.model.run_with_trace(src, torch.tensor([[start, *knocked]]))
    logits, weights = _by_hand(bundle, src, [start, *knocked])
    assert logits.argmax(-1).tolist() == [*knocked, end]  # each generated token is the hand mask's argmax
    assert torch.allclose(traced[f"{ATTENTION}.weights"].tensor[0], weights, atol=1e-6)
    # it matters here: after "लड़की", the hand-masked logits choose another token than the unchanged model's
    with torch.no_grad():
        clean_logits = bundle.model(src, torch.tensor([[start, *plain]]))[0]  # (T, vocab)
    assert knocked[:KEY] == plain[:KEY]
    assert logits[KEY].argmax() != clean_logits[KEY].argmax() and knocked != plain
