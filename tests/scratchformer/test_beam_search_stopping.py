"""When beam search stops, and what it returns then, on models whose next-token table is known (the chance to
end after t tokens is P_END[t], the rest goes 4 : 1 to the tokens A and B). A beam of 2 to 4 finds the hypothesis
an exhaustive search finds; the search stops as soon as k hypotheses have ended and no active one scores better
(the steps are counted by hand); and hypotheses the budget cuts off are scored by their own length."""

from __future__ import annotations

import pytest

from scratchformer.running.decoding import beam_search
from tests.scratchformer.beam_tables import BUDGET, LATER_AND_LATER, A, exhaustive_best, table_model


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("alpha", [0.6, 1.0, 1.6])
def test_a_narrow_beam_finds_the_best_hypothesis_of_the_table(k, alpha, cache):
    """On this table the best hypothesis of each length is all A, so a few beams suffice: stopping too early (as
    soon as k hypotheses ended, or before) or too late would return another length."""
    model, _ = table_model(LATER_AND_LATER)
    expected = exhaustive_best(LATER_AND_LATER, alpha)
    assert beam_search(model, None, BUDGET, k=k, length_penalty=alpha, cache=cache) == expected
    assert len(expected) == {0.6: 2, 1.0: 4, 1.6: 6}[alpha]


def test_the_search_stops_once_k_hypotheses_ended_and_none_still_active_scores_better():
    """P(end) = 0.9 at every step, α = 0.6, lp(n) = ((5 + n) / 6)^0.6.
    k = 1: step 1 ranks <end> (log 0.9 = −0.105) before A (log 0.08 = −2.53): one hypothesis has ended, and it
    beats A, the active one (−0.105 / lp(1) > −2.53 / lp(2)): 1 step, the empty output.
    k = 2: step 1 ends one hypothesis (<end>) and keeps A and B; step 2 ends A <end> (−2.63) and B <end> (−4.02)
    ahead of the best active one, A A (−5.05): 3 ended ≥ 2, and the best of them (<end>) beats A A: 2 steps."""
    always = [0.9] * 8
    for k, steps in ((1, 1), (2, 2)):
        model, calls = table_model(always)
        assert beam_search(model, None, BUDGET, k=k, length_penalty=0.6) == []
        assert len(calls) == steps, k


def test_hypotheses_the_budget_cuts_off_are_scored_by_their_own_tokens():
    """A table on which, with α = 1, the unfinished A A A A A A A (7 tokens, |Y| = 7) beats every ended one; scored
    with one token fewer it would lose to A <end>."""
    p_end = [0.05, 0.17, 0.19, 0.2, 0.25, 0.3, 0.34, 0.37]
    model, _ = table_model(p_end)
    assert exhaustive_best(p_end, 1.0) == [A] * BUDGET
    assert beam_search(model, None, BUDGET, k=4, length_penalty=1.0) == [A] * BUDGET
