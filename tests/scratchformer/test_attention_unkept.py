"""A lazy trace that will rerun an attention's maps when they are shown does not build them in the forward pass
(attention.attention_unkept): its context must be attention()'s bit for bit, and each map's non-finite flag the
one a full check of that map gives — finite maps, NaN, overflow to ±∞, large but finite scores, padding rows, no
mask, no scaling. Both take the context from the fused kernel (attention.traced_context), told the plainest mask
that means the same: that gives the very bits the mask itself gives."""

from __future__ import annotations

import pytest
import torch

import scratchformer.transformer.attention as attention_module
from scratchformer.recording.nonfinite import mask_blocks, step_flag
from scratchformer.transformer.attention import (
    MAPS,
    attention,
    attention_unkept,
    fast_attention,
    finite_scores,
    traced_context,
)
from scratchformer.transformer.masks import additive

KINDS = {"scores": "scores", "scaled_scores": "scaled_scores", "masked_scores": "masked_scores",
         "weights": "attention_weights"}


def _inputs(case: str):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = torch.ones(2, 5, 5, dtype=torch.bool).tril()  # causal
    if case == "padding":
        mask[1, :, 3:] = False  # the second item's last keys are padding …
        mask[1, 0, :] = False  # … and its first query sees nothing at all (weights 0, not NaN)
    elif case == "nan":
        q[0, 1, 2, 0] = float("nan")
    elif case == "overflow up":
        q[1, 0, 4] = 1e20
        k[1, 0, 1] = 1e20  # q·k = +∞ in an allowed cell: the softmax row becomes NaN
    elif case == "overflow down":
        q[1, 0, 4] = 1e20
        k[1, 0, 1] = -1e20  # q·k = −∞ in an allowed cell: a weight of 0, yet the scores are not finite
    elif case == "large":
        q[0, 2, 1] = 1e19
        k[0, 2, 3] = 6e18  # a score of 2.4e38: finite, yet too near the largest float for the lengths to vouch
    elif case == "no mask":
        mask = None
    return q, k, v, mask


def _full_flags(maps: dict, mask) -> dict:
    blocks = mask_blocks(additive(mask, (2, 5, 5))) if mask is not None else None
    return {m: bool(step_flag(maps[m], KINDS[m], blocks if m == "masked_scores" else None)) for m in MAPS}


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("case", ["finite", "padding", "nan", "overflow up", "overflow down", "large", "no mask"])
def test_the_context_and_every_flag_equal_the_full_computation(case, scale):
    q, k, v, mask = _inputs(case)
    context, maps = attention(q, k, v, mask, scale)
    got, flags = attention_unkept(q.clone(), k.clone(), v.clone(), mask, scale)
    torch.testing.assert_close(got, context, rtol=0, atol=0, equal_nan=True)  # bit for bit, NaN where it is
    assert {m: bool(f) for m, f in flags.items()} == _full_flags(maps, mask)
    if case in ("finite", "large"):
        assert not any(bool(f) for f in flags.values())
    if not any(bool(f) for f in flags.values()):  # the fused kernel's context is weights @ V, up to rounding
        assert torch.allclose(context, maps["weights"] @ v, atol=1e-6)
    if case in ("nan", "overflow up", "overflow down"):
        assert bool(flags["scores"])  # each case really is one the flags must catch


def test_a_lazy_trace_of_a_long_input_leaves_the_maps_unbuilt_and_rebuilds_them_exactly(monkeypatch):
    """Through the model: a lazy trace takes the unbuilt path (no map is held, none was rerun to record it),
    and each map rerun when shown equals the eager trace's."""
    from scratchformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=40, tgt_vocab_size=45, share_embeddings=False, d_model=16, n_heads=4,
                               n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=64, dropout=0.0)
    model = Transformer(config).eval()
    src, tgt = torch.randint(4, 40, (2, 30)), torch.randint(4, 45, (2, 20))
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    calls = []
    real = attention_unkept

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("scratchformer.transformer.attention.attention_unkept", counting)
    _, lazy = model.run_with_trace(src, tgt, keep_bytes=1024)  # 2 items × 4 heads × 30 × 30 × 4 B: not kept
    assert len(calls) == 3  # encoder self, decoder self and cross (both items traced together)
    assert lazy.cache.misses == 0 and lazy.first_nonfinite() is None
    for name in ("encoder.0.self_attn.weights", "decoder.0.self_attn.masked_scores", "decoder.0.cross_attn.scores"):
        assert not lazy[name].stored
        assert torch.equal(lazy[name].tensor, eager[name].tensor), name


def test_finite_scores_need_no_maps(monkeypatch):
    """When the queries' and keys' lengths vouch that no score can overflow, the pass builds no map at all."""
    built = []
    real = attention_module._map_flags
    monkeypatch.setattr(attention_module, "_map_flags", lambda *a: built.append(1) or real(*a))
    q, k, v, mask = _inputs("finite")
    assert finite_scores(q, k)
    attention_unkept(q, k, v, mask)
    assert not built
    for case in ("nan", "overflow up", "large"):  # where the lengths cannot vouch, the maps are checked
        q, k, v, mask = _inputs(case)
        assert not finite_scores(q, k)
        attention_unkept(q, k, v, mask)
    assert len(built) == 3


@pytest.mark.parametrize("shape", [(7, 7), (64, 64), (40, 90)])
def test_the_plainest_mask_gives_the_bits_of_the_mask_itself(shape):
    """traced_context drops a mask that blocks nothing and turns the exact causal triangle into is_causal, for
    speed: the fused kernel gives the same bits as when it reads the mask."""
    torch.manual_seed(1)
    tq, tk = shape
    q, k, v = torch.randn(2, 4, tq, 8), torch.randn(2, 4, tk, 8), torch.randn(2, 4, tk, 8)
    masks = [torch.ones(2, tq, tk, dtype=torch.bool)]
    if tq == tk:
        masks.append(torch.ones(tq, tk, dtype=torch.bool).tril().expand(2, tq, tk))
    for mask in masks:
        assert torch.equal(traced_context(q, k, v, mask), fast_attention(q, k, v, mask))
    padded = masks[-1].clone()
    padded[1, :, -2:] = False  # padding: the mask itself is needed
    assert torch.equal(traced_context(q, k, v, padded), fast_attention(q, k, v, padded))
