"""Between a heatmap's cells and a step's indices: which cell of the tensor a click on (row, column) of the map
of (batch item, head) is, and where a cell of the tensor is drawn — for derivations and their links."""

from __future__ import annotations

from collections.abc import Sequence

from ..recording.trace import HEAD_DIMS, Step


def shown_axes(step: Step) -> list[int]:
    """The axes of the step's tensor that its heatmap draws as (rows, columns), in that order; a step with a
    single drawn axis (token ids) draws it as columns of one row."""
    return [i for i, d in enumerate(step.dims) if d not in ("batch", *HEAD_DIMS)]


def cell_index(step: Step, batch: int, head: int, row: int, col: int, vocab_ids: Sequence[int] | None = None
               ) -> tuple[int, ...]:  # fmt: skip
    """The full index (one entry per axis, in the order of step.dims) of the map cell (row, col) of the heatmap
    for (batch, head). A vocabulary axis shows chosen columns: `vocab_ids` maps them back to ids."""
    axes = shown_axes(step)
    drawn = [col] if len(axes) == 1 else [row, col]
    if vocab_ids is not None and step.dims[axes[-1]] == "vocab":
        drawn[-1] = int(vocab_ids[col])
    index, k = [], 0
    for d in step.dims:
        if d == "batch":
            index.append(batch)
        elif d in HEAD_DIMS:
            index.append(head)
        else:
            index.append(drawn[k])
            k += 1
    return tuple(index)


def map_cell(step: Step, index: Sequence[int], vocab_ids: Sequence[int] | None = None
             ) -> tuple[int, int, tuple[int, int] | None]:  # fmt: skip
    """(batch item, head, (row, col) on that map) of a full index — None for the cell when the map does not show
    it (a vocabulary entry outside the chosen columns)."""
    batch = index[step.dims.index("batch")] if "batch" in step.dims else 0
    head = index[step.dims.index(step.head_dim)] if step.head_dim is not None else 0
    drawn = [index[i] for i in shown_axes(step)]
    if vocab_ids is not None and step.dims[shown_axes(step)[-1]] == "vocab":
        ids = [int(v) for v in vocab_ids]
        if drawn[-1] not in ids:
            return batch, head, None
        drawn[-1] = ids.index(drawn[-1])
    cell = (0, drawn[0]) if len(drawn) == 1 else (drawn[0], drawn[1])
    return batch, head, cell
