"""Token trajectories as lines to draw (scratchformer.analyses.trajectory): one path per token through the layers,
a vertex per residual-stream point, each vertex labelled with its point and step so a hover can name it and a
click can go to the step.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TokenPath:
    token: str  # the token as the tokenizer wrote it
    position: int  # its position in its stack's sequence
    stack: str  # 'encoder' or 'decoder'
    xs: list[float]  # one vertex per point of its stack, in order
    ys: list[float]
    labels: list[str]  # per vertex: 'decoder layer 1 cross-attention'
    steps: list[str]  # per vertex: the step name (what a click goes to)

    def hover(self, vertex: int) -> str:
        """'“teacher” (source position 3) · encoder layer 2 feed-forward'."""
        where = "source" if self.stack == "encoder" else "decoder-input"
        return f"“{self.token}” ({where} position {self.position + 1}) · {self.labels[vertex]}"


@dataclass
class TrajectoryPlot:
    paths: list[TokenPath]
    x_title: str  # 'PC1 (12.9% of the variance)'
    y_title: str
    title: str
    notes: list[str]
    # every vertex as a dot, path after path (for a hover's nearest dot and the current step's ring in one numpy
    # pass): (n, 2) coordinates, the (path, vertex) of each, and the step name of each
    xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    which: list[tuple[int, int]] = field(default_factory=list)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))


def trajectory_paths(t) -> TrajectoryPlot:
    """A Trajectory → one path per token of each stack, vertices in the order the points come."""
    paths: dict[tuple[str, int], TokenPath] = {}
    for i, (name, label, stack, tokens) in enumerate(zip(t.points, t.labels, t.stacks, t.tokens)):
        for j, token in enumerate(tokens):
            path = paths.setdefault((stack, j), TokenPath(token, j, stack, [], [], [], []))
            x, y = t.coords[i][j]
            path.xs.append(float(x))
            path.ys.append(float(y))
            path.labels.append(label)
            path.steps.append(name)
    fitted = f"fitted on {t.fit_on}" if t.fit_on else "fitted on every point"
    axes = [f"PC{k + 1} ({v:.1%} of the variance)" for k, v in enumerate(t.explained_variance)]
    lines = list(paths.values())
    xy = np.array([(x, y) for p in lines for x, y in zip(p.xs, p.ys)], dtype=np.float64).reshape(-1, 2)
    which = [(i, j) for i, p in enumerate(lines) for j in range(len(p.xs))]
    steps = np.array([s for p in lines for s in p.steps], dtype=object)
    return TrajectoryPlot(lines, axes[0], axes[1], f"Token trajectories through the residual stream (PCA {fitted})",
                          list(t.notes), xy, which, steps)  # fmt: skip


def trajectory_csv(t) -> str:
    """One row per point and token: the point, its step and stack, the token and its position, x and y, and the
    share of the variance each component explains (the same on every row)."""
    out = io.StringIO()
    w = csv.writer(out)
    shares = [f"{v:.6g}" for v in t.explained_variance]
    w.writerow(["point", "step", "stack", "position", "token", "pc1", "pc2", "pc1_share", "pc2_share"])
    for label, name, stack, tokens, xy in zip(t.labels, t.points, t.stacks, t.tokens, t.coords):
        for j, (token, (x, y)) in enumerate(zip(tokens, xy.tolist())):
            w.writerow([label, name, stack, j, token, f"{x:.9g}", f"{y:.9g}", *shares])
    return out.getvalue()
