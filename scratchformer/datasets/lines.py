"""A data file read one line at a time: the lines decoded as UTF-8 as they are reached (a bad byte is named with
its line), and the records of a JSONL or CSV file as (line number, field → value).

Nothing is read before it is asked for, so a reader that stops at its limit never touches the rest of a large
file.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import UserError


def checked_path(path: str | Path, what: str) -> Path:
    """The path of an existing file, or one UserError sentence: missing, or a folder. `what` names the file in the
    sentence ('The corpus', 'The pairs file')."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UserError(f"{what} {str(path)!r} does not exist.")
    if p.is_dir():
        raise UserError(f"{what} {str(path)!r} is a folder; give a file.")
    return p


def numbered_lines(path: Path, what: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, the line without its line end), decoded one line at a time."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"{what} {path.name!r} is not UTF-8 text: line {number} holds the byte "
                                f"0x{raw[exc.start]:02x}.") from None  # fmt: skip
            if number == 1:
                text = text.removeprefix("\ufeff")  # a byte-order mark that some editors write
            yield number, text.rstrip("\r\n")


def jsonl_records(path: Path, what: str) -> Iterator[tuple[int, dict]]:
    """Each non-blank line of a JSONL file as (line number, object)."""
    for number, line in numbered_lines(path, what):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{what} {path.name!r}, line {number}: not JSON ({exc.msg}).") from None
        if not isinstance(value, dict):
            raise UserError(f"{what} {path.name!r}, line {number}: each line must be one JSON object "
                            f"({{\"source\": …}}), not a {type(value).__name__}.")  # fmt: skip
        yield number, value


def _row(reader, path: Path, what: str, line: int) -> list[str] | None:
    """The CSV reader's next row (None at the end), or one sentence naming the line that is not CSV."""
    try:
        return next(reader, None)
    except csv.Error as exc:
        raise UserError(f"{what} {path.name!r}, line {line}: not CSV ({exc}).") from None


def csv_records(path: Path, what: str, required: str) -> Iterator[tuple[int, dict]]:
    """Each non-blank row of a CSV file with a header line as (line number where the row starts, column →
    text). The header must name the column `required`."""
    lines = (line for _, line in numbered_lines(path, what))
    reader = csv.reader(lines)
    header = _row(reader, path, what, 1)
    if header is None:
        return
    header = [h.strip() for h in header]
    if required not in header:
        raise UserError(f"{what} {path.name!r}: its first line must name the columns, one of them {required!r} "
                        f"(it names {', '.join(repr(h) for h in header) or 'none'}).")  # fmt: skip
    while True:
        start = reader.line_num + 1
        row = _row(reader, path, what, start)
        if row is None:
            return
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            raise UserError(f"{what} {path.name!r}, line {start}: {len(row)} cells under a header of "
                            f"{len(header)} columns.")  # fmt: skip
        yield start, dict(zip(header, row))
