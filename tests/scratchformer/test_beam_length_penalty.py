"""Beam search's length normalisation, checked against an exhaustive search that applies Wu et al.'s (2016)
penalty lp(Y) = ((5 + |Y|) / 6)^α written out here, on a model whose next-token distribution is a known table
of its position: the longer a hypothesis, the likelier it ends."""

import itertools
import math

import pytest
import torch
from torch import nn

from scratchformer.config import TransformerConfig
from scratchformer.decoding import beam_search
from scratchformer.model import Transformer

START, END, A, B = 0, 1, 2, 3
# The chance to end grows with the length: P(end | t tokens so far); the rest goes 4 : 1 to A and B.
P_END = [0.2, 0.22, 0.25, 0.3, 0.35, 0.42, 0.5, 0.9]
BUDGET = 7


def probs(t: int) -> list[float]:
    e = P_END[t]
    return [0.0, e, 0.8 * (1 - e), 0.2 * (1 - e)]


class PositionTable(nn.Module):
    """The 'output layer': the position (one-hot, the decoder's hidden state below) picks the row of log-probs."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        table = torch.tensor([probs(t) for t in range(len(P_END))]).clamp_min(1e-30).log()  # (positions, 4)
        return hidden @ table  # (n, positions) one-hot → (n, 4)


def table_model() -> Transformer:
    config = TransformerConfig(d_model=4, n_heads=1, d_ff=4, n_encoder_layers=0, n_decoder_layers=1, dropout=0.0,
                               src_vocab_size=4, tgt_vocab_size=4, max_len=32, bos_id=START, eos_id=END)  # fmt: skip
    model = Transformer(config).eval()

    def decode(tgt, *args, offset=0, **kwargs):  # the last row's position = tokens generated before it
        positions = offset + torch.arange(tgt.shape[1])
        return nn.functional.one_hot(positions, len(P_END)).float().expand(tgt.shape[0], -1, -1)  # (n, T, P)

    model.decode = decode
    model.generator = PositionTable()
    return model


def log_prob(tokens: list[int], ended: bool) -> float:
    chosen = tokens + ([END] if ended else [])
    return sum(math.log(probs(t)[token]) for t, token in enumerate(chosen))


def exhaustive_best(alpha: float) -> list[int]:
    """Every hypothesis within the budget: ended ones (|Y| counts the end token) and the unfinished ones the
    budget cuts off (|Y| = their tokens), each scored log P(Y) / lp(|Y|)."""
    lp = lambda n: ((5 + n) / 6) ** alpha  # noqa: E731
    scored = []
    for n in range(BUDGET):
        for tokens in itertools.product((A, B), repeat=n):
            scored.append((log_prob(list(tokens), True) / lp(n + 1), list(tokens)))
    for tokens in itertools.product((A, B), repeat=BUDGET):
        scored.append((log_prob(list(tokens), False) / lp(BUDGET), list(tokens)))
    return max(scored)[1]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5, 2.0])
def test_a_wide_beam_finds_the_best_normalised_hypothesis(alpha):
    model = table_model()
    wide = 2 ** (BUDGET + 1)  # more beams than hypotheses: beam search is exhaustive
    assert beam_search(model, None, BUDGET, k=wide, length_penalty=alpha) == exhaustive_best(alpha)


def test_the_penalty_changes_which_hypothesis_wins():
    """Without it the shortest likely ending wins; with a strong one, longer hypotheses do — so the tests above
    would notice a penalty that were ignored, inverted or computed from the wrong length."""
    winners = [exhaustive_best(a) for a in (0.0, 1.5, 2.0)]
    assert [len(w) for w in winners] == [0, 4, 6]
