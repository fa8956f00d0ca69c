"""Plot data for the decoding timeline: the cross-attention rows of the tokens generated so far."""

from __future__ import annotations

import numpy as np

from .heatmap import SEQUENTIAL, Heatmap


def timeline_heatmap(tl, upto: int, layer: int | None = None, head: int | None = None) -> Heatmap | None:
    """Plot data (pure): the cross-attention rows of steps 0 … upto stacked — rows = emitted tokens, columns =
    source tokens — for one layer (None: layers averaged) and one head (None: heads averaged)."""
    steps = [s for s in tl.steps[: upto + 1] if s.cross_attention is not None]
    if not steps:
        return None
    rows = []
    for s in steps:
        a = s.cross_attention  # (layers, heads, src_len)
        a = a.mean(0) if layer is None else a[layer]  # (heads, src_len)
        rows.append(a.mean(0) if head is None else a[head])  # (src_len,)
    values = np.ascontiguousarray(np.stack(rows), dtype=np.float32)  # (steps, src_len)
    which = ("all layers" if layer is None else f"decoder layer {layer + 1}") + (
        ", heads averaged" if head is None else f", head {head + 1}")
    return Heatmap(
        values=values, row_labels=[s.token for s in steps], col_labels=list(tl.source_tokens),
        # rows are the tokens each step produced (not decoder inputs, as in the trace's tgt_pos)
        row_dim="emitted", col_dim="src_pos", levels=(0.0, 1.0), colormap=SEQUENTIAL,
        title=f"Cross-attention while decoding ({which})",
        subtitle=f"{len(steps)} emitted tokens × {len(tl.source_tokens)} source tokens ({tl.mode})",
        formula="row t: softmax(q_t Kᵀ / √d_k) over the encoder output, q_t from the new decoder row",
    )
