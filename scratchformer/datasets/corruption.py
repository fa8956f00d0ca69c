"""The corrupt_word rule of a patching sweep: the clean sentence with one word replaced (I=WORD: words split at
spaces and counted from 0). The command line's --corrupt-word and a pairs file's corrupt_word both use it."""

from __future__ import annotations

from ..errors import UserError


def replace_word(source: str, spec: str, option: str = "--corrupt-word") -> str:
    """`source` with word I replaced by WORD, for spec 'I=WORD'; `option` names the spec in the sentence of a
    malformed one."""
    index, eq, word = spec.partition("=")
    words = source.split()
    if not eq or not index.strip().isdigit() or not word.strip():
        raise UserError(f"{option} {spec!r}: write I=WORD, the word's number from 0 and its replacement, e.g. "
                        "1=dog.")  # fmt: skip
    i = int(index)
    if i >= len(words):
        raise UserError(f"{option} {spec!r}: the source has words 0 to {len(words) - 1}.")
    words[i] = word.strip()
    return " ".join(words)
