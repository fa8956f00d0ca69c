"""Masks per attention type (causal, padding, combined) and scores before / after the softmax."""

from __future__ import annotations

import numpy as np
import torch

from ..recording.trace import Step, Trace
from ..transformer.masks import pad_from_ids
from .heatmap import MASK, Heatmap, axis_labels, step_heatmap

ATTENTION_TITLES = {
    "encoder.self_attn": "Encoder self-attention",
    "decoder.self_attn": "Decoder masked self-attention",
    "decoder.cross_attn": "Cross-attention",
}


def attention_types(trace: Trace) -> list[str]:
    """The attention types present, in the order encoder self, decoder self, cross."""
    seen = {s.attention_type for s in trace if s.attention_type}
    return [t for t in ATTENTION_TITLES if t in seen]


def _mask_heatmap(allowed: np.ndarray, title: str, rows: list[str] | None, cols: list[str] | None,
                  row_dim: str, col_dim: str) -> Heatmap:
    values = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    masked = ~allowed
    return Heatmap(
        values=np.ascontiguousarray(values), row_labels=rows, col_labels=cols, row_dim=row_dim,
        col_dim=col_dim, levels=(0.0, 1.0), colormap=MASK, title=title,
        subtitle=f"{int(masked.sum())} of {masked.size} cells blocked (−∞)",
        formula="0 = may attend, −∞ = blocked", masked=masked if masked.any() else None,
    )


def _pad_of(trace: Trace, stack: str, batch: int, pad_id: int | None) -> np.ndarray | None:
    step = trace.find(f"{stack}.tokens")
    if step is None:
        return None
    given = trace.source_pad if stack == "src_embed" else trace.target_pad
    if given is not None and given.shape[1] == step.shape[1]:  # the padding the run was given: exactly what it used
        return given[min(batch, given.shape[0] - 1)].numpy().astype(bool)
    ids = step.item(batch)[None]  # (1, T)
    # the model's own rule: the decoder's start token is never padding, even where it is the pad token (Marian)
    pad = pad_from_ids(ids, pad_id, start=stack == "tgt_embed")
    return np.zeros(ids.shape[1], dtype=bool) if pad is None else pad[0].numpy()


def mask_step(trace: Trace, attention_type: str, layer: int = 0) -> Step | None:
    """The combined mask one attention type added to its scores in `layer`, else in its first layer (a stack with
    fewer layers than the one the current step is in); None if the model has no such attention."""
    stack, kind = attention_type.split(".")
    return trace.find(f"{stack}.{layer}.{kind}.mask") or trace.find(f"{stack}.0.{kind}.mask")


def softmax_steps(trace: Trace, sublayer: str) -> list[Step]:
    """[masked scores, attention weights] of one attention sublayer: the softmax's input and output."""
    return [s for s in (trace.find(f"{sublayer}.{part}") for part in ("masked_scores", "weights")) if s is not None]


def mask_heatmaps(trace: Trace, attention_type: str, layer: int = 0, batch: int = 0,
                  pad_id: int | None = None) -> list[Heatmap]:
    """The masks of one attention type (in `layer`, see mask_step): its parts (causal, source / target padding)
    and the combined mask the model added to the scores (read from the trace, so it is exactly what was used)."""
    combined_step = mask_step(trace, attention_type, layer)
    if combined_step is None:
        return []
    b = min(batch, combined_step.shape[0] - 1)
    combined = np.isfinite(combined_step.item(b).to(torch.float32).numpy())
    n_q, n_k = combined.shape
    row_dim, col_dim = combined_step.dims[1], combined_step.dims[2]
    rows = axis_labels(trace, row_dim, n_q, batch)
    cols = axis_labels(trace, col_dim, n_k, batch)
    parts: list[Heatmap] = []
    if attention_type == "decoder.self_attn":
        causal = np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)
        parts.append(_mask_heatmap(causal, "Causal (no peeking ahead)", rows, cols, row_dim, col_dim))
    key_stack = "tgt_embed" if col_dim == "tgt_pos" else "src_embed"
    pad = _pad_of(trace, key_stack, batch, pad_id)
    if pad is not None and pad.shape[0] == n_k:
        side = "Target" if key_stack == "tgt_embed" else "Source"
        allowed = np.broadcast_to(~pad[None, :], (n_q, n_k))
        parts.append(_mask_heatmap(allowed, f"{side} padding", rows, cols, row_dim, col_dim))
    hm = _mask_heatmap(combined, "Combined mask used", rows, cols, row_dim, col_dim)
    hm.extra["step"] = combined_step.name
    parts.append(hm)
    for p in parts:
        p.title = f"{ATTENTION_TITLES.get(attention_type, attention_type)}: {p.title}"
    return parts


def before_after_softmax(trace: Trace, sublayer: str, batch: int = 0, head: int = 0) -> list[Heatmap]:
    """[masked scores, attention weights] of one attention sublayer and head, for side-by-side display."""
    return [step_heatmap(trace, step, batch, head) for step in softmax_steps(trace, sublayer)]
