"""What a lazy trace keeps in place of large tensors (see scratchformer.recording.trace): recomputes of a sublayer's
interior with their byte-limited cache, and the output layer's summary (made on first use from that layer's
rerun when the probabilities are not kept)."""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch


def storage_bytes(tensors) -> int:
    """Bytes held by these tensors, each underlying storage counted once (views share their base's)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


class RecomputeCache:
    """Recomputed interiors, least recently used evicted first once their bytes pass `limit_bytes`.

    Shared by the window and the threads that recompute for it: the lock guards the bookkeeping only, never a
    computation, so the window can always ask what is there (`contains`, `bytes`) without waiting. Two threads
    asking for the same key compute it once. An entry larger than the whole limit is returned but not kept."""

    def __init__(self, limit_bytes: int = 256 * 2**20) -> None:
        self.limit_bytes = limit_bytes
        self._entries: OrderedDict[tuple, tuple[dict[str, torch.Tensor], int]] = OrderedDict()
        self._lock = threading.Lock()
        self._running: dict[tuple, threading.Event] = {}  # keys being computed now, by some thread
        self.hits = self.misses = self.evictions = 0

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(size for _, size in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def contains(self, key: tuple) -> bool:
        with self._lock:
            return key in self._entries

    def get_or_compute(self, key: tuple, compute: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return self._entries[key][0]
                running = self._running.get(key)
                if running is None:
                    self._running[key] = threading.Event()
                    self.misses += 1
                    break
            running.wait()  # another thread is computing it: take its result (or compute, if it was not kept)
        try:
            parts = compute()
            size = storage_bytes(parts.values())
            with self._lock:
                if size <= self.limit_bytes:
                    self._entries[key] = (parts, size)
                    while sum(s for _, s in self._entries.values()) > self.limit_bytes:
                        self._entries.popitem(last=False)
                        self.evictions += 1
            return parts
        finally:
            with self._lock:
                self._running.pop(key).set()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


TOP_K = 24  # tokens kept per position by the output summary (plotdata's VOCAB_COLUMNS)


@dataclass
class OutputSummary:
    """What the Output tab and the walkthrough read from the output probabilities, kept so that the
    (B, T, vocab) tensor need not be: each position's most likely tokens, and the probability the model gave
    the token that actually comes next in the decoder input."""

    top_ids: torch.Tensor  # (B, T, k) int64, most likely first
    top_probs: torch.Tensor  # (B, T, k)
    next_probs: torch.Tensor | None  # (B, T − 1): P(decoder input[t + 1]) at position t; None without ids

    @staticmethod
    def of(items, target_ids: torch.Tensor | None, k: int = TOP_K) -> OutputSummary:
        """From probability tensors (b, T, vocab) covering the batch in order, one or several items at a time."""
        ids, probs, nexts = [], [], []
        row = 0
        for p in items:
            top = p.topk(min(k, p.shape[-1]), dim=-1)
            ids.append(top.indices.cpu())
            probs.append(top.values.cpu())
            if target_ids is not None and target_ids.shape[1] > 1:
                following = target_ids[row : row + p.shape[0], 1:, None].to(p.device)  # (b, T − 1, 1)
                nexts.append(p[:, :-1].gather(-1, following)[..., 0].cpu())
            row += p.shape[0]
        return OutputSummary(torch.cat(ids), torch.cat(probs), torch.cat(nexts) if nexts else None)

    @staticmethod
    def join(parts: list[OutputSummary]) -> OutputSummary:
        """Summaries of consecutive batch items → one."""
        nexts = [p.next_probs for p in parts]
        return OutputSummary(torch.cat([p.top_ids for p in parts]), torch.cat([p.top_probs for p in parts]),
                             None if any(n is None for n in nexts) else torch.cat(nexts))  # fmt: skip

    @property
    def size(self) -> int:
        """How many batch items it covers."""
        return self.top_ids.shape[0]

    def item(self, b: int) -> OutputSummary:
        """Batch item b's summary (a batch axis of 1)."""
        pick = slice(b, b + 1)
        return OutputSummary(self.top_ids[pick], self.top_probs[pick],
                             None if self.next_probs is None else self.next_probs[pick])  # fmt: skip


SUMMARY_KEYS = ("top_ids", "top_probs", "next_probs")  # the output layer's rerun returns them as "summary.<key>"


def summary_tensors(summary: OutputSummary) -> dict[str, torch.Tensor]:
    """An OutputSummary as tensors for a rerun's dict (next_probs left out when there is none)."""
    found = {k: getattr(summary, k) for k in SUMMARY_KEYS}
    return {f"summary.{k}": t for k, t in found.items() if t is not None}


def summary_from(tensors: dict[str, torch.Tensor]) -> OutputSummary:
    """summary_tensors' dict (with whatever else the rerun returned) → the OutputSummary."""
    return OutputSummary(*(tensors.get(f"summary.{k}") for k in SUMMARY_KEYS))


class LazyOutputSummary:
    """An OutputSummary of a batch traced in chunks, a chunk's part made only when something first reads it.

    A lazy trace that keeps no (B, T, vocab) probabilities gives each chunk a function that reruns the output
    layer (the rerun that shows the logits and probabilities, which returns the summary as well): so a trace
    that never shows its output never pays for a softmax and a top-k over the whole vocabulary at every
    position, and showing item b costs one chunk's rerun. Reads the same as an OutputSummary: `item(b)` for one
    item; `top_ids`, `top_probs` and `next_probs` for the whole batch (every chunk made)."""

    def __init__(self, parts: list[tuple[int, OutputSummary | Callable[[], OutputSummary]]]) -> None:
        """parts: (batch items, its summary or the function that makes it) for each chunk, in batch order."""
        self._parts = [p if isinstance(p, OutputSummary) else None for _, p in parts]
        self._makers = [p for _, p in parts]
        sizes = [n for n, _ in parts]
        self.offsets = tuple(sum(sizes[:k]) for k in range(len(sizes)))  # each chunk's first batch item
        self.size = sum(sizes)

    @staticmethod
    def join(parts: list) -> OutputSummary | LazyOutputSummary:
        """The summaries of consecutive chunks (eager or lazy) → one; an eager one when all of them are."""
        if all(isinstance(p, OutputSummary) for p in parts):
            return OutputSummary.join(parts)
        flat = []
        for p in parts:
            flat += [(p.size, p)] if isinstance(p, OutputSummary) else list(zip(p._sizes(), p._makers))
        return LazyOutputSummary(flat)

    def _sizes(self) -> list[int]:
        ends = (*self.offsets[1:], self.size)
        return [z - a for a, z in zip(self.offsets, ends)]

    def chunk(self, k: int) -> OutputSummary:
        """Chunk k's summary, made on first use (two threads asking at once may both make it: the same bits)."""
        part = self._parts[k]
        if part is None:
            part = self._parts[k] = self._makers[k]()
        return part

    def item(self, b: int) -> OutputSummary:
        k = bisect_right(self.offsets, b) - 1  # the chunk holding item b
        return self.chunk(k).item(b - self.offsets[k])

    def made(self) -> int:
        """How many chunks have their summary already."""
        return sum(p is not None for p in self._parts)

    def whole(self) -> OutputSummary:
        return OutputSummary.join([self.chunk(k) for k in range(len(self._parts))])

    @property
    def top_ids(self) -> torch.Tensor:
        return self.whole().top_ids

    @property
    def top_probs(self) -> torch.Tensor:
        return self.whole().top_probs

    @property
    def next_probs(self) -> torch.Tensor | None:
        return self.whole().next_probs


class Recompute:
    """How to get one batch item's sublayer interior back: `fn()` reruns the code the forward pass ran, on the
    stored inputs, and returns every interior tensor by step name (on CPU, batch axis of size 1)."""

    def __init__(self, key: str, fn: Callable[[], dict[str, torch.Tensor]], cache: RecomputeCache,
                 inputs: tuple = ()) -> None:  # fmt: skip
        self.key, self.fn, self.cache = key, fn, cache
        self.inputs = inputs  # the tensors fn reads (counted in Trace.stored_bytes)

    def get(self) -> dict[str, torch.Tensor]:
        return self.cache.get_or_compute((self.key,), self.fn)

    def ready(self) -> bool:
        """Whether get() returns without rerunning the sublayer (its interior is in the cache)."""
        return self.cache.contains((self.key,))


class Held(Recompute):
    """A chunk that kept a step another chunk recomputes (a smaller last chunk): it just returns the tensor."""

    def __init__(self, name: str, tensor: torch.Tensor) -> None:
        super().__init__(name, lambda: {name: tensor}, RecomputeCache(0), (tensor,))

    def get(self) -> dict[str, torch.Tensor]:
        return self.fn()

    def ready(self) -> bool:
        return True  # the tensor is kept: nothing to rerun
