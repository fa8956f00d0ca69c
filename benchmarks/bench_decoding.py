"""Greedy decoding of 64 tokens with and without the key/value cache, measured in the same run (CPU).

    python benchmarks/bench_decoding.py [--model paper|en-hi|DIR] [--tokens 64] [--repeats 3] [--threads 2]

Both runs force all 64 steps (the end token is ignored). Without the cache, step t re-runs the decoder over
all t positions (O(T²) work in total); with it, step t feeds one token and reuses the earlier keys and values
(and the encoder's, computed once). Target: cached ≥ 3× faster. Default model: a paper-sized decoder
(d_model 512, 8 heads, 6 + 6 layers, random weights; the decoder's work is what is timed).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from scratchformer.bundle import load_model
from scratchformer.decoding import greedy


def time_decode(bundle, src_ids, tokens: int, cache: bool, repeats: int) -> tuple[float, list[int]]:
    times, out = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        out = greedy(bundle, src_ids, tokens, cache=cache, stop_at_eos=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="paper")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--source", default="the boy eats an apple in the house near the river")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_model(args.model)
    c = bundle.config
    if c.max_len < args.tokens + 1:  # a small trained model: let the positions reach 64 (sinusoids extend)
        from scratchformer.model import Transformer

        state = bundle.model.state_dict()
        c.max_len = args.tokens + 1
        model = Transformer(c)
        model.load_state_dict(state)
        bundle.model = model.eval()
    src_ids = bundle.prepare(args.source).src[0].tolist() if c.has_encoder else []
    greedy(bundle, src_ids, 4, cache=True, stop_at_eos=False)  # warm-up
    uncached, a = time_decode(bundle, src_ids, args.tokens, False, args.repeats)
    cached, b = time_decode(bundle, src_ids, args.tokens, True, args.repeats)
    print(f"model {bundle.name}: d_model {c.d_model}, {c.n_heads} heads, {c.n_decoder_layers} decoder layers; "
          f"{args.tokens} tokens, median of {args.repeats}, {torch.get_num_threads()} threads")
    print(f"  uncached: {1000 * uncached / args.tokens:8.2f} ms/token  ({uncached:.2f} s)")
    print(f"  cached:   {1000 * cached / args.tokens:8.2f} ms/token  ({cached:.2f} s)")
    print(f"  speed-up: {uncached / cached:.1f}×  (target ≥ 3×); same tokens: {a == b}")


if __name__ == "__main__":
    main()
