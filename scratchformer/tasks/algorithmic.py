"""Algorithmic sequence tasks (copy, reverse, sort) with exact gold alignments.

A source is a run of tokens from a small alphabet (the digits 0–9 by default) written as space-separated
words, e.g. "3 1 4 1 5"; its target is the same tokens copied, reversed, or sorted. ``alignment[j]`` is the
index of the source token that target position ``j`` holds: copy j → j, reverse j → n-1-j, and sort the
stable order (equal tokens keep their source order), so ``target[j] == source[alignment[j]]`` always.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from .splits import Pair

__all__ = ["ALGORITHMIC_TASKS", "DEFAULT_ALPHABET", "DEFAULT_SIZES", "generate_task", "make_task_splits"]

ALGORITHMIC_TASKS = ("copy", "reverse", "sort")
DEFAULT_ALPHABET: tuple[str, ...] = tuple("0123456789")
DEFAULT_SIZES = {"train": 10000, "valid": 500, "test": 500}
MIN_LEN, MAX_LEN = 3, 12


def _order(name: str, tokens: Sequence[str], alphabet: Sequence[str]) -> list[int]:
    n = len(tokens)
    if name == "copy":
        return list(range(n))
    if name == "reverse":
        return list(range(n - 1, -1, -1))
    rank = {token: r for r, token in enumerate(alphabet)}
    return sorted(range(n), key=lambda i: rank[tokens[i]])  # sorted() is stable


def _check(name: str, min_len: int, max_len: int, alphabet: Sequence[str]) -> None:
    if name not in ALGORITHMIC_TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(ALGORITHMIC_TASKS)}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"lengths must satisfy 1 <= min_len <= max_len, not {min_len} and {max_len}")
    if not alphabet or len(set(alphabet)) != len(alphabet):
        raise ValueError("the alphabet must be a non-empty sequence of distinct tokens")
    if any(not token or token != token.strip() or len(token.split()) != 1 for token in alphabet):
        raise ValueError("every alphabet token must be one word without spaces")


def _pair(name: str, tokens: list[str], alphabet: Sequence[str]) -> Pair:
    order = _order(name, tokens, alphabet)
    return Pair(" ".join(tokens), " ".join(tokens[i] for i in order), tuple(order))


def _sample(rng: random.Random, min_len: int, max_len: int, alphabet: Sequence[str]) -> list[str]:
    return [rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len))]


def generate_task(
    name: str,
    n: int,
    seed: int = 0,
    *,
    min_len: int = MIN_LEN,
    max_len: int = MAX_LEN,
    alphabet: Sequence[str] = DEFAULT_ALPHABET,
) -> list[Pair]:
    """`n` independent examples of task `name` ("copy", "reverse" or "sort"); lengths uniform in [min_len, max_len].

    The same arguments always give the same list. Repeats are possible; `make_task_splits` removes them.
    """
    _check(name, min_len, max_len, alphabet)
    if n < 0:
        raise ValueError(f"n must be at least 0, not {n}")
    rng = random.Random(f"{name}:{seed}")
    return [_pair(name, _sample(rng, min_len, max_len, alphabet), alphabet) for _ in range(n)]


def make_task_splits(
    name: str,
    seed: int = 0,
    n_train: int = DEFAULT_SIZES["train"],
    n_valid: int = DEFAULT_SIZES["valid"],
    n_test: int = DEFAULT_SIZES["test"],
    *,
    min_len: int = MIN_LEN,
    max_len: int = MAX_LEN,
    alphabet: Sequence[str] = DEFAULT_ALPHABET,
) -> dict[str, list[Pair]]:
    """Train/valid/test splits of distinct sources (no source is in two splits) for task `name`."""
    _check(name, min_len, max_len, alphabet)
    if min(n_train, n_valid, n_test) < 0:
        raise ValueError("split sizes must be at least 0")
    wanted = n_train + n_valid + n_test
    possible = sum(len(alphabet) ** k for k in range(min_len, max_len + 1))
    if wanted > possible // 2:  # sampling would slow to a crawl long before it ran out
        raise ValueError(
            f"{wanted} distinct examples asked for, but lengths {min_len}–{max_len} over "
            f"{len(alphabet)} tokens allow only {possible}; ask for at most half of that"
        )
    rng = random.Random(f"{name}:{seed}")
    seen: set[str] = set()
    pairs: list[Pair] = []
    while len(pairs) < wanted:
        tokens = _sample(rng, min_len, max_len, alphabet)
        source = " ".join(tokens)
        if source not in seen:
            seen.add(source)
            pairs.append(_pair(name, tokens, alphabet))
    return {
        "train": pairs[n_valid + n_test :],
        "valid": pairs[:n_valid],
        "test": pairs[n_valid : n_valid + n_test],
    }
