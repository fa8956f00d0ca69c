"""How long a notebook waits: `sf.run` + one `plot` on en-hi, in a fresh process, after `import scratchformer`.

    python benchmarks/bench_api.py [--launches 3]

Target (issue 34): sf.run("en-hi", …) and one run.plot(…) drawn as SVG ≤ 1 s after `import scratchformer as sf`.
Each launch is a new Python process (what a notebook's first cell pays: PyTorch, the tokenizers and Qt's renderer
load on first use); the figures are the median over launches, split into the run and the plot, and the same
calls repeated in that process (warm) are printed beside them. The reference is the process's own
`import torch` time (measured first, in the same process), so a slow machine shows as a large reference too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

TARGET_S = 1.0

PROBE = r"""
import json, time
t = time.perf_counter()
import torch
ref = time.perf_counter() - t
import scratchformer as sf
t0 = time.perf_counter()
run = sf.run("en-hi", "the girl eats an apple")
t1 = time.perf_counter()
svg = run.plot("decoder.1.cross_attn.weights", head=None)._repr_svg_()
t2 = time.perf_counter()
run2 = sf.run("en-hi", "the boy reads a book")
t3 = time.perf_counter()
run2.plot("decoder.1.cross_attn.weights", head=None)._repr_svg_()
t4 = time.perf_counter()
print(json.dumps({"import_torch": ref, "run": t1 - t0, "plot": t2 - t1, "warm_run": t3 - t2, "warm_plot": t4 - t3}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for _ in range(args.launches):
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    first = med["run"] + med["plot"]
    print(f"reference: import torch {med['import_torch']:.2f} s (median of {args.launches} launches)")
    print(f"first sf.run {med['run']:.2f} s + plot {med['plot']:.2f} s = {first:.2f} s "
          f"(target ≤ {TARGET_S:.1f} s: {'met' if first <= TARGET_S else 'NOT met'}); "
          f"{first / med['import_torch']:.1f}× the torch import")
    print(f"warm (same process, a second sentence): sf.run {med['warm_run'] * 1000:.0f} ms + plot "
          f"{med['warm_plot'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
