"""The output logits' non-finite flag is taken from a bound (d_model · max|x| · max|W| + max|b|) when that vouches
for them, so a long trace need not read the (B, T, vocab) logits for it: the flag must still be the one a full
check gives, also after the weights change in place (the bound's max|W| is kept per version of the weights)."""

from __future__ import annotations

import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.recording.nonfinite import step_flag

SMALL = dict(src_vocab_size=30, tgt_vocab_size=30, share_embeddings=False, d_model=16, n_heads=4,
             n_encoder_layers=1, n_decoder_layers=1, d_ff=24, max_len=32, dropout=0.0)  # fmt: skip


def _logits_flag(model) -> tuple[bool, bool]:
    """(the trace's flag of the logits, a full check's of the same logits)."""
    src, tgt = torch.randint(4, 30, (2, 5), generator=torch.Generator().manual_seed(0)), torch.tensor([[1, 5, 6]] * 2)
    _, trace = model.run_with_trace(src, tgt, keep_bytes=0)
    step = trace["generator.logits"]
    return bool(step.nonfinite_flag), bool(step_flag(step.tensor, "logits"))


def test_the_logits_flag_follows_the_weights_through_in_place_changes():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**SMALL)).eval()
    weight = model.generator.proj.weight
    x = torch.ones(1, 2, 16)
    assert model.generator._finite_flag(x) is not None  # vouched: the logits are not read for it
    assert _logits_flag(model) == (False, False)
    with torch.no_grad():
        weight[3] = 3e38  # finite, but x · w_3 may overflow: the bound cannot vouch, the logits are read
    assert model.generator._finite_flag(x) is None
    flag, full = _logits_flag(model)
    assert flag == full and full  # the partial sums overflow
    with torch.no_grad():
        weight[3] = 0.5  # a working model again: vouched again
    assert model.generator._finite_flag(x) is not None
    assert _logits_flag(model) == (False, False)
    with torch.no_grad():
        weight[7, 2] = float("nan")
    assert model.generator._finite_flag(x) is None
    assert _logits_flag(model) == (True, True)
