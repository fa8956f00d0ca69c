"""How many tokens decoding writes when the model never says "stop": what was asked for, but never more than the
decoder's positions hold. A model of max_len 16 reads the start token and at most 15 more; a prompt (prefix)
takes its own positions out of those. Worked out by hand from max_len and the prefix's length."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scratchformer import Transformer, TransformerConfig
from scratchformer.running.decoding import beam_search, greedy, greedy_batch

MAX_LEN, END = 16, 2


def _never_ends(n_encoder_layers: int = 1) -> Transformer:
    torch.manual_seed(1)
    config = TransformerConfig(src_vocab_size=13, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=16,
                               n_encoder_layers=n_encoder_layers, n_decoder_layers=1, dropout=0.0, max_len=MAX_LEN,
                               bos_id=1, eos_id=END, final_logits_bias=True)  # fmt: skip
    model = Transformer(config).eval()
    with torch.no_grad():
        model.generator.final_logits_bias[END] = -50.0  # the end token never wins
    return model


@pytest.mark.parametrize("cache", [True, False])
def test_decoding_stops_at_the_model_s_last_position(cache):
    model = _never_ends()
    src = [5, 6, 7]
    assert len(greedy(model, src, 100, cache=cache)) == MAX_LEN - 1 == 15
    assert len(greedy(model, src, 100, cache=cache, prefix=[4, 5, 6])) == 12
    assert len(beam_search(model, src, 100, k=2, cache=cache)) == 15
    assert [len(r) for r in greedy_batch(model, torch.tensor([src, src]), None, 100, cache=cache)] == [15, 15]


def test_fewer_tokens_than_the_positions_hold_are_written_when_asked():
    model = _never_ends()
    assert len(greedy(model, [5, 6, 7], 4)) == 4
    assert len(beam_search(model, [5, 6, 7], 4, k=2)) == 4
    assert [len(r) for r in greedy_batch(model, torch.tensor([[5, 6, 7]]), None, 4)] == [4]


def test_a_prompt_that_fills_every_position_leaves_nothing_to_write():
    model = _never_ends(n_encoder_layers=0)
    assert greedy(model, [], 10, prefix=[4] * (MAX_LEN - 1)) == []  # the start token + 15 = all 16 positions
    assert len(greedy(model, [], 10, prefix=[4] * (MAX_LEN - 2))) == 1  # one position left: one token
    assert greedy(model, [], 0) == [] and beam_search(model, [], 0) == []


def _scripted(script: list[list[int]]) -> Transformer:
    """A model that writes script[r] for the source [r]: its decoder reads the row from the (stand-in) encoder
    output and the position from the offset, and the output layer looks the token up."""
    config = TransformerConfig(src_vocab_size=13, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=16,
                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=MAX_LEN, bos_id=1,
                               eos_id=END)  # fmt: skip
    model = Transformer(config).eval()
    width = len(script[0])
    table = torch.full((len(script) * width, 13), -10.0)
    for r, tokens in enumerate(script):
        for t, token in enumerate(tokens):
            table[r * width + t, token] = 10.0

    def decode(tgt, memory, *args, offset=0, **kwargs):
        rows = memory[:, 0, 0].long()[:, None]  # (B, 1)
        positions = offset + torch.arange(tgt.shape[1])[None]  # (1, T)
        return nn.functional.one_hot(rows * width + positions, len(table)).float()  # (B, T, rows · width)

    class Lookup(nn.Module):
        def forward(self, hidden):
            return hidden @ table

    model.encode = lambda src, src_pad=None: src.float()[..., None]  # (B, S, 1): the row number
    model.decode = decode
    model.generator = Lookup()
    return model


def test_a_batch_stops_as_soon_as_every_row_has_ended():
    """Row 0 ends at its 2nd token (and would go on writing 6 after it), row 1 at its 4th: the batch takes 4
    steps, not the 8 asked for, and each row is cut before its own end token."""
    model = _scripted([[5, END, 6, 6, 6, 6, 6, 6], [5, 5, 5, END, 7, 7, 7, 7]])
    calls = []
    model.generator.register_forward_hook(lambda m, args, out: calls.append(1))
    for cache in (True, False):
        calls.clear()
        assert greedy_batch(model, torch.tensor([[0], [1]]), None, 8, cache=cache) == [[5], [5, 5, 5]]
        assert len(calls) == 4, cache
    calls.clear()
    rows = greedy_batch(model, torch.tensor([[0], [1]]), None, 8, stop_at_eos=False)
    assert rows == [[5, END, 6, 6, 6, 6, 6, 6], [5, 5, 5, END, 7, 7, 7, 7]] and len(calls) == 8
