"""What beam search does when it is called without options, as the translate command and the GUI call it: 4 beams,
Wu et al.'s length penalty with α = 0.6 (the paper's §6.1 settings) and the KV cache. Every other test passes these
options explicitly, so a changed default went unnoticed. The beam size is read from the rows the decoder is given,
the penalty from an exhaustive search over a model whose next-token table is known, the cache from the tokens the
decoder is fed at each step."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.errors import UserError
from scratchformer.running.decoding import beam_search, greedy, greedy_batch
from tests.scratchformer.beam_tables import BUDGET, LATER_AND_LATER, A, exhaustive_best, table_model

P_END = LATER_AND_LATER  # α = 0, 0.6, 1 and 1.6 each make a hypothesis of another length win


def test_the_table_tells_the_penalties_apart():
    assert [len(exhaustive_best(P_END, a)) for a in (0.0, 0.6, 1.0, 1.6)] == [0, 2, 4, 6]


def test_the_default_length_penalty_is_alpha_0_6():
    wide = 2 ** (BUDGET + 1)  # more beams than hypotheses: the search is exhaustive
    assert beam_search(table_model(P_END)[0], None, BUDGET, k=wide) == exhaustive_best(P_END, 0.6) == [A, A]


def _model() -> Transformer:
    torch.manual_seed(3)
    config = TransformerConfig(src_vocab_size=13, tgt_vocab_size=13, d_model=8, n_heads=2, d_ff=16,
                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=16, bos_id=1, eos_id=2)
    return Transformer(config).eval()


def _fed(model) -> list[tuple[int, ...]]:
    """The shape of every decoder input from now on: (rows, positions fed)."""
    shapes: list[tuple[int, ...]] = []
    decode = model.decode

    def recording(tgt, *args, **kwargs):
        shapes.append(tuple(tgt.shape))
        return decode(tgt, *args, **kwargs)

    model.decode = recording
    return shapes


def test_the_default_beam_size_is_4():
    """Step 1 extends the start token alone; from step 2 on the decoder reads one row per beam. (Step 1 offers 8
    candidates, at most one of them the end token, so 4 beams are alive at step 2 whatever the weights.)"""
    model = _model()
    fed = _fed(model)
    beam_search(model, [5, 6, 7, 8], max_len=3)
    assert [rows for rows, _ in fed[:2]] == [1, 4]


def test_beam_search_greedy_and_batched_greedy_use_the_kv_cache_by_default():
    """After the first step only the newest token of each row is fed; without the cache the whole prefix is."""
    model = _model()
    fed = _fed(model)
    beam_search(model, [5, 6, 7, 8], max_len=3, k=2)
    assert [t for _, t in fed] == [1, 1, 1]
    fed.clear()
    greedy(model, [5, 6, 7, 8], max_len=3, stop_at_eos=False, prefix=[4, 9])
    assert [t for _, t in fed] == [3, 1, 1]  # the start token and the prefix at once, then one token a step
    fed.clear()
    greedy_batch(model, torch.tensor([[5, 6, 7, 8]]), None, max_len=3, stop_at_eos=False)
    assert [t for _, t in fed] == [1, 1, 1]
    fed.clear()
    beam_search(model, [5, 6, 7, 8], max_len=3, k=2, cache=False)  # the contrast: the prefix grows
    assert [t for _, t in fed] == [1, 2, 3]


@pytest.mark.parametrize("k", [0, -2])
def test_a_beam_size_below_1_is_refused_with_its_value(k):
    with pytest.raises(UserError) as error:
        beam_search(_model(), [5, 6], 5, k=k)
    assert str(error.value) == f"The beam size must be at least 1, not {k}."
