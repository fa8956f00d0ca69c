"""How long the three comparisons of issue 36 take on en-hi, against its targets:

    python benchmarks/bench_compare.py [--repeats 21] [--threads 2] [--source "the girl eats an apple"]

- diff: `diff.compute(en-hi, en-hi@step-000032, source)` against one traced run of the same sentence, the way
  `scratchformer trace` makes it (the model's greedy output, then the traced pass: `prepare_run` + `run`), both
  models already open. Target: ≤ 2 × the traced run. The diff runs the greedy decoding once (model A's), two traced
  passes (B reads A's output by teacher forcing), and compares every step and every parameter.
- trajectory: `trajectory.compute` on a trace already made (target ≤ 200 ms), and with the traced run included.
- head metrics: `head_metrics.compute("en-hi")` over every bundled snapshot and the final model on 32 validation
  pairs, cold (a fresh cache: the task's splits made, every checkpoint opened) and warm (target ≤ 5 s).

The traced run and the diff are timed in turn, repeat after repeat, so that other work on the machine falls on
both alike; the ratio is printed from the medians and from the fastest of each (the fastest is the steadiest
figure on a shared machine). Other warm figures are medians of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from scratchformer.analyses import diff, head_metrics, trajectory
from scratchformer.loading.bundle import load_model

TARGET_DIFF_RATIO = 2.0
TARGET_TRAJECTORY_S = 0.200
TARGET_HEAD_METRICS_S = 5.0


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median(fn, repeats: int) -> float:
    fn()  # warm
    return statistics.median(timed(fn) for _ in range(repeats))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--source", default="the thirsty teacher washes the clean car")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    a, b = load_model("en-hi"), load_model("en-hi@step-000032")

    def traced_run():
        a.run(a.prepare_run(args.source), keep_output=False)

    print(f"en-hi, “{args.source}”, {torch.get_num_threads()} threads, {args.repeats} repeats")
    ok = True
    cold_hm = timed(lambda: head_metrics.compute("en-hi"))
    traced_run()
    diff.compute(a, b, args.source)
    runs, diffs = [], []
    for _ in range(args.repeats):  # in turn
        runs.append(timed(traced_run))
        diffs.append(timed(lambda: diff.compute(a, b, args.source)))
    run_s, diff_s = statistics.median(runs), statistics.median(diffs)
    ratio, best = diff_s / run_s, min(diffs) / min(runs)
    ok &= best <= TARGET_DIFF_RATIO
    print(f"traced run (greedy output + traced pass) median {run_s * 1000:.1f} ms, fastest {min(runs) * 1000:.1f} ms; "
          f"diff against en-hi@step-000032 median {diff_s * 1000:.1f} ms, fastest {min(diffs) * 1000:.1f} ms: "
          f"{ratio:.2f}× from the medians, {best:.2f}× from the fastest (target ≤ {TARGET_DIFF_RATIO:g}×)")
    _, trace = a.run(a.prepare_run(args.source), keep_output=False)
    traj_s = median(lambda: trajectory.compute(a, trace), args.repeats)
    with_run = median(lambda: trajectory.compute(a, a.run(a.prepare_run(args.source), keep_output=False)[1]),
                      args.repeats)  # fmt: skip
    ok &= traj_s <= TARGET_TRAJECTORY_S
    print(f"trajectory on the trace {traj_s * 1000:.1f} ms, with the traced run {with_run * 1000:.1f} ms "
          f"(target ≤ {TARGET_TRAJECTORY_S * 1000:.0f} ms)")
    warm_hm = median(lambda: head_metrics.compute("en-hi"), max(1, args.repeats // 3))
    points = len(head_metrics.checkpoints_of("en-hi"))
    ok &= cold_hm <= TARGET_HEAD_METRICS_S
    print(f"head metrics over {points} checkpoints (every snapshot and the final model), 32 pairs: cold "
          f"{cold_hm:.2f} s, warm {warm_hm:.2f} s (target ≤ {TARGET_HEAD_METRICS_S:g} s)")
    print("all within target" if ok else "NOT all within target")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
