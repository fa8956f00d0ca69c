"""The layer departures the paper-sized comparison does not take, each against an independent reference: pre-LN
encoder and decoder layers against torch.nn's norm_first layers, RMSNorm against transformers' T5LayerNorm, the
norm's ε, the gated feed-forward written out by hand, and T5's position-bias table in the first layer only."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.t5.modeling_t5 import T5Attention, T5LayerNorm

from scratchformer import TransformerConfig
from scratchformer.transformer.layers import DecoderLayer, EncoderLayer, PositionwiseFeedForward, RMSNorm, make_norm

D, H, FF = 8, 2, 12


def _config(**kw) -> TransformerConfig:
    sizes = dict(d_model=D, n_heads=H, d_ff=FF, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=16)
    return TransformerConfig(**{**sizes, **kw})


def _copy_attention(ours, theirs: nn.MultiheadAttention, cross: bool) -> None:
    """torch's in_proj_weight is [W^Q; W^K; W^V]: fused for self-attention, split into q_proj / kv_proj for cross."""
    w, b = theirs.in_proj_weight, theirs.in_proj_bias
    if cross:
        ours.q_proj.weight.copy_(w[:D]), ours.q_proj.bias.copy_(b[:D])
        ours.kv_proj.weight.copy_(w[D:]), ours.kv_proj.bias.copy_(b[D:])
    else:
        ours.qkv.weight.copy_(w), ours.qkv.bias.copy_(b)
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


def _copy_common(ours, theirs, norms: list[str]) -> None:
    ours.ffn.w_1.load_state_dict(theirs.linear1.state_dict())
    ours.ffn.w_2.load_state_dict(theirs.linear2.state_dict())
    for mine, ref in zip(norms, ("norm1", "norm2", "norm3")):
        getattr(ours, mine).norm.load_state_dict(getattr(theirs, ref).state_dict())


def _randomise_norms(module: nn.Module) -> None:
    """LayerNorms are born γ = 1, β = 0, which hides a missing or misplaced norm: give them other values."""
    for m in module.modules():
        if isinstance(m, nn.LayerNorm):
            m.weight.normal_(1, 0.5), m.bias.normal_(0, 0.5)


def _pre_ln_pair(reference_class, our_class, seed: int):
    """torch.nn's pre-LN (norm_first) layer with GELU and ε = 0.3, its norms randomised, and ours of the same config
    (weights not copied yet)."""
    torch.manual_seed(seed)
    ref = reference_class(D, H, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=True,
                          layer_norm_eps=0.3).eval()  # fmt: skip
    ours = our_class(_config(norm_first=True, activation="gelu", layer_norm_eps=0.3), 1).eval()
    with torch.no_grad():
        _randomise_norms(ref)
    return ref, ours


def test_pre_ln_encoder_layer_equals_torch_norm_first_layer():
    ref, ours = _pre_ln_pair(nn.TransformerEncoderLayer, EncoderLayer, seed=0)
    with torch.no_grad():
        _copy_attention(ours.self_attn, ref.self_attn, cross=False)
        _copy_common(ours, ref, ["add_norm1", "add_norm2"])
        x = torch.randn(2, 5, D) * 3
        is_pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
        expected = ref(x, src_key_padding_mask=is_pad)
        got = ours(x, (~is_pad)[:, None, :].expand(2, 5, 5))
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()


def test_pre_ln_decoder_layer_equals_torch_norm_first_layer():
    ref, ours = _pre_ln_pair(nn.TransformerDecoderLayer, DecoderLayer, seed=1)
    with torch.no_grad():
        _copy_attention(ours.self_attn, ref.self_attn, cross=False)
        _copy_attention(ours.cross_attn, ref.multihead_attn, cross=True)
        _copy_common(ours, ref, ["add_norm1", "add_norm2", "add_norm3"])
        x, memory = torch.randn(2, 4, D) * 3, torch.randn(2, 6, D) * 3
        src_pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
        causal = torch.ones(4, 4).triu(1).bool()  # torch: True = may not attend
        expected = ref(x, memory, tgt_mask=causal, memory_key_padding_mask=src_pad)
        self_mask = (~causal)[None].expand(2, 4, 4)
        cross_mask = (~src_pad)[:, None, :].expand(2, 4, 6)
        got = ours(x, memory, self_mask, cross_mask)
        # the same with the causal rule given as is_causal, through the key/value cache
        cache: dict = {}
        cached = ours(x, memory, None, cross_mask, cache=cache, is_causal=True)
        # one position at a time, as in decoding: the cache keeps the earlier keys and the encoder's projected
        # keys and values, so the memory is needed only on the first step
        step_cache: dict = {}
        steps = [ours(x[:, t : t + 1], memory if t == 0 else None, None, cross_mask[:, :1], cache=step_cache)
                 for t in range(4)]  # fmt: skip
        # without a mask the decoder layer's self-attention sees every position (is_causal is off by default)
        open_rows = ref(x, memory, memory_key_padding_mask=src_pad)
        got_open = ours(x, memory, None, cross_mask)
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()
    assert torch.allclose(cached, expected, atol=1e-5)
    assert set(cache) == {"self", "cross"}  # each attention keeps its own keys and values
    assert torch.allclose(torch.cat(steps, dim=1), expected, atol=1e-5)
    assert torch.allclose(got_open, open_rows, atol=1e-5)
    assert not torch.allclose(got_open, expected, atol=1e-3)


def test_rmsnorm_equals_t5_layer_norm_with_its_epsilon():
    torch.manual_seed(2)
    config = _config(norm="rmsnorm", layer_norm_eps=0.5)  # a large ε, so one left out or misplaced shows
    ours = make_norm(config)
    assert isinstance(ours, RMSNorm)
    ref = T5LayerNorm(D, eps=0.5)
    x = torch.randn(3, 4, D) * 0.7
    with torch.no_grad():
        ref.weight.normal_(1, 0.5)
        ours.weight.copy_(ref.weight)
        expected = ref(x)
        got = ours(x)
    assert torch.allclose(got, expected, atol=1e-6)
    # by hand for one position: γ·x/√(mean(x²) + ε)
    v = x[1, 2].double()
    by_hand = ref.weight.double() * v / torch.sqrt((v * v).sum() / D + 0.5)
    assert torch.allclose(got[1, 2].double(), by_hand, atol=1e-6)


def test_layer_norm_takes_the_configs_epsilon():
    torch.manual_seed(3)
    norm = make_norm(_config(layer_norm_eps=0.5))
    x = torch.randn(2, D)
    assert isinstance(norm, nn.LayerNorm)
    with torch.no_grad():
        v = x.double()
        by_hand = (v - v.mean(-1, keepdim=True)) / torch.sqrt(v.var(-1, unbiased=False, keepdim=True) + 0.5)
        assert torch.allclose(norm(x).double(), by_hand, atol=1e-6)


def test_gated_feed_forward_by_hand():
    """FFN(x) = (act(x W_1 + b_1) ⊙ (x V + b_v)) W_2 + b_2, SiLU as the activation; and without biases (T5)."""
    torch.manual_seed(4)
    x = torch.randn(2, 3, D)
    for bias in (True, False):
        ffn = PositionwiseFeedForward(_config(ffn_gated=True, activation="silu", linear_bias=bias), "tgt_pos",
                                      "decoder.0.ffn").eval()  # fmt: skip
        w1, v, w2 = ffn.w_1, ffn.w_v, ffn.w_2
        assert (w1.bias is not None) == (v.bias is not None) == (w2.bias is not None) == bias
        with torch.no_grad():
            z = x @ w1.weight.T + (w1.bias if bias else 0)
            gate = z * torch.sigmoid(z)  # SiLU written out
            linear = x @ v.weight.T + (v.bias if bias else 0)
            expected = (gate * linear) @ w2.weight.T + (w2.bias if bias else 0)
            got = ffn(x)
            parts = ffn.interior(x)
        assert torch.allclose(got, expected, atol=1e-6)
        assert torch.allclose(parts["gate"], gate, atol=1e-6) and torch.allclose(parts["linear"], linear, atol=1e-6)
        assert torch.allclose(parts["hidden"], gate * linear, atol=1e-6)


def test_plain_feed_forward_keeps_no_linear_branch():
    torch.manual_seed(5)
    ffn = PositionwiseFeedForward(_config(activation="relu"), "src_pos", "encoder.0.ffn").eval()
    x = torch.randn(1, 3, D)
    with torch.no_grad():
        hidden = torch.clamp(x @ ffn.w_1.weight.T + ffn.w_1.bias, min=0)
        parts = ffn.interior(x)
    assert ffn.w_v is None
    assert set(parts) == {"gate", "hidden", "out"}
    assert torch.equal(parts["gate"], parts["hidden"]) and torch.allclose(parts["hidden"], hidden, atol=1e-6)


def test_t5_position_bias_table_sits_in_the_first_layer_of_each_stack():
    """Bidirectional buckets in the encoder, causal in the decoder, as transformers' T5 computes them."""
    config = _config(relative_buckets=8, relative_max_distance=12)
    enc = [EncoderLayer(config, i) for i in range(2)]
    dec = [DecoderLayer(config, i) for i in range(2)]
    assert enc[1].self_attn.relative_bias is None and dec[1].self_attn.relative_bias is None
    assert dec[0].cross_attn.relative_bias is None
    distance = torch.arange(-14, 15)[None, :]  # keys −14 … 14 positions from query 0
    for table, bidirectional in ((enc[0].self_attn.relative_bias, True), (dec[0].self_attn.relative_bias, False)):
        assert table.weight.shape == (8, H)
        expected = T5Attention._relative_position_bucket(distance, bidirectional=bidirectional, num_buckets=8,
                                                         max_distance=12)  # fmt: skip
        got = table.buckets(1, 29, offset=14)
        assert torch.equal(got, expected)
    # no table at all when the config has no buckets
    assert EncoderLayer(_config(), 0).self_attn.relative_bias is None


def test_layers_follow_the_configs_attention_departures():
    """T5's: heads of d_kv ≠ d_model / h, no biases, no ÷ √d_k, in every attention of both stacks."""
    config = _config(d_kv=3, linear_bias=False, scale_attention=False)
    for layer in (EncoderLayer(config, 0), DecoderLayer(config, 1)):
        attentions = [layer.self_attn] + ([layer.cross_attn] if isinstance(layer, DecoderLayer) else [])
        for a in attentions:
            assert a.d_head == 3 and a.n_heads == H and a.scale is False
            assert a.out_proj.bias is None and a.out_proj.weight.shape == (D, 3 * H)
    plain = EncoderLayer(_config(), 0).self_attn
    assert plain.d_head == D // H and plain.scale is True and plain.qkv.bias is not None


def test_a_decoder_only_layer_has_no_cross_attention():
    layer = DecoderLayer(_config(n_encoder_layers=0), 0)
    assert layer.cross_attn is None and layer.add_norm2 is None
    x = torch.randn(1, 3, D)
    with torch.no_grad():
        out = layer(x, None, None, None, is_causal=True)
    assert out.shape == (1, 3, D)


def test_dropout_rate_reaches_every_sublayer():
    config = TransformerConfig(d_model=D, n_heads=H, d_ff=FF, n_encoder_layers=1, n_decoder_layers=1, dropout=0.25)
    layer = DecoderLayer(config, 0)
    rates = {name: m.p for name, m in layer.named_modules() if isinstance(m, nn.Dropout)}
    assert {"add_norm1.dropout", "add_norm2.dropout", "add_norm3.dropout", "ffn.dropout"} <= set(rates)
    assert set(rates.values()) == {0.25}
    # in training, dropout zeroes about a quarter of the hidden units and scales the rest by 1/(1 − p)
    ffn = layer.ffn.train()
    torch.manual_seed(6)
    with torch.no_grad():
        ffn.w_2.weight.copy_(torch.eye(FF)[:D])  # out = the first D hidden units
        ffn.w_2.bias.zero_()
        x = torch.randn(64, 5, D)
        kept = F.relu(x @ ffn.w_1.weight.T + ffn.w_1.bias)[..., :D]
        out = ffn(x)
    nonzero = kept != 0
    dropped = (out[nonzero] == 0).float().mean()
    assert 0.2 < dropped < 0.3
    survivors = out[nonzero] != 0
    assert torch.allclose(out[nonzero][survivors], kept[nonzero][survivors] / 0.75, atol=1e-5)


def test_the_position_bias_reaches_the_self_attention_of_both_layers():
    """T5's bias is added to the scores: a bias of −10⁹ on one key hides it, exactly like masking that key."""
    torch.manual_seed(7)
    config = _config(norm_first=True)
    x, memory = torch.randn(2, 4, D), torch.randn(2, 3, D)
    bias = torch.zeros(H, 4, 4)
    bias[:, :, 1] = -1e9  # key 1 hidden from every query, in every head
    hidden = torch.ones(2, 4, 4, dtype=torch.bool)
    hidden[:, :, 1] = False
    encoder, decoder = EncoderLayer(config, 1).eval(), DecoderLayer(config, 1).eval()
    with torch.no_grad():
        assert torch.allclose(encoder(x, None, position_bias=bias), encoder(x, hidden), atol=1e-5)
        assert not torch.allclose(encoder(x, None, position_bias=bias), encoder(x, None), atol=1e-3)
        causal = torch.ones(4, 4).tril().bool()[None].expand(2, 4, 4)
        got = decoder(x, memory, causal, None, position_bias=bias)
        expected = decoder(x, memory, causal & hidden, None)
    assert torch.allclose(got[:, 1:], expected[:, 1:], atol=1e-5)  # query 0 sees only key 0 either way
