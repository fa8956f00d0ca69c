"""Decoders whose next-token distribution is a known table of the position, for beam-search tests: the chance to
end after t tokens is p_end[t], the rest goes 4 : 1 to the tokens A and B. With such a table, the best hypothesis
under Wu et al.'s (2016) length penalty lp(Y) = ((5 + |Y|) / 6)^α can be found by trying every one."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from scratchformer import Transformer, TransformerConfig

START, END, A, B = 0, 1, 2, 3
BUDGET = 7
# A table on which α = 0, 0.6, 1 and 1.6 make a hypothesis of another length win: 0, 2, 4 and 6 tokens (found by a
# search over tables); the best one of each length is all A.
LATER_AND_LATER = [0.11, 0.15, 0.19, 0.2, 0.3, 0.36, 0.52, 0.61]


def probs(p_end: list[float], t: int) -> list[float]:
    """P(start, end, A, B | t tokens so far)."""
    e = p_end[t]
    return [0.0, e, 0.8 * (1 - e), 0.2 * (1 - e)]


def table_model(p_end: list[float]) -> tuple[Transformer, list[int]]:
    """A decoder whose output at position t is log probs(p_end, t), whatever the tokens; also the list of the rows
    the decoder was given at each call (one entry per call)."""
    config = TransformerConfig(d_model=4, n_heads=1, d_ff=4, n_encoder_layers=0, n_decoder_layers=1, dropout=0.0,
                               src_vocab_size=4, tgt_vocab_size=4, max_len=32, bos_id=START, eos_id=END)  # fmt: skip
    model = Transformer(config).eval()
    table = torch.tensor([probs(p_end, t) for t in range(len(p_end))]).clamp_min(1e-30).log()  # (P, 4)
    calls: list[int] = []

    def decode(tgt, *args, offset=0, **kwargs):  # one-hot of each row's position
        calls.append(tgt.shape[0])
        positions = offset + torch.arange(tgt.shape[1])
        return nn.functional.one_hot(positions, len(p_end)).float().expand(tgt.shape[0], -1, -1)  # (n, T, P)

    class Table(nn.Module):
        def forward(self, hidden):  # (n, T, P) or (n, P) one-hot → log-probs over the 4 tokens
            return hidden @ table

    model.decode = decode
    model.generator = Table()
    return model, calls


def exhaustive_best(p_end: list[float], alpha: float, budget: int = BUDGET) -> list[int]:
    """argmax of log P(Y) / lp(|Y|) over every hypothesis within the budget: the ended ones (|Y| counts the end
    token) and the unfinished ones the budget cuts off (|Y| = their tokens)."""
    def log_p(tokens, ended):
        chosen = list(tokens) + ([END] if ended else [])
        return sum(math.log(probs(p_end, t)[tok]) for t, tok in enumerate(chosen))

    lp = lambda n: ((5 + n) / 6) ** alpha  # noqa: E731
    scored = [(log_p(ts, True) / lp(n + 1), list(ts))
              for n in range(budget) for ts in itertools.product((A, B), repeat=n)]
    scored += [(log_p(ts, False) / lp(budget), list(ts)) for ts in itertools.product((A, B), repeat=budget)]
    return max(scored)[1]
