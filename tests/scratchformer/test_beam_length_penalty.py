"""Beam search's length normalisation, checked against an exhaustive search that applies Wu et al.'s (2016)
penalty lp(Y) = ((5 + |Y|) / 6)^α written out here, on a model whose next-token distribution is a known table
of its position: the longer a hypothesis, the likelier it ends."""

import pytest

from scratchformer.running.decoding import beam_search
from tests.scratchformer.beam_tables import BUDGET, exhaustive_best, table_model

# The chance to end grows with the length: P(end | t tokens so far); the rest goes 4 : 1 to A and B.
P_END = [0.2, 0.22, 0.25, 0.3, 0.35, 0.42, 0.5, 0.9]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5, 2.0])
def test_a_wide_beam_finds_the_best_normalised_hypothesis(alpha):
    model, _ = table_model(P_END)
    wide = 2 ** (BUDGET + 1)  # more beams than hypotheses: beam search is exhaustive
    assert beam_search(model, None, BUDGET, k=wide, length_penalty=alpha) == exhaustive_best(P_END, alpha)


def test_the_penalty_changes_which_hypothesis_wins():
    """Without it the shortest likely ending wins; with a strong one, longer hypotheses do — so the tests above
    would notice a penalty that were ignored, inverted or computed from the wrong length."""
    winners = [exhaustive_best(P_END, a) for a in (0.0, 1.5, 2.0)]
    assert [len(w) for w in winners] == [0, 4, 6]
