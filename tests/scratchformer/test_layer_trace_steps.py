"""What the trace shows of each layer: the feed-forward's and the Add & Norm's steps, their axes, the formulas people
read (written here from the paper and the config, not from the code's output), and values recomputed on demand
(nothing large is kept: keep_bytes=0) that equal the layer's own numbers, worked out here from the step before."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from scratchformer import TransformerConfig
from scratchformer.transformer.model import Transformer

SRC, TGT = torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[1, 7], [1, 8]])


def _model(**kw) -> Transformer:
    sizes = dict(d_model=8, n_heads=2, d_ff=12, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0,
                 src_vocab_size=11, tgt_vocab_size=11, max_len=16, share_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**sizes, **kw}))
    with torch.no_grad():  # norms are born γ = 1, β = 0: give them values a mistake would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def _trace(model, **kw):
    with torch.no_grad():
        return model.run_with_trace(SRC, TGT, keep_bytes=0, **kw)[1]


def test_post_ln_relu_layer_steps():
    model = _model()
    trace = _trace(model)
    ffn = model.encoder[0].ffn
    x = trace["encoder.0.add_norm1.out"].tensor  # post-LN: the FFN reads the stream, the first sublayer's norm
    hidden = trace["encoder.0.ffn.hidden"]
    assert hidden.kind == "ffn_hidden" and hidden.dims == ("batch", "src_pos", "d_ff")
    assert hidden.formula == "max(0, ·)(x W_1 + b_1)"  # ReLU written as the function max(0, ·)
    assert trace.find("encoder.0.ffn.gate") is None and trace.find("encoder.0.ffn.linear") is None
    with torch.no_grad():
        expected_hidden = F.relu(x @ ffn.w_1.weight.T + ffn.w_1.bias)
        expected_out = expected_hidden @ ffn.w_2.weight.T + ffn.w_2.bias
    assert hidden.data is None and torch.allclose(hidden.tensor, expected_hidden, atol=1e-6)  # recomputed
    out = trace["encoder.0.ffn.out"]
    assert out.dims == ("batch", "src_pos", "d_model") and out.major
    assert out.formula == "FFN(x) = max(0, ·)(x W_1 + b_1) W_2 + b_2"
    assert torch.allclose(out.tensor, expected_out, atol=1e-6)
    # Add & Norm: the residual sum (recomputed from x and the sublayer's output), then LayerNorm of it
    residual = trace["decoder.0.add_norm3.residual"]
    norm = model.decoder[0].add_norm3.norm
    expected_sum = trace["decoder.0.add_norm2.out"].tensor + trace["decoder.0.ffn.out"].tensor
    assert residual.dims == ("batch", "tgt_pos", "d_model") and residual.formula == "x + Sublayer(x)"
    assert residual.data is None and torch.allclose(residual.tensor, expected_sum, atol=1e-6)
    after = trace["decoder.0.add_norm3.out"]
    assert after.kind == "layer_norm" and after.title.endswith("LayerNorm") and after.major
    assert after.formula == "LayerNorm(x + Sublayer(x)) = γ·(z − μ)/√(σ² + ε) + β"
    with torch.no_grad():
        expected_norm = F.layer_norm(expected_sum, (8,), norm.weight, norm.bias, norm.eps)
    assert torch.allclose(after.tensor, expected_norm, atol=1e-5)
    assert not [s for s in trace if s.kind == "dropout"]  # eval: no dropout step
    # each attention's axes name the positions its queries and keys come from
    for name, q, k in (("encoder.0.self_attn", "src_pos", "src_pos"), ("decoder.0.self_attn", "tgt_pos", "tgt_pos"),
                       ("decoder.0.cross_attn", "tgt_pos", "src_pos")):  # fmt: skip
        assert trace[f"{name}.weights"].dims == ("batch", "head", q, k), name


def test_pre_ln_rmsnorm_gated_layer_steps():
    model = _model(norm_first=True, norm="rmsnorm", ffn_gated=True, activation="gelu", linear_bias=False,
                   final_layer_norm=True)  # fmt: skip
    trace = _trace(model)
    normed = trace["decoder.0.add_norm3.norm"]
    assert normed.kind == "layer_norm" and normed.major and normed.sublayer == "decoder.0.add_norm3.norm"
    assert normed.dims == ("batch", "tgt_pos", "d_model")
    assert normed.title.endswith("RMSNorm (pre-norm, before the sublayer)")
    assert normed.formula == "RMSNorm(x) = γ·x/√(mean(x²) + ε)"
    x = normed.tensor
    ffn = model.decoder[0].ffn
    with torch.no_grad():
        gate = F.gelu(x @ ffn.w_1.weight.T)
        linear = x @ ffn.w_v.weight.T
        out = (gate * linear) @ ffn.w_2.weight.T
    expected = {"gate": ("GELU(x W_1)", gate), "linear": ("x V", linear), "hidden": ("GELU(x W_1) ⊙ (x V)",
                gate * linear), "out": ("FFN(x) = (GELU(x W_1) ⊙ x V) W_2", out)}  # fmt: skip
    for part, (formula, value) in expected.items():
        step = trace[f"decoder.0.ffn.{part}"]
        assert step.formula == formula, part
        assert step.dims == ("batch", "tgt_pos", "d_model" if part == "out" else "d_ff"), part
        assert torch.allclose(step.tensor, value, atol=1e-6), part
    assert trace["decoder.0.ffn.gate"].title.endswith("Gate branch: GELU(x W_1)")
    residual = trace["decoder.0.add_norm3.residual"]
    assert residual.formula == "x + Sublayer(RMSNorm(x))" and residual.major
    assert residual.title.endswith("Residual add (pre-norm: no RMSNorm after it)")
    before = trace["decoder.0.add_norm2.residual"].tensor  # pre-LN: the stream is the residual sum
    assert torch.allclose(residual.tensor, before + out, atol=1e-6)
    assert trace.find("decoder.0.add_norm3.out") is None  # pre-LN: no norm after the sum


def test_gated_formulas_name_each_bias_and_relu_is_max():
    model = _model(ffn_gated=True, activation="relu")
    trace = _trace(model)
    assert trace["encoder.0.ffn.gate"].formula == "max(0, ·)(x W_1 + b_1)"
    assert trace["encoder.0.ffn.linear"].formula == "x V + b_v"
    assert trace["encoder.0.ffn.hidden"].formula == "max(0, ·)(x W_1 + b_1) ⊙ (x V + b_v)"
    assert trace["encoder.0.ffn.out"].formula == "FFN(x) = (max(0, ·)(x W_1 + b_1) ⊙ (x V + b_v)) W_2 + b_2"
    plain = _trace(_model(activation="silu", linear_bias=False))
    assert plain["encoder.0.ffn.hidden"].formula == "SILU(x W_1)"
    assert plain["encoder.0.ffn.out"].formula == "FFN(x) = SILU(x W_1) W_2"


def test_training_traces_show_dropout_and_keep_the_values_used():
    """With dropout on, a training trace shows each dropout, and keeps the values it used: a rerun would draw
    new dropout masks. With p = 0 or in eval there is no dropout step."""
    for norm_first in (False, True):
        model = _model(dropout=0.5, norm_first=norm_first, final_layer_norm=norm_first).train()
        torch.manual_seed(1)
        trace = _trace(model)
        dropped = trace["encoder.0.add_norm2.dropout"]
        assert dropped.kind == "dropout" and dropped.formula == "Dropout(p=0.5)"
        assert dropped.dims == ("batch", "src_pos", "d_model")
        ffn_out = trace["encoder.0.ffn.out"].tensor
        kept = dropped.tensor != 0
        assert 0 < kept.sum() < kept.numel()
        assert torch.allclose(dropped.tensor[kept], ffn_out[kept] * 2, atol=1e-5)  # kept ones scaled by 1/(1 − p)
        residual = trace["encoder.0.add_norm2.residual"]
        x = (trace["encoder.0.add_norm1.residual"] if norm_first else trace["encoder.0.add_norm1.out"]).tensor
        assert torch.allclose(residual.tensor, x + dropped.tensor, atol=1e-6)
        # the FFN drops some of its hidden units too (as torch.nn.Transformer does), and W_2 reads what is left
        hidden = trace["encoder.0.ffn.hidden"].tensor
        inner = trace["encoder.0.ffn.dropout"]
        assert inner.kind == "dropout" and inner.formula == "Dropout(p=0.5)" and inner.sublayer == "encoder.0.ffn"
        assert inner.dims == ("batch", "src_pos", "d_ff") and inner.index == trace["encoder.0.ffn.hidden"].index + 1
        on = inner.tensor != 0
        assert 0 < on.sum() < (hidden != 0).sum()
        assert torch.allclose(inner.tensor[on], hidden[on] * 2, atol=1e-6)
        w_2 = model.encoder[0].ffn.w_2
        with torch.no_grad():
            assert torch.allclose(ffn_out, F.linear(inner.tensor, w_2.weight, w_2.bias), atol=1e-6)
    quiet = [_model(dropout=0.0, norm_first=pre, final_layer_norm=pre).train() for pre in (False, True)]
    for model in (*quiet, _model(dropout=0.5, norm_first=True, final_layer_norm=True)):
        assert not [s.name for s in _trace(model) if s.kind == "dropout"]


def test_each_add_and_norm_is_named_for_its_layer_and_its_sides_positions():
    for norm_first in (False, True):
        trace = _trace(_model(norm_first=norm_first, final_layer_norm=norm_first))
        parts = ("norm", "residual") if norm_first else ("residual", "out")
        for layer, k, pos in (("encoder.0", 2, "src_pos"), ("decoder.0", 3, "tgt_pos")):
            expected = {f"{layer}.add_norm{i}.{part}" for i in range(1, k + 1) for part in parts}
            steps = [s for s in trace if s.name.startswith(f"{layer}.add_norm")]
            assert {s.name for s in steps} == expected
            assert {s.dims for s in steps} == {("batch", pos, "d_model")}


def test_a_training_trace_keeps_what_it_saw_when_the_weights_change_after():
    """A training step traces, then the optimizer changes the weights: the trace still shows the numbers of the
    pass it traced (an eval-mode trace may recompute interiors instead; it is read before weights change)."""
    model = _model(dropout=0.0).train()
    trace = _trace(model)
    ffn = model.encoder[0].ffn
    x = trace["encoder.0.add_norm1.out"].tensor
    with torch.no_grad():
        expected = F.relu(x @ ffn.w_1.weight.T + ffn.w_1.bias)
        ffn.w_1.weight.mul_(-1.0)  # an optimizer step, as far as the trace can tell
    assert torch.allclose(trace["encoder.0.ffn.hidden"].tensor, expected, atol=1e-6)


def test_a_lazy_trace_holds_less_than_a_whole_one():
    model = _model(d_ff=256)
    with torch.no_grad():
        lazy = model.run_with_trace(SRC, TGT, keep_bytes=0)[1]
        whole = model.run_with_trace(SRC, TGT, lazy=False)[1]
    hidden_bytes = 2 * 3 * 256 * 4  # one FFN's (batch, src_pos, d_ff) float32 hidden layer
    assert 0 < lazy.stored_bytes() < whole.stored_bytes() - 2 * hidden_bytes
