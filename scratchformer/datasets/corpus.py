"""A corpus: the many inputs that features are learned from and analyses average over.

    read_corpus("sentences.txt")      one input a line (blank lines skipped)
    read_corpus("inputs.jsonl")       one JSON object a line, its "source" field
    read_corpus("inputs.csv")         a header line naming a "source" column, one row an input
    read_corpus("task:en-hi")         a bundled task's training sentences (their sources), in the split's order

The file is read line by line and reading stops at `limit` inputs, so a corpus can be larger than memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from ..errors import UserError
from ..tasks import TASKS, load_task_splits
from .lines import checked_path, csv_records, jsonl_records, numbered_lines

TASK_PREFIX = "task:"
WHAT = "The corpus"


def read_corpus(spec: str, limit: int | None = None) -> list[str]:
    """The corpus's inputs, at most `limit` of them (None: all), in file order. One UserError sentence for a
    missing file, a folder, bytes that are not UTF-8, a record without a source, an unknown task, or no inputs."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UserError(f"The corpus limit must be a whole number of inputs from 1, not {limit!r}.")
    if spec.startswith(TASK_PREFIX):
        texts = _task_sources(spec[len(TASK_PREFIX) :].strip(), limit)
    else:
        path = checked_path(spec, WHAT)
        texts = list(islice(_file_sources(path), limit))
    if not texts:
        raise UserError(f"The corpus {spec!r} holds no inputs: every line is blank.")
    return texts


def _task_sources(name: str, limit: int | None) -> list[str]:
    if name not in TASKS:
        raise UserError(f"There is no bundled task {name!r}; the tasks are {', '.join(TASKS)} (write task:NAME).")
    train = load_task_splits(name)["train"]  # (seeded: the same sentences in the same order every time)
    return [p.source for p in train[:limit]]


def _file_sources(path: Path) -> Iterator[str]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        for number, record in jsonl_records(path, WHAT):
            yield _source(record, number, path)
    elif suffix == ".csv":
        for number, record in csv_records(path, WHAT, "source"):
            yield _source(record, number, path)
    else:
        for _, line in numbered_lines(path, WHAT):
            if line.strip():
                yield line.strip()


def _source(record: dict, number: int, path: Path) -> str:
    value = record.get("source")
    if not isinstance(value, str) or not value.strip():
        said = 'has no "source" field' if value is None else 'has an empty or non-text "source"'
        raise UserError(f"The corpus {path.name!r}, line {number}: the record {said}; each record's source is "
                        "the input text.")  # fmt: skip
    return value.strip()
