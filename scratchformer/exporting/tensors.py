"""Tensors to files: `.npz` (arrays + token labels + step names, kinds and dims) and `.csv` for 2-D maps.

npz layout (read with `np.load(path)`, no pickle needed):
    steps                 (N,) str     the exported step names, in trace order
    <name>                the step's tensor, dtype kept (float32, int64 token ids, bool masks)
    dims:<name>           (ndim,) str  one name per axis (batch, head, src_pos, …)
    kind:<name>, title:<name>, formula:<name>   0-d str
    source_tokens, target_tokens   (B, L) str  token labels per batch item ("" pads ragged rows)
CSV layout: the corner cell names the axes ("tgt_pos \\ src_pos"), the header row holds the column labels and
the first column the row labels (tokens for token axes, "d_model 3" for others); values as float32's shortest
round-trip text, masked cells as -inf. UTF-8 without BOM.
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from ..plotdata import VocabLabels, axis_labels, head_count, matrix_of
from ..recording.trace import Step, Trace


def _token_table(rows: list[list[str]]) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    table = np.full((len(rows), width), "", dtype=object)
    for i, r in enumerate(rows):
        table[i, : len(r)] = r
    return table.astype(str) if table.size else np.zeros((len(rows), 0), dtype="<U1")


def npz_entries(trace: Trace, steps: Sequence[Step]) -> Iterator[tuple[str, np.ndarray]]:
    """The arrays of an npz export, one at a time: a lazy trace recomputes each step's tensor as it comes."""
    yield "steps", np.array([s.name for s in steps], dtype=str)
    for s in steps:
        yield s.name, s.tensor.numpy()
        yield f"dims:{s.name}", np.array(s.dims, dtype=str)
        yield f"kind:{s.name}", np.array(s.kind)
        yield f"title:{s.name}", np.array(s.title)
        yield f"formula:{s.name}", np.array(s.formula)
    yield "source_tokens", _token_table(trace.source_tokens)
    yield "target_tokens", _token_table(trace.target_tokens)


def write_npz(f: BinaryIO, trace: Trace, steps: Sequence[Step]) -> None:
    """What np.savez_compressed writes (a zip of .npy members, read back by np.load), but written array by
    array, so exporting every step of a long run never holds all of them at once."""
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        for key, array in npz_entries(trace, steps):
            with zf.open(f"{key}.npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


@dataclass
class Matrix:
    """A labelled 2-D slice of a step: what one CSV file holds."""

    suffix: str  # "" or ".head3" / ".item2.head3" for the file name
    values: np.ndarray  # (rows, cols)
    row_labels: list[str]
    col_labels: list[str]
    row_dim: str
    col_dim: str
    head: int | None  # 1-based
    batch: int  # 0-based


def _labels(trace: Trace, dim: str, n: int, batch: int, vocab_labels: VocabLabels | None) -> list[str]:
    if dim == "vocab" and vocab_labels is not None:
        return list(vocab_labels(range(n)))
    return axis_labels(trace, dim, n, batch) or [f"{dim} {i}" for i in range(n)]


@dataclass(frozen=True)
class Slot:
    """One 2-D slice of a step, known before its values are: batch item, head, file-name suffix, shape."""

    batch: int
    head: int  # 0-based
    suffix: str
    heads: int
    row_dim: str
    col_dim: str
    shape: tuple[int, int]


def matrix_slots(step: Step, batch: int = 0, all_items: bool = False) -> list[Slot]:
    """The 2-D slices `step_matrices` would give, from the step's shape alone (no tensor is computed)."""
    n_items = step.shape[step.dims.index("batch")] if "batch" in step.dims else 1
    items = range(n_items) if all_items else [min(batch, n_items - 1)]
    heads = head_count(step)
    kept = [(d, n) for d, n in zip(step.dims, step.shape) if d not in ("batch", "head")]
    if len(kept) == 1:  # as matrix_of: a vector is one row
        (row_dim, rows), (col_dim, cols) = ("row", 1), kept[0]
    elif len(kept) == 2:
        (row_dim, rows), (col_dim, cols) = kept
    else:
        row_dim, rows, (col_dim, cols) = "rows", int(np.prod([n for _, n in kept[:-1]])), kept[-1]
    out = []
    for b in items:
        for h in range(heads):
            suffix = (f".item{b + 1}" if all_items and n_items > 1 else "") + (f".head{h + 1}" if heads > 1 else "")
            out.append(Slot(b, h, suffix, heads, row_dim, col_dim, (rows, cols)))
    return out


def slot_matrix(trace: Trace, step: Step, slot: Slot, vocab_labels: VocabLabels | None = None) -> Matrix:
    """The labelled values of one slot (a lazy trace recomputes the slot's batch item here)."""
    values, row_dim, col_dim = matrix_of(step, slot.batch, slot.head)
    return Matrix(
        slot.suffix, values,
        _labels(trace, row_dim, values.shape[0], slot.batch, vocab_labels),
        _labels(trace, col_dim, values.shape[1], slot.batch, vocab_labels),
        row_dim, col_dim, slot.head + 1 if slot.heads > 1 else None, slot.batch,
    )  # fmt: skip


def step_matrices(
    trace: Trace, step: Step, batch: int = 0, vocab_labels: VocabLabels | None = None, all_items: bool = False
) -> list[Matrix]:
    """The full 2-D slices of a step (every head; one batch item, or every item with `all_items`).
    Unlike the heatmap, a vocabulary axis keeps all its columns."""
    return [slot_matrix(trace, step, slot, vocab_labels) for slot in matrix_slots(step, batch, all_items)]


def _cells(values: np.ndarray) -> list[list[str]]:
    if values.dtype == np.bool_:
        values = values.astype(np.int8)
    if np.issubdtype(values.dtype, np.floating):
        values = values.astype(np.float32)  # str(np.float32) is the shortest text that reads back exactly
        return [[str(v) for v in row] for row in values]
    return [[str(v) for v in row] for row in values.tolist()]


def write_csv(f: BinaryIO, matrix: Matrix) -> None:
    text = io.StringIO(newline="")
    w = csv.writer(text)  # "\r\n" line ends: a token holding "\r" or "\n" gets quoted
    w.writerow([f"{matrix.row_dim} \\ {matrix.col_dim}"] + matrix.col_labels)
    for label, row in zip(matrix.row_labels, _cells(matrix.values)):
        w.writerow([label] + row)
    f.write(text.getvalue().encode("utf-8"))


def read_csv(path) -> tuple[list[str], list[str], np.ndarray]:
    """(row labels, column labels, float32 values) of a CSV written by write_csv."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    cols = rows[0][1:]
    labels = [r[0] for r in rows[1:]]
    values = np.array([[float(x) for x in r[1:]] for r in rows[1:]], dtype=np.float32)
    return labels, cols, values.reshape(len(labels), len(cols))
