"""What a lazy trace keeps in place of large tensors (see scratchformer.trace): recomputes of a sublayer's
interior with their byte-limited cache, and the output layer's summary."""

from __future__ import annotations

import threading
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
