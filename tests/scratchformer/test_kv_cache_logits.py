"""The KV cache gives the logits of a full pass at every step, not just the same argmax: greedy, beam search and
the batched greedy, with and without a prompt, record the output layer's logits and compare them with a full
forward pass over the tokens decoded so far (computed here, not through decoding.py). A cache that put each new
token at position 0, or that lost earlier keys, changes the logits of a random model even where the argmax holds."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.running.decoding import beam_search, greedy, greedy_batch

VARIANTS = {
    "paper": {},
    "learned positions, pre-LN": dict(positional="learned", norm_first=True, final_layer_norm=True),
    "T5 relative bias": dict(positional="none", relative_buckets=8, relative_max_distance=16, norm="rmsnorm",
                             linear_bias=False, scale_attention=False, norm_first=True, final_layer_norm=True),
    "decoder-only": dict(n_encoder_layers=0),
}


def _model(overrides: dict) -> Transformer:
    torch.manual_seed(11)
    sizes = dict(src_vocab_size=23, tgt_vocab_size=23, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2,
                 n_decoder_layers=2, dropout=0.0, max_len=24, bos_id=1, eos_id=2)
    model = Transformer(TransformerConfig(**{**sizes, **overrides})).eval()
    with torch.no_grad():  # T5's bias table starts at zero, where positions would not matter at all
        for name, p in model.named_parameters():
            if "relative_bias" in name:
                p.normal_(0, 1)
    return model


def _recording(model):
    """Each call of the output layer, as it happened: its logits (rows, vocab) at the newest position. Greedy asks
    for (rows, 1, vocab), beam search for (beams, vocab) already: each is kept whole (taking [:, -1] of the
    latter kept one vocabulary column per beam, so beam search's logits were compared one number each)."""
    calls: list[torch.Tensor] = []

    def record(_module, _args, out):
        calls.append((out[:, -1] if out.dim() == 3 else out).detach().clone())

    handle = model.generator.register_forward_hook(record)
    return calls, handle


def _full_pass(model, src, ys):  # (n, T) decoded so far → (n, vocab) logits at the last position, one pass
    with torch.no_grad():
        memory = model.encode(src.expand(ys.shape[0], -1)) if src is not None else None
        return model.generator(model.decode(ys, memory))[:, -1]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cached_greedy_gives_a_full_passs_logits_at_every_step(variant):
    model = _model(VARIANTS[variant])
    src = torch.tensor([[5, 9, 14, 7, 3]]) if model.config.has_encoder else None
    prefix = [8, 4, 17]  # forced first (a decoder-only model's prompt): distinct tokens, so positions matter
    calls, handle = _recording(model)
    out = greedy(model, src[0] if src is not None else [], max_len=10, cache=True, stop_at_eos=False, prefix=prefix)
    handle.remove()
    ys = [1, *prefix, *out]
    assert len(calls) == len(out) == 10
    for t, logits in enumerate(calls):  # step t read ys[: len(prefix) + 1 + t]
        expected = _full_pass(model, src, torch.tensor([ys[: len(prefix) + 1 + t]]))
        assert torch.allclose(logits, expected, atol=1e-5), (variant, t, (logits - expected).abs().max())


@pytest.mark.parametrize("variant", ["paper", "T5 relative bias"])
def test_cached_beam_search_gives_the_uncached_logits_of_every_beam(variant):
    model = _model(VARIANTS[variant])
    src = torch.tensor([5, 9, 14, 7, 3])
    runs = {}
    for cache in (True, False):
        calls, handle = _recording(model)
        runs[cache] = (beam_search(model, src, max_len=8, k=3, cache=cache, length_penalty=0.0), calls)
        handle.remove()
    (best, cached), (best_plain, plain) = runs[True], runs[False]
    assert best == best_plain and len(cached) == len(plain) >= 3
    for t, (a, b) in enumerate(zip(cached, plain)):  # (beams, vocab) each step, the beams in the same order
        assert a.shape == b.shape and a.shape[-1] == model.config.tgt_vocab_size, (variant, t, a.shape)
        assert torch.allclose(a, b, atol=1e-5), (variant, t)


def test_cached_batched_greedy_gives_a_full_passs_logits_for_every_row():
    model = _model({})
    src = torch.tensor([[5, 9, 14, 7, 3], [6, 6, 11, 4, 0]])
    src_pad = torch.tensor([[False] * 5, [False] * 4 + [True]])
    calls, handle = _recording(model)
    rows = greedy_batch(model, src, src_pad, max_len=6, cache=True, stop_at_eos=False)
    handle.remove()
    for t, logits in enumerate(calls):  # (B, vocab)
        ys = torch.tensor([[1, *row[:t]] for row in rows])
        with torch.no_grad():
            expected = model.generator(model.decode(ys, model.encode(src, src_pad), src_pad))[:, -1]
        assert torch.allclose(logits, expected, atol=1e-5), t
