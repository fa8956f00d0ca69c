"""The output: the top-k next tokens and their probabilities at each target position."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..recording.lazy import TOP_K
from ..recording.trace import Trace
from .heatmap import VocabLabels


@dataclass
class TopKRow:
    position: int
    input_token: str  # the decoder input at this position (the prediction is for the token after it)
    tokens: list[str]
    ids: list[int]
    probs: list[float]


def top_k_table(
    trace: Trace, k: int = 5, batch: int = 0, vocab_labels: VocabLabels | None = None
) -> list[TopKRow]:
    """For each target position, the k most likely next tokens and their probabilities."""
    step = trace.find("generator.probs")
    if step is None:
        return []
    summary = trace.output_summary
    if summary is not None and k <= TOP_K:  # the trace's summary (made from one rerun on first use, if lazy)
        item = summary.item(min(batch, summary.size - 1))
        top_ids, top_probs = item.top_ids[0, :, :k], item.top_probs[0, :, :k]  # (1, T, TOP_K) → (T, k)
    else:
        probs = step.item(batch).to(torch.float32)  # (T, vocab)
        top = torch.topk(probs, min(k, probs.shape[-1]), dim=-1)
        top_ids, top_probs = top.indices, top.values
    inputs = trace.labels("tgt_pos", batch) or []
    rows = []
    for pos in range(top_ids.shape[0]):
        ids = top_ids[pos].tolist()
        tokens = vocab_labels(ids) if vocab_labels else [f"#{i}" for i in ids]
        tok = inputs[pos] if pos < len(inputs) else f"tgt_pos {pos}"
        rows.append(TopKRow(pos, tok, tokens, ids, top_probs[pos].tolist()))
    return rows
