"""en-hi's dictionary, end to end (issue 44): how long `scratchformer features train` takes with its defaults, and
what attaching the dictionary adds to a trace.

    python benchmarks/bench_features.py [--repeat 3] [--traces 30] [--threads N]

The training is the command a user runs, timed whole in a fresh process (opening the model, reading the activations
of task:en-hi, training 512 features at k 8 for 8 epochs, the held-out figures and CE loss recovered):

    scratchformer features train --model en-hi --at decoder.1.add_norm3.out --corpus task:en-hi --out DIR
        --width 512 --k 8 --json

The trace is bundle.run of one sentence without and with the dictionary attached (its four steps recorded after
decoder.1.add_norm3.out), the minimum over --traces runs each, interleaved. Targets: training under a minute on a
CPU, attaching ≤ 10 % of the trace's time. The machine may be shared: time on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POINT = "decoder.1.add_norm3.out"
SOURCE = "the girl eats an apple"


def train_once(out: Path, threads: int | None) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "scratchformer", "features", "train", "--model", "en-hi", "--at", POINT, "--corpus",
           "task:en-hi", "--out", str(out), "--width", "512", "--k", "8", "--json"]  # fmt: skip
    start = time.perf_counter()
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"features train failed:\n{proc.stderr[-2000:]}")
    return seconds, json.loads(proc.stdout.strip().splitlines()[-1])


def trace_times(folder: Path, n: int) -> tuple[float, float]:
    from scratchformer.features.attach import traced
    from scratchformer.features.folder import load
    from scratchformer.loading.bundle import load_model

    bundle = load_model("en-hi")
    d = load(folder)
    inputs = bundle.prepare_run(SOURCE, "")
    plain, attached = [], []
    for _ in range(3):  # warm up both paths
        bundle.run(inputs, keep_output=False)
        traced(bundle, inputs, [d], keep_output=False)
    for _ in range(n):
        t = time.perf_counter()
        bundle.run(inputs, keep_output=False)
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        traced(bundle, inputs, [d], keep_output=False)
        attached.append(time.perf_counter() - t)
    return min(plain), min(attached)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="trainings timed; the fastest counts (default 3)")
    parser.add_argument("--traces", type=int, default=30, help="traces timed each way (default 30)")
    parser.add_argument("--threads", type=int, help="PyTorch's threads (default: its own choice; on a busy machine 1 "
                        "keeps idle threads from waiting on each other)")  # fmt: skip
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [train_once(Path(tmp) / f"d{i}", args.threads) for i in range(args.repeat)]
        seconds = min(s for s, _ in runs)
        figures = runs[0][1]
        print(f"features train (width 512, k 8): {seconds:.1f} s whole (runs: "
              f"{', '.join(f'{s:.1f}' for s, _ in runs)}); training alone {figures['seconds']:.1f} s on "
              f"{figures['tokens']} tokens; FVU {figures['fvu']:.3f}, L0 {figures['l0']:.1f}, {figures['dead']} dead, "
              f"CE loss recovered {figures['ce_recovered']:.3f}")  # fmt: skip
        plain, attached = trace_times(Path(tmp) / "d0", args.traces)
    extra = attached / plain - 1
    print(f"trace of {SOURCE!r}: {plain * 1e3:.1f} ms, with the dictionary attached {attached * 1e3:.1f} ms "
          f"(+{extra:.1%}; targets: training < 60 s, attaching ≤ 10 %)")  # fmt: skip
    return 0 if seconds < 60 and extra <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
