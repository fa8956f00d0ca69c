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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from ..plotdata import VocabLabels, axis_labels, head_count, matrix_of
from ..trace import Step, Trace


def _token_table(rows: list[list[str]]) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    table = np.full((len(rows), width), "", dtype=object)
    for i, r in enumerate(rows):
        table[i, : len(r)] = r
    return table.astype(str) if table.size else np.zeros((len(rows), 0), dtype="<U1")


def npz_arrays(trace: Trace, steps: Sequence[Step]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {"steps": np.array([s.name for s in steps], dtype=str)}
    for s in steps:
        arrays[s.name] = s.tensor.numpy()
        arrays[f"dims:{s.name}"] = np.array(s.dims, dtype=str)
        arrays[f"kind:{s.name}"] = np.array(s.kind)
        arrays[f"title:{s.name}"] = np.array(s.title)
        arrays[f"formula:{s.name}"] = np.array(s.formula)
    arrays["source_tokens"] = _token_table(trace.source_tokens)
    arrays["target_tokens"] = _token_table(trace.target_tokens)
    return arrays


def write_npz(f: BinaryIO, trace: Trace, steps: Sequence[Step]) -> None:
    np.savez_compressed(f, **npz_arrays(trace, steps))


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


def step_matrices(
    trace: Trace, step: Step, batch: int = 0, vocab_labels: VocabLabels | None = None, all_items: bool = False
) -> list[Matrix]:
    """The full 2-D slices of a step (every head; one batch item, or every item with `all_items`).
    Unlike the heatmap, a vocabulary axis keeps all its columns."""
    n_items = step.shape[step.dims.index("batch")] if "batch" in step.dims else 1
    items = range(n_items) if all_items else [min(batch, n_items - 1)]
    heads = head_count(step)
    out = []
    for b in items:
        for h in range(heads):
            values, row_dim, col_dim = matrix_of(step, b, h)
            suffix = f".item{b + 1}" if all_items and n_items > 1 else ""
            suffix += f".head{h + 1}" if heads > 1 else ""
            out.append(
                Matrix(
                    suffix, values,
                    _labels(trace, row_dim, values.shape[0], b, vocab_labels),
                    _labels(trace, col_dim, values.shape[1], b, vocab_labels),
                    row_dim, col_dim, h + 1 if heads > 1 else None, b,
                )
            )  # fmt: skip
    return out


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
