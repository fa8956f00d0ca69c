"""How many tokens decoding writes when the model never says "stop": what was asked for, but never more than the
decoder's positions hold. A model of max_len 16 reads the start token and at most 15 more; a prompt (prefix)
takes its own positions out of those. Worked out by hand from max_len and the prefix's length."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.decoding import beam_search, greedy, greedy_batch

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
