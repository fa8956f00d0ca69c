"""How long the logit lens, attention rollout and Integrated Gradients take on en-hi, against issue 23's targets;
and, with --paper, their peak memory on the paper preset's long batch against the lazy trace's budget.

    python benchmarks/bench_analyses.py [--repeats 5] [--threads 2] [--source "the girl eats an apple"]
    python benchmarks/bench_analyses.py --paper [--ig-steps 16]

Targets (issue 23), en-hi, one sentence, CPU: lens ≤ 100 ms, rollout ≤ 50 ms, IG with 64 steps ≤ 3 s, and (issue 32)
IG at its defaults, refined until complete within 1 %, ≤ 3 s too, with the steps it used. Each analysis
is timed on a trace already made (what the window and the command line pay on top of their traced run; the
traced run itself is printed as the reference), cold (first call) and warm (median of the repeats). Flow and
gradient × input are printed too, without a target.

--paper: the paper preset (6 + 6 layers, d_model 512, GPT-2's 50,257 tokens) on 8 windows × 512 tokens, the
walkthrough's long batch; each analysis of one item, then the process's peak resident memory against 2.5 GB (the
lazy trace's budget). IG's memory does not grow with its steps (they run in batches of bounded size), so a few
steps show it; its time there is not a target.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch

from scratchformer.analyses import attribute, lens, rollout
from scratchformer.loading.bundle import load_model

TARGETS_S = {"lens": 0.100, "rollout": 0.050, "IG, 64 steps": 3.0, "IG, defaults": 3.0}
PAPER_PEAK_GB = 2.5


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def en_hi(args) -> int:
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run(args.source, "")
    bundle.run(inputs)
    trace_s = statistics.median(timed(lambda: bundle.run(inputs)) for _ in range(args.repeats))
    _, trace = bundle.run(inputs)
    position = inputs.tgt.shape[1] // 2
    # IG at its defaults where it refines furthest: the position whose answer needs the most steps
    hardest = max(range(inputs.tgt.shape[1]), key=lambda p: attribute.compute(bundle, inputs, trace, p).steps)
    print(f"en-hi, “{args.source}” ({inputs.src.shape[1]} source, {inputs.tgt.shape[1]} decoder tokens), "
          f"{torch.get_num_threads()} threads; reference: the traced run itself {trace_s * 1000:.1f} ms")
    runs = {
        "lens": lambda: lens.compute(bundle, trace),
        "rollout": lambda: rollout.compute(bundle, trace, "rollout"),
        "IG, 64 steps": lambda: attribute.compute(bundle, inputs, trace, position, "ig", 64, max_steps=64),
        "IG, defaults": lambda: attribute.compute(bundle, inputs, trace, hardest),
        "flow": lambda: rollout.compute(bundle, trace, "flow"),
        "grad × input": lambda: attribute.compute(bundle, inputs, trace, position, "grad-input"),
    }
    print(f"{'analysis':<16}{'cold':>11}{'warm p50':>11}{'target':>10}{'× target':>10}")
    misses = 0
    for name, fn in runs.items():
        cold = timed(fn)
        warm = statistics.median(timed(fn) for _ in range(args.repeats))
        target = TARGETS_S.get(name)
        if target is None:
            print(f"{name:<16}{cold * 1000:>9.1f}ms{warm * 1000:>9.1f}ms{'—':>10}")
            continue
        ok = warm <= target
        misses += not ok
        print(f"{name:<16}{cold * 1000:>9.1f}ms{warm * 1000:>9.1f}ms{target * 1000:>8.0f}ms{warm / target:>10.2f}  "
              f"{'ok' if ok else 'OVER TARGET'}")
    used = attribute.compute(bundle, inputs, trace, hardest)
    print(f"IG at its defaults, position {hardest}: {used.steps_text()} (complete within {used.gap:.2%})")
    print("every analysis within target (warm)" if not misses else f"{misses} analysis(es) over target")
    return misses


def paper(args) -> int:
    bundle = load_model("paper")
    words = "the girl eats an apple while the boy reads a book in the quiet house near the river".split()
    text = " ".join(words[i % len(words)] for i in range(8 * 512 + 600))
    inputs = bundle.prepare_windows(text, 512, 8)
    t0 = time.perf_counter()
    _, trace = bundle.run(inputs, keep_output=False)
    print(f"paper preset, 8 windows × 512 tokens: traced in {time.perf_counter() - t0:.1f} s, "
          f"peak so far {peak_gb():.2f} GB")
    runs = {
        "lens": lambda: lens.compute(bundle, trace),
        "rollout": lambda: rollout.compute(bundle, trace, "rollout"),
        f"IG, {args.ig_steps} steps": lambda: attribute.compute(bundle, inputs, trace, 255, "ig", args.ig_steps,
                                                                max_steps=args.ig_steps),
    }
    for name, fn in runs.items():
        took = timed(fn)
        print(f"{name:<16}{took:>8.1f} s   peak {peak_gb():.2f} GB")
    ok = peak_gb() <= PAPER_PEAK_GB
    print(f"peak {peak_gb():.2f} GB against {PAPER_PEAK_GB} GB: {'ok' if ok else 'OVER BUDGET'} "
          f"({peak_gb() / PAPER_PEAK_GB:.2f} × the budget)")
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--source", default="the girl eats an apple")
    parser.add_argument("--paper", action="store_true", help="the paper preset's 8 × 512 batch: peak memory")
    parser.add_argument("--ig-steps", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    paper(args) if args.paper else en_hi(args)


if __name__ == "__main__":
    main()
