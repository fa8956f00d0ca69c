"""The numbers behind the comparison plots as CSV tables, one row per drawn point: a model diff's steps
(scratchformer.analyses.diff), token trajectories (analyses.trajectory) and head metrics over training
(analyses.head_metrics). The window's "Save CSV…" buttons write these; a spreadsheet or pandas reads them back.
"""

from __future__ import annotations

import csv
import io
import math


def _num(x: float | None) -> str:
    """A number as CSV text: '' for None, 'inf' for an infinite difference (a cell finite in one model only)."""
    if x is None:
        return ""
    return "inf" if math.isinf(x) else f"{float(x):.9g}"


def diff_csv(diff) -> str:
    """One row per step both models compute, in A's order: its block, both shapes, max |A − B|, the relative
    difference, whether it differs beyond the tolerance and whether it is the first that does."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["step", "block", "shape_a", "shape_b", "max_abs_diff", "relative_diff", "differs", "first_difference"])
    first = diff.first_difference
    for s in diff.steps:
        w.writerow([s.step, s.block, "x".join(map(str, s.shape_a)), "x".join(map(str, s.shape_b)),
                    _num(s.max_abs_diff), _num(s.relative_diff), int(s.differs(diff.tolerance)),
                    int(s.step == first)])  # fmt: skip
    return out.getvalue()


def trajectory_csv(t) -> str:
    """One row per token and residual-stream point: where the token's vector lands on the two components."""
    out = io.StringIO()
    w = csv.writer(out)
    shares = [f"{v:.6g}" for v in t.explained_variance]
    w.writerow(["point", "step", "stack", "position", "token", "pc1", "pc2", "pc1_share", "pc2_share"])
    for name, label, stack, tokens, xy in zip(t.points, t.labels, t.stacks, t.tokens, t.coords):
        for j, token in enumerate(tokens):
            w.writerow([label, name, stack, j, token, f"{float(xy[j, 0]):.9g}", f"{float(xy[j, 1]):.9g}", *shares])
    return out.getvalue()


def head_metrics_csv(m) -> str:
    """One row per metric, attention type, layer, head and checkpoint (layers and heads counted from 1)."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["metric", "attention", "layer", "head", "checkpoint", "step", "value"])
    for metric in ("entropy", "alignment", "importance"):
        for kind, arr in getattr(m, metric).items():  # (checkpoints, layers, heads)
            for c, point in enumerate(m.checkpoints):
                for layer in range(arr.shape[1]):
                    for head in range(arr.shape[2]):
                        w.writerow([metric, kind, layer + 1, head + 1, point.label,
                                    "" if point.step is None else point.step, _num(float(arr[c, layer, head]))])
    return out.getvalue()
