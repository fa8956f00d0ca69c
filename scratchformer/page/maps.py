"""Every step's heatmaps for the page, at full resolution while a byte budget allows, reduced to blocks where not.

The maps are the plot data the window and the exporters draw (plotdata.step_heatmap / heads_grid): the same
values, token labels, colour levels and colour map. One map entry holds one step for one batch item, every head
of it: (heads, rows, cols) values, packed by packing.pack_values.

The budget (bytes of page text) is shared in two tiers, so that a long run keeps what matters most:
1. the attention weights of the first batch item: every layer and head at full resolution as long as they fit
   in the budget less a reserve for the rest (BertViz's use case, all-MiniLM-L6-v2 at 510 tokens: ~36 MB);
2. every other map, smallest first, each given at most an even share of what is left, so the many small steps
   stay whole and the few large ones give way. A map over its share is reduced to blocks of cells, one value per
   block as the window reduces a map for the screen (plotdata.reduction: the block's largest value, or for a
   diverging map the one farthest from 0), so a stand-out cell never vanishes; the page says which maps were
   reduced and by how much, and their hover shows the block's value.
The sizes are estimated before packing (float16 compresses to 0.7–0.9 of its bytes) and the real packed size is
then taken off the budget, so the page stays within it (give or take one small map's minimum).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..plotdata import (
    Heatmap,
    VocabLabels,
    block_reduce,
    display_blocks,
    display_reduction,
    head_count,
    heads_grid,
    step_heatmap,
)
from ..plotdata.heatmap import VOCAB_COLUMNS
from ..recording.trace import Step, Trace
from .packing import finite_or_text, pack_values

PAGE_BYTES = 41_000_000  # the maps' budget in page text; all-MiniLM-L6-v2's 510-token page stays under 43 MB
RESERVE = 0.04  # the part of the budget kept for tier 2 however many attention weights there are
BASE64 = 4 / 3
RATIO = 0.9  # a safe guess of what deflate leaves of shuffled float16 (0.72 for attention maps, 0.87 elsewhere)
MIN_SIDE = 8  # a reduced map keeps at least this many blocks along each axis (or all the cells it has)


@dataclass
class Planned:
    """One map to store: a step, a batch item and how many values it has (known before computing it)."""

    step: Step
    item: int
    cells: int  # heads × rows × cols
    tier: int  # 1: the first item's attention weights; 2: the rest

    @property
    def estimate(self) -> float:
        return self.cells * 2 * RATIO * BASE64


def shown_cells(step: Step) -> int:
    """Values of one batch item's map, all heads: the shape without the batch axis, a vocabulary cut to the
    columns the heatmap keeps (plotdata.VOCAB_COLUMNS)."""
    n = 1
    for d, size in zip(step.dims, step.shape):
        if d == "batch":
            continue
        n *= min(size, VOCAB_COLUMNS) if d == "vocab" else size
    return n


def plan(trace: Trace, items: list[int]) -> list[Planned]:
    """Every (step, item) in the order the budget serves them: tier 1, then tier 2 smallest first."""
    out = []
    for item in items:
        for step in trace:
            tier = 1 if item == items[0] and step.kind == "attention_weights" else 2
            out.append(Planned(step, item, shown_cells(step), tier))
    return sorted(out, key=lambda p: (p.tier, p.item != items[0], p.cells, p.step.index))


def heatmaps_of(trace: Trace, step: Step, item: int, vocab_labels: VocabLabels | None) -> list[Heatmap]:
    """One heatmap per head (shared levels, as the window's grid of heads), or the one map of a step without
    heads, with the vocabulary's chosen columns named."""
    if head_count(step) > 1:
        return heads_grid(trace, step, item)
    return [step_heatmap(trace, step, item, 0, vocab_labels)]


def reduce_to(values: np.ndarray, budget: float, colormap: str, ratio: float = RATIO
              ) -> tuple[np.ndarray, tuple[int, int]]:  # fmt: skip
    """(heads, rows, cols) → the same reduced to blocks so that its packed size, estimated with `ratio` (packed
    text per float16 byte), fits `budget`; and the block size, (1, 1) when it fits whole."""
    heads, rows, cols = values.shape
    allowed = budget / (2 * ratio * BASE64) / heads  # cells per head
    if rows * cols <= allowed:
        return values, (1, 1)
    allowed = max(allowed, 1.0)
    scale = math.sqrt(allowed / (rows * cols))  # the same factor on both axes, unless one is at its floor
    r = max(rows * scale, min(rows, MIN_SIDE))
    c = max(min(cols, allowed / r), min(cols, MIN_SIDE))
    r = max(min(rows, allowed / c), min(rows, MIN_SIDE))
    block = display_blocks((rows, cols), (r, c))
    mode = display_reduction(colormap)
    reduced = np.stack([block_reduce(v, block, mode) for v in values])  # (heads, ⌈rows/br⌉, ⌈cols/bc⌉)
    return reduced, block


def packed_within(values: np.ndarray, share: float, colormap: str
                  ) -> tuple[np.ndarray, tuple[int, int], str, str]:  # fmt: skip
    """(values kept, block, packed text, dtype): the whole map when its packed text fits `share`, else the map
    reduced to blocks. A map that may fit is packed to find out; one far over its share is reduced at once, and
    again with the compression it showed if it came out too large (down to MIN_SIDE blocks a side)."""
    estimate = values.size * 2 * RATIO * BASE64
    ratio = RATIO
    if estimate <= 1.6 * share:
        text, dtype = pack_values(values)
        if len(text) <= share:
            return values, (1, 1), text, dtype
        ratio = len(text) / (values.size * 2 * BASE64)
    for _ in range(4):
        kept, block = reduce_to(values, share, colormap, ratio)
        text, dtype = pack_values(kept)
        if len(text) <= share or max(kept.shape[1:]) <= MIN_SIDE:  # smaller than that it cannot go
            break
        ratio = len(text) / (kept.size * 2 * BASE64)  # what this map really packs to, header included
    return kept, block, text, dtype


def label_ref(labels: list[str] | None, item: int, source: list[list[str]], target: list[list[str]]):
    """Labels for the index: a reference to the run's token list when they are one ('src' or 'tgt' of the item),
    the list itself otherwise (vocabulary columns, experts), None for an axis without labels."""
    if labels is None:
        return None
    for name, rows in (("src", source), ("tgt", target)):
        if item < len(rows) and list(rows[item][: len(labels)]) == list(labels) and len(labels) <= len(rows[item]):
            return name
    return list(labels)


def build_maps(trace: Trace, items: list[int], vocab_labels: VocabLabels | None, budget: float = PAGE_BYTES,
               progress: Callable[[str], None] | None = None) -> tuple[dict[str, str], dict]:  # fmt: skip
    """(chunks: id → packed text, maps: "step index/item" → what the viewer needs to draw it)."""
    planned = plan(trace, items)
    n_tier1 = sum(1 for p in planned if p.tier == 1)
    left = float(budget)
    tier1_left = left * (1 - RESERVE)
    chunks: dict[str, str] = {}
    maps: dict[str, dict] = {}
    for n, p in enumerate(planned):  # tier 1 comes first: n counts its maps
        share = tier1_left / (n_tier1 - n) if p.tier == 1 else left / (len(planned) - n)
        hms = heatmaps_of(trace, p.step, p.item, vocab_labels)
        values = np.stack([h.values for h in hms])  # (heads, rows, cols)
        first = hms[0]
        kept, block, text, dtype = packed_within(values, share, first.colormap)
        left -= len(text)
        if p.tier == 1:
            tier1_left -= len(text)
        key = f"{p.step.index}/{p.item}"
        chunks[key] = text
        maps[key] = {
            "chunk": key, "dtype": dtype, "shape": list(kept.shape), "full": list(values.shape[1:]),
            "block": list(block), "levels": [finite_or_text(first.levels[0]), finite_or_text(first.levels[1])],
            "cmap": first.colormap, "row_dim": first.row_dim, "col_dim": first.col_dim,
            "rows": label_ref(first.row_labels, p.item, trace.source_tokens, trace.target_tokens),
            "cols": label_ref(first.col_labels, p.item, trace.source_tokens, trace.target_tokens),
            "heads": [h.title for h in hms] if len(hms) > 1 else [],
            "masked": first.masked is not None or p.step.kind in ("mask", "masked_scores"),
            "gaps": first.gaps is not None,
        }  # fmt: skip
        if "vocab_ids" in first.extra:
            maps[key]["vocab_ids"] = [int(i) for i in first.extra["vocab_ids"]]
        if progress is not None and n % 8 == 0:
            progress(f"map {n + 1} of {len(planned)}")
    return chunks, maps
