"""A pairs file: the clean and corrupted inputs of many patching sweeps, one pair a record.

JSONL (one object a line) or CSV (a header line naming the columns), with the fields

    source         the clean input (required)
    corrupt        the corrupted input, the same number of tokens   } exactly one of the two
    corrupt_word   "I=WORD": the source with word I (from 0) replaced }
    target         the decoder input after the start token (optional; teacher forcing)
    answer, wrong  the metric's two tokens (optional: the clean and corrupted runs' top tokens)

Other fields are ignored (an IOI set's template or name columns may stay). Empty CSV cells and JSON nulls count
as absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from .corruption import replace_word
from .lines import checked_path, csv_records, jsonl_records

FIELDS = ("source", "target", "corrupt", "corrupt_word", "answer", "wrong")
WHAT = "The pairs file"


@dataclass(frozen=True)
class PairSpec:
    """One pair as the file gives it, the corruption already applied; `line` is where its record starts."""

    source: str
    target: str | None
    corrupt: str
    answer: str | None
    wrong: str | None
    line: int = 0


def read_pairs(path: str | Path) -> list[PairSpec]:
    """Every pair of a JSONL or CSV pairs file, in file order; one UserError sentence (with the line) otherwise."""
    p = checked_path(path, WHAT)
    pairs = [_pair(record, number, p) for number, record in _records(p)]
    if not pairs:
        raise UserError(f"The pairs file {p.name!r} holds no pairs: every line is blank.")
    return pairs


def _records(p: Path) -> Iterator[tuple[int, dict]]:
    suffix = p.suffix.lower()
    if suffix == ".jsonl":
        return jsonl_records(p, WHAT)
    if suffix == ".csv":
        return csv_records(p, WHAT, "source")
    raise UserError(f"The pairs file {p.name!r} must be JSONL (.jsonl, one object a line) or CSV (.csv, a header "
                    "line naming source, corrupt or corrupt_word, …).")  # fmt: skip


def _text(record: dict, key: str, number: int, p: Path, strip: bool = True) -> str | None:
    """The field as text (stripped unless `strip` is false: a metric token keeps its leading space, GPT-2's
    ' Mary' is not 'Mary'); None when absent, null, empty or only spaces."""
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise UserError(f"The pairs file {p.name!r}, line {number}: {key!r} must be text, not "
                        f"{type(value).__name__} {value!r}.")  # fmt: skip
    if not value.strip():
        return None
    return value.strip() if strip else value


def _pair(record: dict, number: int, p: Path) -> PairSpec:
    source = _text(record, "source", number, p)
    if source is None:
        raise UserError(f"The pairs file {p.name!r}, line {number}: the pair has no \"source\" (the clean "
                        "input).")  # fmt: skip
    corrupt, word = _text(record, "corrupt", number, p), _text(record, "corrupt_word", number, p)
    if (corrupt is None) == (word is None):
        said = "both" if corrupt is not None else "neither"
        raise UserError(f"The pairs file {p.name!r}, line {number}: give a pair either \"corrupt\" (the corrupted "
                        f"input) or \"corrupt_word\" (\"I=WORD\"), not {said}.")  # fmt: skip
    if word is not None:
        try:
            corrupt = replace_word(source, word, "corrupt_word")
        except UserError as exc:
            raise UserError(f"The pairs file {p.name!r}, line {number}: {exc}") from None
    token = lambda key: _text(record, key, number, p, strip=False)  # noqa: E731
    return PairSpec(source, _text(record, "target", number, p), corrupt, token("answer"), token("wrong"), number)
