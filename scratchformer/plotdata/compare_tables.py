"""The numbers behind the comparison plots as CSV tables, one row per drawn point: token trajectories
(analyses.trajectory) and head metrics over training (analyses.head_metrics); a model diff's steps and parameters
are plotdata.diff.diff_csv. The window's "Save CSV…" buttons write these; a spreadsheet or pandas reads them back.
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
