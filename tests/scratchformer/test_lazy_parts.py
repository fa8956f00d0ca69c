"""The pieces of a lazy trace, by hand on tensors small enough to count: bytes held (a storage once, however many
views), the recompute cache's limit (an entry of exactly the limit is kept, a larger one is returned and not
kept), its least-recently-used eviction and counters, and the output summary's top tokens and next-token
probabilities over a batch given in chunks. Found by mutation testing (scripts/mutation.sh lazy)."""

from __future__ import annotations

import torch

from scratchformer.recording.lazy import Held, OutputSummary, Recompute, RecomputeCache, storage_bytes


def test_storage_bytes_count_each_storage_once_and_nothing_on_meta():
    a = torch.zeros(10)  # 40 bytes
    b = torch.zeros(3, dtype=torch.float64)  # 24 bytes
    assert storage_bytes([a, a[:5], a.view(2, 5), b, torch.empty(100, device="meta"), None, 7]) == 40 + 24
    assert storage_bytes([]) == 0


def entry(n_floats: int) -> dict[str, torch.Tensor]:
    return {"x": torch.zeros(n_floats)}  # 4 bytes a float


def test_the_cache_keeps_an_entry_of_exactly_its_limit_and_evicts_the_least_recently_used():
    cache = RecomputeCache(limit_bytes=80)
    first = cache.get_or_compute(("a",), lambda: entry(10))  # 40 B
    cache.get_or_compute(("b",), lambda: entry(10))  # 80 B: exactly the limit, both kept
    assert (len(cache), cache.bytes, cache.misses, cache.hits, cache.evictions) == (2, 80, 2, 0, 0)
    assert cache.get_or_compute(("a",), lambda: entry(1)) is first  # a hit: a is now the most recently used
    assert cache.hits == 1 and cache.misses == 2
    cache.get_or_compute(("c",), lambda: entry(10))  # 120 B > 80: b, the least recently used, goes
    assert cache.contains(("a",)) and cache.contains(("c",)) and not cache.contains(("b",))
    assert (len(cache), cache.bytes, cache.misses, cache.evictions) == (2, 80, 3, 1)
    cache.get_or_compute(("d",), lambda: entry(20))  # 80 B alone: a and c go
    assert (len(cache), cache.bytes, cache.evictions) == (1, 80, 3) and cache.contains(("d",))
    cache.get_or_compute(("d",), lambda: entry(1))
    assert (cache.hits, cache.misses) == (2, 4)
    cache.clear()
    assert (len(cache), cache.bytes) == (0, 0)


def test_an_entry_larger_than_the_limit_is_returned_but_not_kept():
    cache = RecomputeCache(limit_bytes=80)
    cache.get_or_compute(("a",), lambda: entry(10))
    big = cache.get_or_compute(("big",), lambda: entry(21))  # 84 B
    assert big["x"].shape == (21,)
    assert not cache.contains(("big",)) and cache.contains(("a",)) and cache.evictions == 0
    assert cache.get_or_compute(("big",), lambda: entry(21)) is not big and cache.misses == 3


def test_a_recompute_asks_its_cache_under_its_key_and_held_just_returns_its_tensor():
    cache = RecomputeCache()
    calls = []
    recompute = Recompute("encoder.0.self_attn", lambda: calls.append(1) or entry(2), cache, ("input",))
    assert recompute.get()["x"].shape == (2,) and recompute.get() is recompute.get()
    assert calls == [1] and cache.contains(("encoder.0.self_attn",)) and recompute.inputs == ("input",)
    t = torch.ones(3)
    held = Held("decoder.0.ffn.hidden", t)
    assert held.get() == {"decoder.0.ffn.hidden": t} and held.inputs == (t,)


def test_the_output_summary_of_a_batch_in_chunks_by_hand():
    # item 0: 3 positions over 4 tokens; item 1 its own values
    p0 = torch.tensor([[[0.1, 0.6, 0.2, 0.1], [0.5, 0.1, 0.3, 0.1], [0.15, 0.25, 0.1, 0.5]]])
    p1 = torch.tensor([[[0.7, 0.15, 0.1, 0.05], [0.1, 0.05, 0.15, 0.7], [0.3, 0.2, 0.4, 0.1]]])
    target = torch.tensor([[0, 2, 1], [3, 3, 0]])  # decoder inputs: the token after position t is target[t + 1]
    for chunks in ([p0, p1], [torch.cat([p0, p1])]):
        summary = OutputSummary.of(chunks, target, k=2)
        assert summary.top_ids.tolist() == [[[1, 2], [0, 2], [3, 1]], [[0, 1], [3, 2], [2, 0]]]
        assert torch.allclose(summary.top_probs, torch.tensor([[[0.6, 0.2], [0.5, 0.3], [0.5, 0.25]],
                                                               [[0.7, 0.15], [0.7, 0.15], [0.4, 0.3]]]))
        # item 0: P(2) at position 0 = 0.2, P(1) at position 1 = 0.1; item 1: P(3) = 0.05, P(0) = 0.1
        assert torch.allclose(summary.next_probs, torch.tensor([[0.2, 0.1], [0.05, 0.1]]))
    assert OutputSummary.of([p0], None).next_probs is None  # no decoder input: nothing to compare with
    assert OutputSummary.of([p0], target[:1, :1]).next_probs is None  # one position has no next token
    two = OutputSummary.of([p0[:, :2]], target[:1, :2])  # two positions: one next token, P(2) at position 0
    assert torch.allclose(two.next_probs, torch.tensor([[0.2]]))
    assert OutputSummary.of([p0], None, k=10).top_ids.shape == (1, 3, 4)  # k beyond the vocabulary: all 4
    joined = OutputSummary.join([OutputSummary.of([p0], target[:1]), OutputSummary.of([p1], target[1:])])
    assert joined.top_ids.shape == (2, 3, 4) and torch.allclose(joined.next_probs, torch.tensor([[0.2, 0.1],
                                                                                                [0.05, 0.1]]))
    part = OutputSummary.join([OutputSummary.of([p0], target[:1]), OutputSummary.of([p1], None)])
    assert part.next_probs is None  # one chunk without ids: none for the batch
