"""Beam search with a mean-ablated decoder head (`--ablate decoder.0.self_attn.head1:mean`): the head's output is
the running average of its rows so far, and with the KV cache that running sum lives in the cache. When beams are
reordered, each beam must carry on with its own parent's sum. The reference is a full forward pass over each
beam's whole prefix under the same ablation (computed here, one pass per step), which needs no cache at all."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.patching.interventions import HeadChange, intervene
from scratchformer.running.decoding import beam_search


def _model() -> Transformer:
    torch.manual_seed(5)
    config = TransformerConfig(src_vocab_size=17, tgt_vocab_size=17, d_model=16, n_heads=2, d_ff=32,
                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=16, bos_id=1, eos_id=2)
    return Transformer(config).eval()


@pytest.mark.parametrize("attention", ["decoder.0.self_attn", "decoder.0.cross_attn"])
def test_a_mean_ablated_head_keeps_each_beam_s_own_running_mean(attention):
    model = _model()
    src = [5, 9, 14, 7, 3]
    fed: list[list[list[int]]] = []
    calls: list[torch.Tensor] = []
    decode = model.decode

    def recording(tgt, *args, **kwargs):
        fed.append(tgt.tolist())
        return decode(tgt, *args, **kwargs)

    model.decode = recording
    hook = model.generator.register_forward_hook(lambda m, args, out: calls.append(out.detach().clone()))  # (n, V)
    runs = {}
    with intervene(model, [HeadChange(attention, 1, "mean")]):
        for cache in (False, True):
            fed.clear()
            calls.clear()
            best = beam_search(model, src, max_len=6, k=3, cache=cache, length_penalty=0.0)
            runs[cache] = best, list(fed), list(calls)
        model.decode = decode
        hook.remove()
        (best, prefixes, plain), (best_cached, _, cached) = runs[False], runs[True]
        assert len(plain) == len(cached) >= 4 and {len(p) for p in prefixes[1:]} == {3}  # reordered 3 beams
        for t, (ys, a, b) in enumerate(zip(prefixes, plain, cached)):
            with torch.no_grad():
                memory = model.encode(torch.tensor([src]).expand(len(ys), -1))
                expected = model.generator(decode(torch.tensor(ys), memory))[:, -1]
            assert torch.allclose(a, expected, atol=1e-5), t
            assert b.shape == a.shape and torch.allclose(b, a, atol=1e-5), (t, (b - a).abs().max())
    assert best_cached == best
