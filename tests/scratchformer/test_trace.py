"""The trace: pinned names and shapes, detached CPU tensors, zero cost and no leaks outside tracing."""

import pytest
import torch

from scratchformer import KINDS, Transformer, TransformerConfig, UserError
from scratchformer.recording.trace import active_tracer, breadcrumb, tracing

ATTN_OPS = ["q", "k", "v", "scores", "scaled_scores", "mask", "masked_scores", "weights", "context", "concat", "out"]


def _expected_names(n_enc, n_dec):
    names = [f"src_embed.{s}" for s in ("tokens", "lookup", "scaled", "positional_encoding", "sum")]
    for i in range(n_enc):
        p = f"encoder.{i}"
        names += [f"{p}.self_attn.qkv"] + [f"{p}.self_attn.{o}" for o in ATTN_OPS]
        names += [f"{p}.add_norm1.residual", f"{p}.add_norm1.out", f"{p}.ffn.hidden", f"{p}.ffn.out",
                  f"{p}.add_norm2.residual", f"{p}.add_norm2.out"]
    names += [f"tgt_embed.{s}" for s in ("tokens", "lookup", "scaled", "positional_encoding", "sum")]
    for i in range(n_dec):
        p = f"decoder.{i}"
        names += [f"{p}.self_attn.qkv"] + [f"{p}.self_attn.{o}" for o in ATTN_OPS]
        names += [f"{p}.add_norm1.residual", f"{p}.add_norm1.out"]
        names += [f"{p}.cross_attn.q_proj", f"{p}.cross_attn.kv_proj"] + [f"{p}.cross_attn.{o}" for o in ATTN_OPS]
        names += [f"{p}.add_norm2.residual", f"{p}.add_norm2.out", f"{p}.ffn.hidden", f"{p}.ffn.out",
                  f"{p}.add_norm3.residual", f"{p}.add_norm3.out"]
    return names + ["generator.logits", "generator.probs"]


@pytest.fixture
def small():
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=12, n_encoder_layers=2, n_decoder_layers=2, dropout=0.1,
                            src_vocab_size=20, tgt_vocab_size=20, max_len=16)
    return Transformer(cfg).eval()


def test_names_and_shapes_are_pinned(small):
    src, tgt = torch.randint(0, 20, (3, 5)), torch.randint(0, 20, (3, 4))
    _, trace = small.run_with_trace(src, tgt)
    assert trace.names() == _expected_names(2, 2)
    shapes = {s.name: (s.shape, s.dims) for s in trace}
    assert shapes["src_embed.positional_encoding"] == ((5, 8), ("src_pos", "d_model"))
    assert shapes["encoder.1.self_attn.qkv"] == ((3, 5, 24), ("batch", "src_pos", "d_qkv"))
    assert shapes["encoder.0.self_attn.k"] == ((3, 2, 5, 4), ("batch", "head", "src_pos", "d_head"))
    assert shapes["decoder.0.self_attn.weights"] == ((3, 2, 4, 4), ("batch", "head", "tgt_pos", "tgt_pos"))
    assert shapes["decoder.1.cross_attn.kv_proj"] == ((3, 5, 16), ("batch", "src_pos", "d_kv"))
    assert shapes["decoder.1.cross_attn.weights"] == ((3, 2, 4, 5), ("batch", "head", "tgt_pos", "src_pos"))
    assert shapes["decoder.0.cross_attn.mask"] == ((3, 4, 5), ("batch", "tgt_pos", "src_pos"))
    assert shapes["decoder.1.ffn.hidden"] == ((3, 4, 12), ("batch", "tgt_pos", "d_ff"))
    assert shapes["generator.probs"] == ((3, 4, 20), ("batch", "tgt_pos", "vocab"))
    assert all(s.kind in KINDS for s in trace)
    assert [s.index for s in trace] == list(range(len(trace)))


def test_trace_tensors_are_detached_cpu_and_match_the_output(small):
    src, tgt = torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 3))
    out, trace = small.run_with_trace(src, tgt)
    assert all(s.tensor.device.type == "cpu" and not s.tensor.requires_grad for s in trace)
    assert torch.allclose(trace["generator.logits"].tensor, out)
    assert torch.allclose(trace["generator.probs"].tensor.sum(-1), torch.ones(2, 3), atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(small(src, tgt), out, atol=1e-5)


def test_no_tracer_outside_tracing_and_none_left_after_an_error(small):
    assert active_tracer() is None
    src = torch.randint(0, 20, (1, 17))  # longer than max_len 16: the forward pass raises
    with pytest.raises(UserError, match="at most 16"):
        small.run_with_trace(src, torch.randint(0, 20, (1, 2)))
    assert active_tracer() is None
    with tracing() as tracer:
        with torch.no_grad():
            small(torch.randint(0, 20, (1, 3)), torch.randint(0, 20, (1, 2)))
    assert active_tracer() is None and len(tracer.steps) == len(_expected_names(2, 2))


def test_untraced_forward_takes_the_fast_path(small, monkeypatch):
    """Without tracing no intermediate is materialised: the step-by-step attention() is never called."""

    def explode(*args, **kwargs):
        raise AssertionError("the traced attention path ran without tracing")

    monkeypatch.setattr("scratchformer.transformer.attention.attention", explode)
    with torch.no_grad():
        small(torch.randint(0, 20, (1, 3)), torch.randint(0, 20, (1, 2)))
    with pytest.raises(AssertionError, match="traced attention path"):
        small.run_with_trace(torch.randint(0, 20, (1, 3)), torch.randint(0, 20, (1, 2)))


def test_dropout_steps_appear_only_in_training(small):
    small.train()
    with tracing() as tracer:
        small(torch.randint(0, 20, (1, 3)), torch.randint(0, 20, (1, 2)))
    assert any(s.kind == "dropout" for s in tracer.steps)


def test_breadcrumbs_count_layers_from_one():
    assert breadcrumb("decoder.1.cross_attn") == ["Decoder 2", "Cross-attention"]
    assert breadcrumb("src_embed") == ["Source embedding"]


def test_encoder_only_and_decoder_only_models_trace_what_they_have():
    enc = Transformer(TransformerConfig(d_model=8, n_heads=2, d_ff=8, n_encoder_layers=1, n_decoder_layers=0,
                                        src_vocab_size=10, tgt_vocab_size=10, max_len=8)).eval()
    out, trace = enc.run_with_trace(torch.randint(0, 10, (1, 4)))
    assert out.shape == (1, 4, 8) and {s.stack for s in trace} == {"src_embed", "encoder"}
    dec = Transformer(TransformerConfig(d_model=8, n_heads=2, d_ff=8, n_encoder_layers=0, n_decoder_layers=1,
                                        src_vocab_size=10, tgt_vocab_size=10, max_len=8)).eval()
    out, trace = dec.run_with_trace(None, torch.randint(0, 10, (1, 4)))
    assert out.shape == (1, 4, 10) and not any("cross_attn" in n for n in trace.names())
