"""Two runs of the same input side by side: before an intervention, after it, and what it changed.

The window's Compare tab and its Output tab draw from these. Both runs must have the step (same name, same
shape: they read the same inputs). The two maps share one colour scale so that equal colours are equal numbers;
the difference (after − before) is drawn on a diverging map with symmetric levels, so white is "unchanged".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import UserError
from ..recording.trace import Trace, step_path
from .heatmap import (
    DIVERGING,
    MASK,
    Heatmap,
    VocabLabels,
    head_text,
    labelled_heatmap,
    levels_for,
    matrix_of,
    shared_top_columns,
)


@dataclass
class Comparison:
    before: Heatmap
    after: Heatmap
    difference: Heatmap  # after − before; 0 where a cell is masked (−∞) in either run
    largest: float  # max |after − before| over the finite cells


def _heatmap(values, trace, row_dim, col_dim, batch, levels, cmap, title, subtitle, formula, cols=None,
             col_labels=None) -> Heatmap:  # fmt: skip
    extra = {"vocab_ids": cols} if cols is not None else {}
    return labelled_heatmap(values, trace, row_dim, col_dim, batch, levels, cmap, title, subtitle, formula,
                            col_labels, extra)  # fmt: skip


def compare_step(before: Trace, after: Trace, name: str, batch: int = 0, head: int = 0,
                 vocab_labels: VocabLabels | None = None, names: tuple[str, str] = ("Before", "After")
                 ) -> Comparison:  # fmt: skip
    """The step `name` of both runs (one batch item, one head) and their difference. A vocabulary axis keeps the
    columns in either run's top tokens, the same columns in all three maps. `names`: what the two runs are called
    in the titles (a patched run beside the corrupted one: ("Corrupted run", "Patched run"))."""
    a, b = after.find(name), before.find(name)
    if a is None or b is None:
        raise UserError(f"Both runs need the step {name!r} to compare it.")
    if tuple(a.shape) != tuple(b.shape):
        raise UserError(f"The two runs' {name} differ in shape ({b.shape_text()} and {a.shape_text()}); "
                        "only runs of the same input compare.")
    va, row_dim, col_dim = matrix_of(a, batch, head)  # (rows, cols)
    vb, _, _ = matrix_of(b, batch, head)
    cols = col_labels = None
    if col_dim == "vocab":  # the union of both runs' top tokens, after's first
        cols, col_labels = shared_top_columns(va, vb, vocab_labels)
        va, vb = va[:, cols], vb[:, cols]
    masked = np.isneginf(va) | np.isneginf(vb)
    diff = np.zeros(va.shape, dtype=np.float32)  # (rows, cols)
    diff[~masked] = va[~masked] - vb[~masked]
    finite = diff[np.isfinite(diff)]
    largest = float(np.abs(finite).max()) if finite.size else 0.0
    levels, cmap = levels_for(np.concatenate([va.ravel(), vb.ravel()]), a.kind)
    if a.kind == "mask":
        levels, cmap = (0.0, 1.0), MASK
    heads = head_text(a, head)
    where = f"{name}  ·  {a.shape_text()}  ·  batch item {batch + 1}{heads}"
    common = dict(trace=after, row_dim=row_dim, col_dim=col_dim, batch=batch, cols=cols, col_labels=col_labels)
    first, second = names
    before_map = _heatmap(vb, levels=levels, cmap=cmap, title=f"{first}: {step_path(b)}", subtitle=where,
                          formula=b.formula, **common)
    after_map = _heatmap(va, levels=levels, cmap=cmap, title=f"{second}: {step_path(a)}", subtitle=where,
                         formula=a.formula, **common)
    m = largest if largest > 0 else 1.0
    minus = f"{second.lower()} − {first.lower()}"
    diff_map = _heatmap(diff, levels=(-m, m), cmap=DIVERGING, title=f"{minus[0].upper()}{minus[1:]}{heads}",
                        subtitle=where, formula=minus, **common)  # fmt: skip
    diff_map.masked = masked if masked.any() else None
    return Comparison(before_map, after_map, diff_map, largest)


def first_changed_step(before: Trace, after: Trace, atol: float = 0.0) -> str | None:
    """The name of the first step whose tensor differs between the runs (None if none does)."""
    for a in after:
        b = before.find(a.name)
        if b is None or tuple(b.shape) != tuple(a.shape):
            return a.name
        ta, tb = a.tensor, b.tensor
        same = torch.equal(ta, tb) if atol == 0 else torch.allclose(ta.float(), tb.float(), atol=atol, equal_nan=True)
        if not same:
            return a.name
    return None


@dataclass
class ChangedRow:
    position: int
    input_token: str  # the decoder input at this position (both runs read the same)
    tokens: list[str]
    ids: list[int]
    before: list[float]  # probability of each token in the run without the interventions
    after: list[float]  # … and with them


def top_k_changes(before: Trace, after: Trace, k: int = 5, batch: int = 0,
                  vocab_labels: VocabLabels | None = None) -> list[ChangedRow]:  # fmt: skip
    """Per target position: the tokens in either run's top k, ranked by the larger of their two probabilities
    (at most k), with the probability before → after."""
    a, b = after.find("generator.probs"), before.find("generator.probs")
    if a is None or b is None:
        return []
    pa = a.item(batch).to(torch.float32)  # (T, vocab)
    pb = b.item(batch).to(torch.float32)  # (T, vocab)
    k = min(k, pa.shape[-1])
    ta, tb = torch.topk(pa, k, dim=-1).indices, torch.topk(pb, k, dim=-1).indices  # (T, k)
    inputs = after.labels("tgt_pos", batch) or []
    rows = []
    for pos in range(pa.shape[0]):
        ids = list(dict.fromkeys([*ta[pos].tolist(), *tb[pos].tolist()]))
        ids.sort(key=lambda i: -max(float(pa[pos, i]), float(pb[pos, i])))
        ids = ids[:k]
        tokens = vocab_labels(ids) if vocab_labels else [f"#{i}" for i in ids]
        tok = inputs[pos] if pos < len(inputs) else f"tgt_pos {pos}"
        rows.append(ChangedRow(pos, tok, tokens, ids, [float(pb[pos, i]) for i in ids],
                               [float(pa[pos, i]) for i in ids]))
    return rows
