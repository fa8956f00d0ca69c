"""Padding at the end of a source changes nothing that decoding computes: greedy and beam search (cached or not)
give the logits, step by step, of the same source without its padding, and the batched greedy gives every row of a
padded batch the logits of that row decoded alone. The reference is a full forward pass over the unpadded source
and the tokens decoded so far, computed here. Attention to a padded position (a source mask dropped, or not
expanded to every beam) changes the logits of a random model."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.running.decoding import beam_search, greedy, greedy_batch

PAD = 0
SOURCE = [5, 9, 14, 7]


def _model() -> Transformer:
    torch.manual_seed(7)
    config = TransformerConfig(src_vocab_size=17, tgt_vocab_size=17, d_model=16, n_heads=2, d_ff=32,
                               n_encoder_layers=1, n_decoder_layers=2, dropout=0.0, max_len=16, pad_id=PAD,
                               bos_id=1, eos_id=2)  # fmt: skip
    return Transformer(config).eval()


def _recording(model):
    """The output layer's logits at the newest position of every call, (rows, vocab), until handle.remove()."""
    calls: list[torch.Tensor] = []
    def hook(module, args, out):  # (rows, T, vocab), or (rows, vocab) where only the last position was given
        calls.append((out if out.dim() == 2 else out[:, -1]).detach().clone())

    handle = model.generator.register_forward_hook(hook)
    return calls, handle


def _reference(model, source: list[int], ys: list[list[int]]) -> torch.Tensor:
    """(rows, vocab) logits after each row of ys, one full pass over the unpadded source."""
    with torch.no_grad():
        memory = model.encode(torch.tensor([source]).expand(len(ys), -1))
        return model.generator(model.decode(torch.tensor(ys), memory))[:, -1]


@pytest.mark.parametrize("cache", [True, False])
def test_greedy_ignores_the_padding_at_the_end_of_a_source(cache):
    model = _model()
    calls, handle = _recording(model)
    out = greedy(model, SOURCE + [PAD, PAD, PAD], max_len=5, cache=cache, stop_at_eos=False)
    handle.remove()
    assert len(calls) == len(out) == 5
    for t, logits in enumerate(calls):
        expected = _reference(model, SOURCE, [[1, *out[:t]]])
        assert torch.allclose(logits, expected, atol=1e-5), (t, (logits - expected).abs().max())


def test_beam_search_ignores_the_padding_at_the_end_of_a_source_in_every_beam():
    """Uncached, each beam's whole prefix is fed, so every step is checked against a full pass; the cached run
    must give the same logits, beam for beam (it feeds only the newest tokens)."""
    model = _model()
    fed: list[list[list[int]]] = []
    decode = model.decode

    def recording(tgt, *args, **kwargs):
        fed.append(tgt.tolist())
        return decode(tgt, *args, **kwargs)

    model.decode = recording
    runs = {}
    for cache in (False, True):
        calls, handle = _recording(model)
        runs[cache] = beam_search(model, SOURCE + [PAD, PAD], max_len=4, k=3, cache=cache, length_penalty=0.0), calls
        handle.remove()
        if not cache:
            prefixes = list(fed)
    (best, plain), (best_cached, cached) = runs[False], runs[True]
    assert best == best_cached and len(plain) == len(cached) >= 3 and plain[1].shape[0] == 3  # 3 beams
    for t, (ys, logits) in enumerate(zip(prefixes, plain)):
        expected = _reference(model, SOURCE, ys)
        assert torch.allclose(logits, expected, atol=1e-5), (t, (logits - expected).abs().max())
    for t, (a, b) in enumerate(zip(cached, plain)):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5), t


@pytest.mark.parametrize("cache", [True, False])
def test_batched_greedy_gives_each_padded_row_the_logits_of_that_row_alone(cache):
    model = _model()
    rows = [SOURCE, [6, 11, 3, PAD, PAD], [8, PAD, PAD, PAD, PAD]]
    src = torch.tensor([SOURCE + [PAD], *rows[1:]])  # (3, 5)
    calls, handle = _recording(model)
    out = greedy_batch(model, src, src == PAD, max_len=4, cache=cache, stop_at_eos=False)
    handle.remove()
    assert len(calls) == 4 and all(len(r) == 4 for r in out)
    for t, logits in enumerate(calls):  # (3, vocab)
        for b, row in enumerate(rows):
            unpadded = [i for i in row if i != PAD]
            expected = _reference(model, unpadded, [[1, *out[b][:t]]])[0]
            assert torch.allclose(logits[b], expected, atol=1e-5), (t, b)
