"""Plot data for the decoding timeline: the cross-attention rows of the tokens generated so far, or for a
decoder-only model's continuation the self-attention rows over everything read so far."""

from __future__ import annotations

import numpy as np

from .heatmap import SEQUENTIAL, Heatmap


def timeline_heatmap(tl, upto: int, layer: int | None = None, head: int | None = None) -> Heatmap | None:
    """Plot data (pure): the cross-attention rows of steps 0 … upto stacked — rows = emitted tokens, columns =
    source tokens — for one layer (None: layers averaged) and one head (None: heads averaged)."""
    if tl.steps and tl.steps[0].cross_attention is None:
        return continuation_heatmap(tl, upto, layer, head)
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


def _reduce(a: np.ndarray, layer: int | None, head: int | None) -> np.ndarray:
    """(layers, heads, n) → (n,): one layer or their mean, one head or their mean."""
    a = a.mean(0) if layer is None else a[layer]  # (heads, n)
    return a.mean(0) if head is None else a[head]


def continuation_heatmap(tl, upto: int, layer: int | None = None, head: int | None = None) -> Heatmap | None:
    """Plot data (pure): a decoder-only model's continuation, steps 0 … upto — rows = the new tokens, columns =
    what the decoder had read (the start token, the text, then the new tokens before the last one). Step t's
    self-attention row covers the positions read up to it; the later columns of its row are 0, as the causal
    mask makes them in the full map."""
    steps = tl.steps[: upto + 1]
    if not steps:
        return None
    columns = list(tl.source_tokens) + [s.token for s in steps[:-1]]  # (P + 1 + upto,) positions read
    values = np.zeros((len(steps), len(columns)), dtype=np.float32)  # (steps, positions)
    for row, s in enumerate(steps):
        weights = _reduce(s.self_attention, layer, head)  # (positions read at this step,)
        values[row, : weights.shape[0]] = weights
    which = ("all layers" if layer is None else f"decoder layer {layer + 1}") + (
        ", heads averaged" if head is None else f", head {head + 1}")
    return Heatmap(
        values=values, row_labels=[s.token for s in steps], col_labels=columns,
        row_dim="emitted", col_dim="tgt_pos", levels=(0.0, 1.0), colormap=SEQUENTIAL,
        title=f"Self-attention while continuing the text ({which})",
        subtitle=f"{len(steps)} new tokens × {len(columns)} positions read (the start token, the text, the new "
                 "tokens)",
        formula="row t: softmax(q_t Kᵀ / √d_k) over every position read so far; later positions are masked (0)",
    )
