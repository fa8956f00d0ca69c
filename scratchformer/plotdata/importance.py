"""Head importance as heatmaps: one layers × heads map per attention type (scratchformer.patching.head_importance).

Each cell is the drop in the mean probability of the chosen output tokens when that one head is zeroed, in
percentage points. A drop can be negative (the model grew more sure without the head), so the colour map is
diverging with symmetric levels, shared by all the types so that their colours compare.
"""

from __future__ import annotations

import numpy as np

from ..patching.head_importance import HeadImportance
from .heatmap import DIVERGING, Heatmap

IMPORTANCE_TITLES = {
    "encoder.self_attn": "Encoder self-attention",
    "decoder.self_attn": "Decoder self-attention",
    "decoder.cross_attn": "Cross-attention",
}


def importance_heatmaps(result: HeadImportance) -> list[Heatmap]:
    """One heatmap per attention type (values in points of probability, rows layers, columns heads, both
    labelled from 1); extra["kind"] names the type ("decoder.cross_attn") for a click to find the step."""
    top = max((float(np.abs(a).max()) for a in result.drops.values() if a.size), default=0.0) * 100
    m = top if top > 0 else 1.0
    maps = []
    for kind, drops in result.drops.items():
        values = np.ascontiguousarray(drops * 100, dtype=np.float32)  # (layers, heads)
        best_layer, best_head, best = result.ranking(kind)[0]
        maps.append(Heatmap(
            values=values,
            row_labels=[f"layer {i + 1}" for i in range(values.shape[0])],
            col_labels=[f"head {h + 1}" for h in range(values.shape[1])],
            row_dim="layer",
            col_dim="head",
            levels=(-m, m),
            colormap=DIVERGING,
            title=f"{IMPORTANCE_TITLES.get(kind, kind)}: drop in P(chosen tokens), points",
            subtitle=(f"{result.n_tokens} chosen tokens, {result.base:.1%} with nothing zeroed; most important: "
                      f"layer {best_layer + 1}, head {best_head + 1} ({best * 100:+.1f})"),
            formula="P(chosen) untouched − P(chosen) with the head zeroed",
            extra={"kind": kind},
        ))
    return maps


def importance_step(kind: str, layer: int) -> str:
    """The attention-weights step of one cell: ('decoder.cross_attn', 1) → 'decoder.1.cross_attn.weights'."""
    stack, attention = kind.split(".")
    return f"{stack}.{layer}.{attention}.weights"
