"""Greedy decoding of 64 tokens with and without the key/value cache, measured in the same run (CPU).

    python benchmarks/bench_decoding.py [--models en-hi,paper] [--tokens 64] [--batch 32] [--repeats 5]

Every run forces all 64 steps (the end token is ignored). Without the cache, step t re-runs the decoder over
all t positions (O(T²) work in total); with it, step t feeds one token and reuses the earlier keys and values
(and the encoder's, computed once). Cached and uncached runs alternate and the best of --repeats is kept, so
other work on a shared machine disturbs both alike. Target: cached ≥ 3× faster.

Two regimes, both printed. One sentence (batch 1): each step is a handful of matrix-vector products, bound by
per-call overhead (the small en-hi model) or by reading the weights from memory (the paper-sized model, whose
50 257-token output layer alone is 100 MB) — re-running a prefix of t ≤ 64 positions then costs little more
than running one, so the ratio is small. A batch of sentences (as `scratchformer evaluate` decodes): the
arithmetic the cache saves dominates, and the ratio is large.
"""

from __future__ import annotations

import argparse
import time

import torch

from scratchformer.loading.bundle import load_model
from scratchformer.running.decoding import greedy_batch
from scratchformer.transformer.model import Transformer

SOURCES = ["the boy eats an apple in the house near the river", "we are friends", "the girl reads a red book",
           "my two sisters are going to the market with the teacher"]


def best_time(fn, repeats: int) -> float:
    return min(_timed(fn) for _ in range(repeats))


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(name: str, args) -> None:
    bundle = load_model(name)
    c = bundle.config
    if c.max_len < args.tokens + 1:  # a small trained model: let positions reach 64 (the sinusoids extend)
        state = bundle.model.state_dict()
        c.max_len = args.tokens + 1
        bundle.model = Transformer(c)
        bundle.model.load_state_dict(state)
        bundle.model.eval()
    print(f"model {bundle.name}: d_model {c.d_model}, {c.n_heads} heads, {c.n_decoder_layers} decoder layers, "
          f"{c.tgt_vocab_size} output tokens; {args.tokens} tokens, best of {args.repeats}, "
          f"{torch.get_num_threads()} threads")
    for batch in (1, args.batch):
        ids = [bundle.encode_source(SOURCES[i % len(SOURCES)]) for i in range(batch)]
        width = max(map(len, ids))
        pad = c.pad_id if c.pad_id is not None else 0
        src = torch.tensor([row + [pad] * (width - len(row)) for row in ids])  # (B, S)
        src_pad = torch.tensor([[False] * len(row) + [True] * (width - len(row)) for row in ids])
        src_pad = src_pad if bool(src_pad.any()) else None

        def run(cache: bool, src=src, src_pad=src_pad):
            return greedy_batch(bundle, src, src_pad, args.tokens, cache=cache, stop_at_eos=False)

        assert run(True) == run(False), "cached and uncached decoding disagree"
        times = {True: [], False: []}
        for _ in range(args.repeats):
            for cache in (False, True):
                times[cache].append(_timed(lambda cache=cache: run(cache)))
        uncached, cached = min(times[False]), min(times[True])
        n = args.tokens
        print(f"  batch {batch:>3}: uncached {1000 * uncached / n:8.2f} ms/step, cached {1000 * cached / n:8.2f} "
              f"ms/step → {uncached / cached:5.1f}× (target ≥ 3×); same tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="en-hi,paper", help="comma-separated model names or folders")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32, help="sentences in the batched run (default 32)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        bench(name.strip(), args)


if __name__ == "__main__":
    main()
