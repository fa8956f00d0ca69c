"""What the explanation panel costs on the UI thread, against the traced forward pass measured in the same run.

    python benchmarks/bench_explain.py [--model paper] [--tokens 400] [--repeats 3]

The window computes a step's explanation (statistics over the step's tensors) on the UI thread when the step is
shown, so the slowest single step is what a user can feel. Printed: the traced forward pass, the slowest step's
explanation (target ≤ 60 ms, the window's redraw budget for a step), and every step together, each also as a
ratio to the forward pass. Best of --repeats for each, so other work on a shared machine disturbs all alike.
"""

from __future__ import annotations

import argparse
import time

from scratchformer.explain import explain_step
from scratchformer.loading.bundle import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="paper")
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bundle = load_model(args.model)
    inputs = bundle.prepare_run(" ".join(["word"] * args.tokens), start_only=True, truncate=True)

    forward = min(_timed(lambda: bundle.run(inputs)) for _ in range(args.repeats))
    _, trace = bundle.run(inputs)
    per_step: dict[str, float] = {}
    for _ in range(args.repeats):
        for step in trace:
            t = _timed(lambda step=step: explain_step(trace, step, bundle.config))
            per_step[step.name] = min(per_step.get(step.name, t), t)
    slowest = max(per_step, key=per_step.get)
    total = sum(per_step.values())
    print(f"{args.model}, {args.tokens} source tokens, {len(trace)} steps (CPU)")
    print(f"traced forward pass          {forward * 1e3:8.1f} ms")
    print(f"slowest step's explanation   {per_step[slowest] * 1e3:8.1f} ms  ({per_step[slowest] / forward:.3f}× "
          f"the forward; {slowest}; target ≤ 60 ms)")
    print(f"all steps' explanations      {total * 1e3:8.1f} ms  ({total / forward:.2f}× the forward)")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
