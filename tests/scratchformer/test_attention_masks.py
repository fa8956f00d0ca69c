"""Attention rows sum to 1, causal weights are exactly 0 above the diagonal, padded keys get weight 0."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchformer import Transformer, TransformerConfig
from scratchformer.transformer import masks
from scratchformer.transformer.attention import attention, fast_attention


def _model(seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0,
                            src_vocab_size=30, tgt_vocab_size=30, max_len=32)
    return Transformer(cfg).eval()


@settings(max_examples=15, deadline=None)
@given(s_len=st.integers(2, 12), t_len=st.integers(1, 10), pad=st.integers(0, 6), seed=st.integers(0, 999))
def test_weights_are_distributions_with_masked_cells_zero(s_len, t_len, pad, seed):
    model = _model(seed)
    src = torch.randint(0, 30, (2, s_len))
    tgt = torch.randint(0, 30, (2, t_len))
    src_pad = torch.zeros(2, s_len, dtype=torch.bool)
    src_pad[1, s_len - min(pad, s_len - 1):] = True
    _, trace = model.run_with_trace(src, tgt, src_pad)
    for step in trace.attention_steps():
        w = step.tensor  # (B, h, Tq, Tk)
        assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-6), step.name
        if step.attention_type == "decoder.self_attn":
            above = torch.triu(torch.ones(t_len, t_len, dtype=torch.bool), diagonal=1)
            assert (w[..., above] == 0).all(), f"{step.name} looks into the future"
        else:  # encoder self-attention and cross-attention: padded source keys get exactly 0
            assert (w[1][..., src_pad[1]] == 0).all(), f"{step.name} attends to padding"
        masked = trace[step.name.replace("weights", "masked_scores")].tensor
        mask = trace[step.name.replace("weights", "mask")].tensor  # (B, Tq, Tk) additive
        assert torch.equal(torch.isneginf(masked), torch.isneginf(mask)[:, None].expand_as(masked))


def test_fully_masked_row_gives_zeros_not_nan():
    q = torch.randn(1, 2, 3, 4)
    k = torch.randn(1, 2, 5, 4)
    v = torch.randn(1, 2, 5, 4)
    allowed = torch.ones(1, 3, 5, dtype=torch.bool)
    allowed[0, 1] = False  # query 1 may see nothing
    context, parts = attention(q, k, v, allowed)
    assert not torch.isnan(parts["weights"]).any() and not torch.isnan(context).any()
    assert (parts["weights"][0, :, 1] == 0).all() and (context[0, :, 1] == 0).all()
    fast = fast_attention(q, k, v, allowed)
    assert torch.allclose(fast, context, atol=1e-6)


def test_mask_builders_have_the_documented_shapes_and_values():
    src_pad = torch.tensor([[False, False, True]])
    tgt_pad = torch.tensor([[False, False, False, True]])
    enc = masks.encoder_self_mask(src_pad, 1, 3)
    dec = masks.decoder_self_mask(tgt_pad, 1, 4)
    cross = masks.cross_mask(src_pad, 1, 4, 3)
    assert enc.shape == (1, 3, 3) and dec.shape == (1, 4, 4) and cross.shape == (1, 4, 3)
    assert not enc[0, :, 2].any() and enc[0, :, :2].all()
    assert torch.equal(dec[0], torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool))
    add = masks.additive(dec)
    assert add[0, 0, 1] == float("-inf") and add[0, 1, 0] == 0
    # with an offset (cached decoding) query i sits at absolute position offset + i
    assert torch.equal(masks.causal_mask(1, offset=3), torch.ones(1, 4, dtype=torch.bool))
