"""A lazy trace that will rerun an attention's maps when they are shown does not build them in the forward pass
(attention.attention_unkept): its context must be attention()'s bit for bit, and each map's non-finite flag the
one a full check of that map gives — finite maps, NaN, overflow to ±∞, padding rows, no mask, no scaling."""

from __future__ import annotations

import pytest
import torch

from scratchformer.attention import MAPS, attention, attention_unkept
from scratchformer.masks import additive
from scratchformer.nonfinite import mask_blocks, step_flag

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
    elif case == "no mask":
        mask = None
    return q, k, v, mask


def _full_flags(maps: dict, mask) -> dict:
    blocks = mask_blocks(additive(mask, (2, 5, 5))) if mask is not None else None
    return {m: bool(step_flag(maps[m], KINDS[m], blocks if m == "masked_scores" else None)) for m in MAPS}


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("case", ["finite", "padding", "nan", "overflow up", "overflow down", "no mask"])
def test_the_context_and_every_flag_equal_the_full_computation(case, scale):
    q, k, v, mask = _inputs(case)
    context, maps = attention(q, k, v, mask, scale)
    got, flags = attention_unkept(q.clone(), k.clone(), v.clone(), mask, scale)
    torch.testing.assert_close(got, context, rtol=0, atol=0, equal_nan=True)  # bit for bit, NaN where it is
    assert {m: bool(f) for m, f in flags.items()} == _full_flags(maps, mask)
    if case == "finite":
        assert not any(bool(f) for f in flags.values())
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

    monkeypatch.setattr("scratchformer.attention.attention_unkept", counting)
    _, lazy = model.run_with_trace(src, tgt, keep_bytes=1024)  # 2 items × 4 heads × 30 × 30 × 4 B: not kept
    assert len(calls) == 3  # encoder self, decoder self and cross (both items traced together)
    assert lazy.cache.misses == 0 and lazy.first_nonfinite() is None
    for name in ("encoder.0.self_attn.weights", "decoder.0.self_attn.masked_scores", "decoder.0.cross_attn.scores"):
        assert not lazy[name].stored
        assert torch.equal(lazy[name].tensor, eager[name].tensor), name
