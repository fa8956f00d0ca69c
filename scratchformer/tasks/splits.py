"""The `Pair` type shared by every task, and reading/writing pairs as tab-separated text.

On disk a pair is one line ``source<TAB>target<TAB>alignment``: UTF-8, words separated by single spaces,
and the alignment as space-separated integers, one per target word (``alignment[j]`` is the index of
the source word that target word ``j`` translates). Files a user brings may leave the alignment out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pair", "read_pairs_tsv", "read_tsv", "write_tsv"]


@dataclass(frozen=True)
class Pair:
    """One source/target sentence pair with its gold word alignment (empty when unknown)."""

    source: str
    target: str
    alignment: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        alignment = tuple(int(i) for i in self.alignment)
        object.__setattr__(self, "alignment", alignment)
        if not alignment:
            return
        n_source, n_target = len(self.source.split()), len(self.target.split())
        if len(alignment) != n_target:
            raise ValueError(f"the alignment has {len(alignment)} indices but the target has {n_target} words")
        bad = [i for i in alignment if not 0 <= i < n_source]
        if bad:
            raise ValueError(f"alignment index {bad[0]} is outside the {n_source} source words")

    @property
    def source_tokens(self) -> list[str]:
        return self.source.split()

    @property
    def target_tokens(self) -> list[str]:
        return self.target.split()


def _check_cell(text: str, what: str) -> None:
    if "\t" in text or "\n" in text or "\r" in text:
        raise ValueError(f"the {what} {text!r} contains a tab or a line break and cannot be written as TSV")


def write_tsv(pairs: Iterable[Pair], path: str | Path) -> None:
    """Write pairs as UTF-8 ``source<TAB>target<TAB>alignment`` lines with ``\\n`` line ends."""
    lines = []
    for pair in pairs:
        _check_cell(pair.source, "source")
        _check_cell(pair.target, "target")
        lines.append(f"{pair.source}\t{pair.target}\t{' '.join(str(i) for i in pair.alignment)}\n")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(lines)


def _columns(n: int) -> str:
    return f"{n} column" if n == 1 else f"{n} columns"


def _read_lines(path: Path) -> list[tuple[int, str]]:
    """The non-blank lines of a UTF-8 text file with their 1-based line numbers; ValueError if unreadable."""
    if not path.exists():
        raise ValueError(f"{path} does not exist.")
    if not path.is_file():
        raise ValueError(f"{path} is not a file.")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text.") from None
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror or exc}).") from None
    lines = [(n, line.rstrip("\r")) for n, line in enumerate(text.split("\n"), start=1)]
    lines = [(n, line) for n, line in lines if line.strip()]
    if not lines:
        raise ValueError(f"{path} is empty.")
    return lines


def _parse(path: str | Path, *, need_alignment: bool) -> list[Pair]:
    path = Path(path)
    expected = "source<TAB>target<TAB>alignment" if need_alignment else "source<TAB>target"
    allowed = (3,) if need_alignment else (2, 3)
    pairs = []
    for n, line in _read_lines(path):
        cells = line.split("\t")
        if len(cells) not in allowed:
            extra = "" if need_alignment else " (optionally followed by <TAB>alignment)"
            raise ValueError(f"{path}: line {n} has {_columns(len(cells))}; expected {expected}{extra}.")
        source, target = (" ".join(cell.split()) for cell in cells[:2])
        if not source:
            raise ValueError(f"{path}: line {n} has an empty source.")
        if not target:
            raise ValueError(f"{path}: line {n} has an empty target.")
        alignment: tuple[int, ...] = ()
        if need_alignment and not cells[2].strip():
            raise ValueError(f"{path}: line {n} has an empty alignment.")
        if len(cells) == 3 and cells[2].strip():
            try:
                alignment = tuple(int(i) for i in cells[2].split())
                pairs.append(Pair(source, target, alignment))
            except ValueError as exc:
                reason = str(exc) if alignment else "it is not a list of space-separated integers"
                raise ValueError(f"{path}: line {n} has a bad alignment: {reason}.") from None
            continue
        pairs.append(Pair(source, target))
    return pairs


def read_tsv(path: str | Path) -> list[Pair]:
    """Read a file written by `write_tsv` (three columns on every line); ValueError on any problem."""
    return _parse(path, need_alignment=True)


def read_pairs_tsv(path: str | Path) -> list[Pair]:
    """Read a user's TSV of ``source<TAB>target`` lines, with an optional third alignment column.

    Blank lines are skipped and runs of spaces inside a cell are collapsed. Every problem (missing file,
    not UTF-8, empty, wrong number of columns, empty cell, bad alignment) raises ValueError with one
    sentence that names the file and, where it applies, the line.
    """
    return _parse(path, need_alignment=False)
