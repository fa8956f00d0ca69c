"""Head metrics over training as curves to draw under the loss curve (scratchformer.analyses.head_metrics): one
line per head of the chosen attention type and layer, x the training step, so the Training view's snapshot
slider can mark the same step on both plots.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np

from .masks import ATTENTION_TITLES

METRICS = {
    "entropy": ("Attention entropy", "mean entropy of a row (nats)"),
    "alignment": ("Alignment with the gold alignment", "share of target words on their gold source word"),
    "importance": ("Head importance", "fall in P(chosen token) when the head is zeroed"),
}


@dataclass
class HeadCurve:
    label: str  # 'layer 2 head 1'
    layer: int  # from 0
    head: int  # from 0
    steps: list[int]  # training step of each checkpoint
    values: list[float]


@dataclass
class HeadCurves:
    title: str  # 'Cross-attention: attention entropy over training'
    y_label: str
    curves: list[HeadCurve]
    steps: list[int]  # x of every checkpoint (the final model's step where training.json says it)
    checkpoint_labels: list[str]  # 'step 64', …, 'final'
    guided: tuple[int, int] | None = None  # (layer, head) trained on the gold alignment, if any


def checkpoint_steps(metrics) -> list[int]:
    """The x of each checkpoint: its step; where unknown (a final model without a record), one past the last."""
    out: list[int] = []
    for c in metrics.checkpoints:
        out.append(c.step if c.step is not None else (out[-1] + 1 if out else 0))
    return out


def available(metrics) -> dict[str, list[str]]:
    """Metric → the attention types it has values for (alignment: cross-attention alone, where a gold one exists)."""
    return {name: list(getattr(metrics, name)) for name in METRICS if getattr(metrics, name)}


def head_curves(metrics, metric: str, attention_type: str, layer: int | None = None,
                guided: tuple[int, int] | None = None) -> HeadCurves:  # fmt: skip
    """One curve per head of `attention_type` (of one layer, or of every layer when layer is None)."""
    values = getattr(metrics, metric).get(attention_type)
    title, y_label = METRICS[metric]
    where = ATTENTION_TITLES.get(attention_type, attention_type)
    steps = checkpoint_steps(metrics)
    curves = []
    if values is not None:
        arr = np.asarray(values)  # (checkpoints, layers, heads)
        layers = range(arr.shape[1]) if layer is None else [layer % arr.shape[1]]
        for li in layers:
            for h in range(arr.shape[2]):
                curves.append(HeadCurve(f"layer {li + 1} head {h + 1}", li, h, steps,
                                        [float(v) for v in arr[:, li, h]]))  # fmt: skip
    guided = guided if attention_type == "decoder.cross_attn" else None
    return HeadCurves(f"{where}: {title.lower()} over training", y_label, curves, steps,
                      [c.label for c in metrics.checkpoints], guided)  # fmt: skip


def step_ticks(steps: list[int], min_gap: float = 0.0) -> list[tuple[float, str]]:
    """Ticks for a log-scale step axis: (log10(step), the step as a plain number) at the checkpoints' own steps,
    so the axis reads "32 64 128 256 2030" rather than powers of ten. Steps closer than `min_gap` (in log10 units)
    to a labelled one are left out, the last (the final model) kept first; a step 0 has no place on a log axis."""
    ticks: list[tuple[float, str]] = []
    for s in sorted({int(s) for s in steps if s > 0}, reverse=True):
        x = math.log10(s)
        if not ticks or ticks[-1][0] - x >= min_gap:
            ticks.append((x, str(s)))
    return ticks[::-1]


def checkpoint_at(metrics, step: int | None) -> int | None:
    """The index of the checkpoint at a training step (the slider's snapshot), or None; step None: the final."""
    for i, c in enumerate(metrics.checkpoints):
        if (step is None and c.final) or (step is not None and c.step == step and not c.final):
            return i
    return None


def head_metrics_csv(metrics) -> str:
    """One row per checkpoint, metric, attention type, layer and head (layers and heads from 1, as people count)."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["checkpoint", "step", "metric", "attention", "layer", "head", "value"])
    for metric in METRICS:
        for kind, arr in getattr(metrics, metric).items():
            for i, c in enumerate(metrics.checkpoints):
                for li, row in enumerate(np.asarray(arr)[i]):
                    for h, v in enumerate(row):
                        w.writerow([c.label, "" if c.step is None else c.step, metric, kind, li + 1, h + 1,
                                    f"{float(v):.9g}"])  # fmt: skip
    return out.getvalue()
