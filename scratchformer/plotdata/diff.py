"""Two models' runs of one input side by side (scratchformer.analyses.diff): A, B and A − B for a step, and how
much each block of the architecture diagram differs.

The A and B maps share one colour scale so that equal colours are equal numbers; A − B is drawn on a diverging
map with symmetric levels, white where the models agree. Where the two tokenizers read the input differently the
maps keep only the positions the diff compared (ModelDiff.positions).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..recording.trace import step_path
from .heatmap import (
    DIVERGING,
    MASK,
    Heatmap,
    VocabLabels,
    axis_labels,
    head_text,
    levels_for,
    matrix_of,
    shared_top_columns,
)


@dataclass
class DiffMaps:
    a: Heatmap
    b: Heatmap
    difference: Heatmap  # A − B; 0 where a cell is masked (−∞) in both
    largest: float  # max |A − B| over the cells shown (inf where a cell is finite in one model only)


def _pick(values: np.ndarray, labels: list[str] | None, keep: list[int] | None, axis: int):
    if keep is None:
        return values, labels
    keep = [k for k in keep if k < values.shape[axis]]
    return np.take(values, keep, axis=axis), None if labels is None else [labels[k] for k in keep if k < len(labels)]


def diff_step_maps(diff, name: str, batch: int = 0, head: int = 0, vocab_labels: VocabLabels | None = None
                   ) -> DiffMaps:  # fmt: skip
    """The step `name` of both runs of a ModelDiff (one batch item, one head) and A − B. A vocabulary axis keeps
    the union of both runs' top tokens, the same columns in all three maps."""
    sa, sb = diff.trace_a.find(name), diff.trace_b.find(name)
    if sa is None or sb is None:
        raise UserError(f"Only steps both models compute have side-by-side maps; {name!r} is not one of them.")
    va, row_dim, col_dim = matrix_of(sa, batch, head)  # (rows, cols)
    vb, _, _ = matrix_of(sb, batch, head)
    positions = diff.positions or {}
    rows = axis_labels(diff.trace_a, row_dim, va.shape[0], batch)
    cols = axis_labels(diff.trace_a, col_dim, va.shape[1], batch)
    va, rows_a = _pick(va, rows, positions.get(row_dim), 0)
    va, cols_a = _pick(va, cols, positions.get(col_dim), 1)
    vb, _ = _pick(vb, None, positions.get(row_dim), 0)
    vb, _ = _pick(vb, None, positions.get(col_dim), 1)
    if va.shape != vb.shape:
        raise UserError(f"{name} has different shapes in the two models ({sa.shape_text()} and {sb.shape_text()}), so "
                        "it has no A − B map; its side-by-side maps need equal shapes.")
    ids = None
    if col_dim == "vocab":  # the union of both runs' top tokens, A's first
        ids, cols_a = shared_top_columns(va, vb, vocab_labels)
        va, vb = va[:, ids], vb[:, ids]
    with np.errstate(invalid="ignore"):
        same = (va == vb) | (np.isnan(va) & np.isnan(vb))
        d = np.where(same, 0.0, va - vb).astype(np.float32)  # (rows, cols)
    finite = np.abs(d[np.isfinite(d)])
    largest = float(finite.max()) if finite.size else 0.0
    if not np.isfinite(d).all():
        largest = math.inf
    levels, cmap = levels_for(np.concatenate([va.ravel(), vb.ravel()]), sa.kind)
    if sa.kind == "mask":
        levels, cmap = (0.0, 1.0), MASK
    heads = head_text(sa, head)
    where = f"{name}  ·  {sa.shape_text()}  ·  batch item {batch + 1}{heads}"
    extra = {"vocab_ids": ids} if ids is not None else {}

    def heatmap(values, cmap_, levels_, title, formula) -> Heatmap:
        masked = np.isneginf(values)
        return Heatmap(np.ascontiguousarray(values, dtype=np.float32), rows_a, cols_a, row_dim, col_dim, levels_,
                       cmap_, title, where, formula, masked if masked.any() else None, dict(extra))  # fmt: skip

    m = largest if 0 < largest < math.inf else (finite.max() if finite.size and finite.max() > 0 else 1.0)
    map_a = heatmap(va, cmap, levels, f"A: {diff.model_a} — {step_path(sa)}", sa.formula)
    map_b = heatmap(vb, cmap, levels, f"B: {diff.model_b} — {step_path(sb)}", sb.formula)
    map_d = heatmap(np.nan_to_num(d, nan=0.0, posinf=0.0, neginf=0.0), DIVERGING, (-float(m), float(m)),
                    f"A − B{heads}", "A − B")  # fmt: skip
    masked = np.isneginf(va) & np.isneginf(vb)
    map_d.masked = masked if masked.any() else None
    return DiffMaps(map_a, map_b, map_d, largest)


def block_differences(diff) -> dict[str, float]:
    """Diagram block key (plotdata.blocks.block_key) → the largest relative difference of its steps (inf where a
    step's shape differs). Blocks with no step both models compute are absent."""
    out: dict[str, float] = {}
    for s in diff.steps:
        rel = math.inf if s.relative_diff is None else s.relative_diff
        out[s.block] = max(out.get(s.block, 0.0), rel)
    return out


def shade(relative: float, tolerance: float) -> float:
    """A difference's shade in [0, 1], for the diagram's blocks and the comparison strip's bars: 0 within the
    tolerance, 1 at a relative difference of 1 or more (or a shape that differs: inf), on a log scale between (each
    decade the same step)."""
    tol = max(tolerance, 1e-12)
    if relative <= tol:
        return 0.0
    if not math.isfinite(relative) or relative >= 1:
        return 1.0
    span = math.log10(1.0 / tol) if tol < 1 else 1.0
    return min(1.0, max(0.0, math.log10(relative / tol) / span))


def block_shades(diff) -> dict[str, float]:
    """Block key → its largest difference's shade (shade) for colouring the diagram."""
    return {key: shade(rel, diff.tolerance) for key, rel in block_differences(diff).items()}


@dataclass
class DiffBars:
    """One bar per step both models compute, for a strip beside the stepper: log10 of the relative difference."""

    steps: list[str]
    relative: list[float]  # inf where the shapes differ
    first_difference: int | None  # index into steps
    tolerance: float


def diff_bars(diff) -> DiffBars:
    steps = [s.step for s in diff.steps]
    first = diff.first_difference
    return DiffBars(steps, [math.inf if s.relative_diff is None else s.relative_diff for s in diff.steps],
                    steps.index(first) if first is not None else None, diff.tolerance)  # fmt: skip


def _cell(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


def _shape(t: tuple[int, ...] | None) -> str:
    return "" if t is None else "×".join(map(str, t))


def diff_csv(diff) -> str:
    """Every compared step (step, block, shapes, max |A − B|, relative, differs, whether it is the first that
    differs), then every parameter that differs (an empty shape: the other model lacks it); an empty cell where the
    shapes differ, 'inf' where a cell is finite in one model only. The window's Save CSV… writes this."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["kind", "name", "block", "shape_a", "shape_b", "max_abs_diff", "relative_diff", "differs",
                "first_difference"])  # fmt: skip
    first = diff.first_difference
    for s in diff.steps:
        w.writerow(["step", s.step, s.block, _shape(s.shape_a), _shape(s.shape_b), _cell(s.max_abs_diff),
                    _cell(s.relative_diff), int(s.differs(diff.tolerance)), int(s.step == first)])  # fmt: skip
    for p in diff.parameters:
        w.writerow(["parameter", p.name, "", _shape(p.shape_a), _shape(p.shape_b), _cell(p.max_abs_diff),
                    _cell(p.relative_diff), 1, 0])  # fmt: skip
    return out.getvalue()


@dataclass
class ParameterRow:
    """One parameter that differs, as the window's table lists it."""

    name: str
    shape_a: str  # '128×128', or '—' where model A lacks it
    shape_b: str
    max_abs_diff: float | None  # None where the shapes differ or one model lacks it
    relative_diff: float | None
    what: str  # 'values differ', 'shapes differ', 'only in A', 'only in B'


def parameter_rows(diff) -> list[ParameterRow]:
    """The parameters that differ, those whose shapes differ or that one model lacks first, then by the largest
    difference, largest first."""
    rows = []
    for p in diff.parameters:
        if p.shape_a is None or p.shape_b is None:
            what = "only in B" if p.shape_a is None else "only in A"
        else:
            what = "shapes differ" if p.shape_a != p.shape_b else "values differ"
        rows.append(ParameterRow(p.name, _shape(p.shape_a) or "—", _shape(p.shape_b) or "—", p.max_abs_diff,
                                 p.relative_diff, what))  # fmt: skip
    return sorted(rows, key=lambda r: -math.inf if r.max_abs_diff is None else -r.max_abs_diff)
