"""What the sweep's views and exports draw (scratchformer.analyses.sweep): a layers × heads map per attention type,
a points × positions map and a feed-forward map per stack, the numbers as CSV, and the explanation in this run's
numbers. Pure functions of the Sweep, so what is exported is what is shown.

Every map carries, in `extra["cells"]`, what each cell patched (the Component's fields — "step", "head",
"position", … — and its "label"; None where a cell holds nothing), so a click can go to that step and replay it;
`extra["disagree"]` marks where attribution patching and the real patch differ by more than the threshold (both
measured), and `extra["grid"]` says which numbers it shows.

    head_maps(sweep) → [Heatmap]      point_maps(sweep, "resid" | "mlp") → [Heatmap]
    path_maps(sender, part, receivers, effects, readable, metric) → [Heatmap]
    sweep_csv(sweep, paths) → str     explanation(sweep) → str
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict

import numpy as np

from ..patching.attribution import DISAGREE
from ..patching.components import Component, component_label
from ..patching.result import Grid, Sweep
from .heatmap import DIVERGING, Heatmap

ATTENTION_TYPES = {"encoder.self_attn": "encoder self-attention", "decoder.self_attn": "decoder self-attention",
                   "decoder.cross_attn": "cross-attention"}  # fmt: skip
FORMULA = "effect = (m_patched − m_corrupt) / (m_clean − m_corrupt)"


def _numbers(sweep: Sweep, grid: Grid, which: str | None) -> tuple[np.ndarray, str]:
    """The effects ('exact'), the estimates ('attribution'), or by default what the sweep measured."""
    if which is None:
        which = "exact" if grid.effects is not None else "attribution"
    values = grid.effects if which == "exact" else grid.estimates
    if values is None:
        raise ValueError(f"This sweep has no {which} numbers (its method is {sweep.method}).")
    return values.numpy(), which


def _levels(values: np.ndarray) -> tuple[float, float]:
    """Symmetric around 0 and at least ±1, so that 1 (the clean answer restored) always reads the same."""
    top = max(1.0, float(np.abs(values).max()) if values.size else 1.0)
    return (-top, top)


def _heatmap(values, cells, disagree, rows, cols, row_dim, col_dim, title, subtitle, which) -> Heatmap:
    v = np.ascontiguousarray(values, dtype=np.float32)
    gaps = np.array([[c is None for c in row] for row in cells], dtype=bool)
    v[gaps] = np.nan
    outlined = disagree if disagree is not None and disagree.any() else None
    if disagree is not None:  # both methods measured: say what an outline means, on every map of the pair
        subtitle += f"; outlined: the estimate and the real patch differ by more than {DISAGREE:g}"
    return Heatmap(v, rows, cols, row_dim, col_dim, _levels(v[~gaps]), DIVERGING, title, subtitle, FORMULA,
                   extra={"cells": cells, "disagree": disagree, "grid": which}, gaps=gaps if gaps.any() else None,
                   outlined=outlined)  # fmt: skip


def _cell(c: Component) -> dict:
    """What a map's cell patched: the component's fields (scratchformer.patching.replay.component_of reads them
    back) and its label."""
    return {**asdict(c), "label": component_label(c)}


def head_maps(sweep: Sweep, which: str | None = None) -> list[Heatmap]:
    """One map per attention type (encoder self, decoder self, cross): layers (rows) × heads, or with
    per-position heads, layers × heads (rows 'L1 H1', …) × positions."""
    values, which = _numbers(sweep, sweep.heads, which)
    flags = sweep.heads.disagree()
    maps = []
    for kind, title in ATTENTION_TYPES.items():
        stack, att = kind.split(".")
        picked = [i for i, c in enumerate(sweep.heads.components)
                  if c.stack == stack and c.attention.split(".")[2] == att]  # fmt: skip
        if not picked:
            continue
        comps = [sweep.heads.components[i] for i in picked]
        n_layers = max(c.layer for c in comps) + 1
        n_heads = max(c.head for c in comps) + 1
        tokens = sweep.source_tokens if stack == "encoder" and sweep.corrupt_tokens else sweep.target_tokens
        per_pos = comps[0].position is not None
        rows = ([f"L{la + 1} H{h + 1}" for la in range(n_layers) for h in range(n_heads)] if per_pos
                else [f"layer {la + 1}" for la in range(n_layers)])  # fmt: skip
        cols = list(tokens) if per_pos else [f"head {h + 1}" for h in range(n_heads)]
        grid = np.zeros((len(rows), len(cols)), dtype=np.float32)
        cells: list[list] = [[None] * len(cols) for _ in rows]
        mark = np.zeros(grid.shape, dtype=bool)
        for i, c in zip(picked, comps):
            r, k = (c.layer * n_heads + c.head, c.position) if per_pos else (c.layer, c.head)
            grid[r, k] = values[i]
            cells[r][k] = _cell(c)
            mark[r, k] = bool(flags[i]) if flags is not None else False
        how = "exact activation patching" if which == "exact" else "attribution patching (estimate)"
        where = "each head at each position alone" if per_pos else "each head at every position"
        maps.append(_heatmap(grid, cells, mark if flags is not None else None, rows, cols,
                             "layer·head" if per_pos else "layer", "tgt_pos" if per_pos else "head",
                             f"Patching {title} heads' outputs (before W^O): {sweep.metric.describe()}",
                             f"{how}, {where}", which))  # fmt: skip
    return maps


def path_maps(sender: str, part: str, receivers: list[Component], effects, readable: list[bool],
              metric_text: str) -> list[Heatmap]:  # fmt: skip
    """Path patching from one sender head into every head's q, k or v (scratchformer.patching.paths.path_sweep):
    one layers × heads map per attention type, each cell the path's effect through that receiver alone. A head
    that cannot read the sender (it runs before it, or it is the sender's own attention) is a gap, as is one whose
    k or v several query heads share."""
    values = np.asarray(effects, dtype=np.float32)
    maps = []
    for kind, title in ATTENTION_TYPES.items():
        stack, att = kind.split(".")
        picked = [i for i, c in enumerate(receivers) if c.stack == stack and c.attention.split(".")[2] == att]
        if not picked:
            continue
        n_layers = max(receivers[i].layer for i in picked) + 1
        n_heads = max(receivers[i].head for i in picked) + 1
        grid = np.zeros((n_layers, n_heads), dtype=np.float32)
        cells: list[list] = [[None] * n_heads for _ in range(n_layers)]
        for i in picked:
            c = receivers[i]
            if readable[i]:
                grid[c.layer, c.head] = values[i]
                cells[c.layer][c.head] = {**_cell(c), "path": sender}
        maps.append(_heatmap(grid, cells, None, [f"layer {la + 1}" for la in range(n_layers)],
                             [f"head {h + 1}" for h in range(n_heads)], "layer", "head",
                             f"Path from {sender} into each {title} head's {part}: {metric_text}",
                             "path patching: the sender's write alone, read by one receiver's input; gaps cannot read "
                             "the sender", "path"))  # fmt: skip
    return maps


def point_maps(sweep: Sweep, family: str = "resid", which: str | None = None) -> list[Heatmap]:
    """Per stack: its residual-stream points ('resid') or feed-forward outputs ('mlp') (rows) × positions."""
    grid = sweep.positions if family == "resid" else sweep.mlp
    values, which = _numbers(sweep, grid, which)
    flags = grid.disagree()
    maps = []
    for stack in ("encoder", "decoder"):
        picked = [i for i, c in enumerate(grid.components) if c.stack == stack]
        if not picked:
            continue
        steps = list(dict.fromkeys(grid.components[i].step for i in picked))
        tokens = sweep.source_tokens if stack == "encoder" else sweep.target_tokens
        n = max(grid.components[i].position for i in picked) + 1
        cols = list(tokens[:n]) if len(tokens) >= n else [str(p) for p in range(n)]
        rows = [component_label(grid.components[next(i for i in picked if grid.components[i].step == s)], False)
                for s in steps]  # fmt: skip
        out = np.zeros((len(rows), n), dtype=np.float32)
        cells: list[list] = [[None] * n for _ in rows]
        mark = np.zeros(out.shape, dtype=bool)
        for i in picked:
            c = grid.components[i]
            r = steps.index(c.step)
            out[r, c.position] = values[i]
            cells[r][c.position] = _cell(c)
            mark[r, c.position] = bool(flags[i]) if flags is not None else False
        what = "residual-stream points" if family == "resid" else "feed-forward outputs"
        how = "exact activation patching" if which == "exact" else "attribution patching (estimate)"
        maps.append(_heatmap(out, cells, mark if flags is not None else None, rows, cols, "point" if family == "resid"
                             else "layer", "src_pos" if stack == "encoder" else "tgt_pos",
                             f"Patching the {stack}'s {what} × positions: {sweep.metric.describe()}", how, which))
    return maps


def sweep_csv(sweep: Sweep, paths: tuple | None = None) -> str:
    """One row per patched component: family, label, step, head, position, token, effect, estimate, disagree;
    with `paths` = (sender, receivers, effects, readable) from path_sweep, one "path" row per receiver that can
    read the sender; the metric last."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["family", "component", "step", "head", "position", "token", "effect", "estimate", "disagree"])
    for family, grid in (("head", sweep.heads), ("resid", sweep.positions), ("mlp", sweep.mlp)):
        flags = grid.disagree()
        for i, c in enumerate(grid.components):
            tokens = sweep.source_tokens if c.axis == "src" else sweep.target_tokens
            token = tokens[c.position] if c.position is not None and c.position < len(tokens) else ""
            fmt = lambda t, i=i: "" if t is None else f"{float(t[i]):.6g}"  # noqa: E731
            w.writerow([family, component_label(c), c.step, "" if c.head is None else c.head,
                        "" if c.position is None else c.position, token, fmt(grid.effects), fmt(grid.estimates),
                        "" if flags is None else int(bool(flags[i]))])  # fmt: skip
    if paths is not None:
        sender, receivers, effects, readable = paths
        for c, e, ok in zip(receivers, effects, readable):
            if ok:
                w.writerow(["path", f"{sender} → {component_label(c)}", c.step, c.head, "", "", f"{float(e):.6g}",
                            "", ""])  # fmt: skip
    w.writerow(["metric", sweep.metric.describe(), "", "", "", "", f"m_clean={sweep.m_clean:.6g}",
                f"m_corrupt={sweep.m_corrupt:.6g}", ""])  # fmt: skip
    return out.getvalue()


def explanation(sweep: Sweep) -> str:
    """What the maps' numbers mean, in this run's numbers."""
    m = sweep.metric
    text = (f"m_clean = {sweep.m_clean:.3g} ({m.describe()} at the last decoder position, on the clean input), "
            f"m_corrupt = {sweep.m_corrupt:.3g} on the corrupted one. Each cell copies one component's activation "
            "from the clean run into the corrupted one: an effect of 1 brings m back to "
            f"{sweep.m_clean:.3g} (the clean answer fully restored), 0 leaves it at {sweep.m_corrupt:.3g}, and a "
            "negative effect pushes it further from the clean answer.")  # fmt: skip
    if sweep.m_clean == sweep.m_corrupt:
        text += " Here both runs give the same m, so there is nothing to restore and every effect is 0."
    if sweep.method != "exact":
        text += (" Attribution patching estimates each effect from one backward pass, gradient × (clean − "
                 "corrupted activation); it is a straight-line guess and can miss where attention saturates.")
    if sweep.method == "both":
        text += f" Cells are marked where the estimate and the real patch differ by more than {DISAGREE:g}."
    return text
