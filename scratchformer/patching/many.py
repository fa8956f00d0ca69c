"""Exact activation patching over many pairs, the patched runs of several pairs in one forward pass.

batched.py runs one pair's patches of one layer as the items of a batch. Here a batch's items may come from
different pairs of the same token lengths: item b patches component c_b of pair j_b, so its rows of the corrupted
run's stored activations (the layer's input, the encoder's memory, the earlier keys and values) are pair j_b's,
its patched cells take pair j_b's clean values, and its metric reads pair j_b's answer and wrong token. Each
item's numbers are those of its own pair's patched run; the grouping only decides which items share a pass.

The grouping depends on the pairs of one chunk alone (`pairs_per_chunk`), never on how many processes share the
work, so a pair's patched metrics are the same whichever rank computes its chunk.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..loading.memory import size_text
from .batched import _run_batch, batch_size, bytes_per_item, start_position
from .components import Component
from .metric import Metric, _wide
from .pair import Pair

MAX_ITEMS = 512  # batched.batch_size's cap on the items of one pass


@dataclass(frozen=True)
class RowMetric:
    """Each batch item's own metric: pair j_b's answer and wrong token (logit-diff) or answer (logprob)."""

    answers: torch.Tensor  # (B,) token ids
    wrongs: torch.Tensor | None  # (B,) token ids, None for logprob
    kind: str

    @classmethod
    def of(cls, metrics: list[Metric]) -> RowMetric:
        wrongs = None if metrics[0].kind == "logprob" else torch.tensor([m.wrong for m in metrics])
        return cls(torch.tensor([m.answer for m in metrics]), wrongs, metrics[0].kind)

    def values(self, model, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (B, d_model) → m (B,), row b by Metric.values' arithmetic with row b's tokens."""
        gen = model.generator
        x = hidden.to(gen.proj.weight.dtype)
        if gen.scale is not None:
            x = x * gen.scale
        answers = self.answers.to(x.device)
        if self.kind == "logprob":
            logits = gen.cap(gen.logits(x[:, None]))[:, 0]  # (B, vocab)
            return _wide(logits).log_softmax(-1).gather(1, answers[:, None])[:, 0]  # (B,)
        rows = torch.stack([answers, self.wrongs.to(x.device)], 1)  # (B, 2)
        two = (x[:, None, :] * gen.proj.weight[rows]).sum(-1)  # (B, 2), products summed as Metric.values sums them
        if gen.final_logits_bias is not None:
            two = two + gen.final_logits_bias[rows]
        two = _wide(gen.cap(two))
        return two[:, 0] - two[:, 1]  # (B,)


class _Rows:
    """step → the batch's rows of a stored run: pair j_b's (1, …) tensor as row b, concatenated (B, …)."""

    def __init__(self, runs: list[dict[str, torch.Tensor]], which: list[int]):
        self.runs, self.which = runs, which

    def __getitem__(self, step: str) -> torch.Tensor:
        return torch.cat([self.runs[j][step] for j in self.which])  # (B, …)

    def __contains__(self, step: str) -> bool:
        return step in self.runs[self.which[0]]


def _rows_pair(pairs: list[Pair], which: list[int]) -> Pair:
    """A Pair whose corrupted run holds the batch's rows (what batched._run_batch reads: the model, the corrupted
    inputs and activations, the metric)."""
    first = pairs[which[0]]
    src = None if first.src_corrupt is None else torch.cat([pairs[j].src_corrupt for j in which])  # (B, S)
    tgt = torch.cat([pairs[j].tgt_corrupt for j in which])  # (B, T)
    return Pair(first.bundle, None, src, tgt, tgt, {}, _Rows([p.corrupt for p in pairs], which),
                RowMetric.of([pairs[j].metric for j in which]), 0.0, 0.0)  # fmt: skip


def recorded_bytes(pair: Pair) -> int:
    """What one pair's two recorded runs hold."""
    return sum(t.numel() * t.element_size() for run in (pair.clean, pair.corrupt) for t in run.values())


def pairs_per_chunk(model, n_pairs: int, largest_group: int, per_item: int, per_pair: int, budget: int | None,
                    notes: list[str] | None = None) -> int:  # fmt: skip
    """How many pairs to record and patch together: enough that a layer's patches of all of them fill one pass
    (MAX_ITEMS items), fewer when their recorded runs and one full pass would not fit in the memory budget."""
    want = max(1, min(n_pairs, MAX_ITEMS // max(largest_group, 1)))
    if budget is None:
        return want
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    room = budget - weights - per_item * min(MAX_ITEMS, largest_group * want)
    fits = max(1, room // max(per_pair, 1))
    if fits < want:
        if notes is not None:
            said = f"{fits} pair{'s' if fits > 1 else ''}"
            notes.append(f"Patched {said} at a time instead of {want}, to keep their recorded runs (about "
                         f"{size_text(per_pair)} a pair) within the {size_text(budget)} memory budget.")  # fmt: skip
        return int(fits)
    return want


def patched_metrics_many(pairs: list[Pair], components: list[Component], budget: int | None = None,
                         notes: list[str] | None = None, cancelled: Callable[[], bool] | None = None
                         ) -> torch.Tensor | None:  # fmt: skip
    """m_patched (P, n): row j, column i is pair j's corrupted run with component i patched from its clean run,
    as batched.patched_metrics gives it for pair j alone. None when cancelled() turns true between passes."""
    out = torch.tensor([[p.m_corrupt] * len(components) for p in pairs], dtype=torch.float32)  # (P, n)
    groups: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for j, pair in enumerate(pairs):
        for i, c in enumerate(components):
            p = start_position(c, pair.clean, pair.corrupt)
            if p is not None:  # None: nothing changes, m_patched = m_corrupt
                causal = c.stack == "decoder" and c.axis == "tgt"
                groups[(c.stack, c.layer)].append((p if causal else 0, j, i))
    size = batch_size(pairs[0], max((len(g) for g in groups.values()), default=1), budget, notes)
    batches = []
    for (stack, layer), items in groups.items():
        items.sort(reverse=True)  # latest start first: a pass starts at its earliest item's position
        batches += [(stack, layer, items[a : a + size]) for a in range(0, len(items), size)]
    for stack, layer, items in batches:
        if cancelled is not None and cancelled():
            return None
        which = [j for _, j, _ in items]
        start = min(p for p, _, _ in items)
        rows = _rows_pair(pairs, which)
        clean = _Rows([p.clean for p in pairs], which)
        m = _run_batch(rows, stack, layer, start, [components[i] for _, _, i in items], clean)  # (B,)
        out[which, [i for _, _, i in items]] = m.float().cpu()
    return out


__all__ = ["RowMetric", "bytes_per_item", "pairs_per_chunk", "patched_metrics_many", "recorded_bytes"]
