"""How long opening a derivation takes ("How this number was made"), against references measured in the same run.

    python benchmarks/bench_derive.py [--cells 3] [--long-cells 12] [--threads 2]

What the window does on a click: derive.compute (reading the inputs, rerunning a lazily traced sublayer when its
interior is not in the cache) plus the rich text it shows (derivation_html). Targets (issue: follow every number):
    en-hi, one sentence, any cell of any step                 ≤ 50 ms (printed: p50, p90, max)
    paper preset, 8 windows × 512 tokens, a recomputed step   ≤ 200 ms
The window derives a cell of the map it shows, and it reruns a recomputed sublayer before it draws its map
(app/work/warmup.py), so the clicked step is in the recompute cache and everything else is cold: that is "open". The
"cold" column also reruns the clicked sublayer. References, same run: en-hi's untraced forward pass; for the long
run, rerunning the clicked sublayer alone (what drawing its map took).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch

from app.views.derivation_view import derivation_html
from scratchformer.analyses import derive
from scratchformer.loading.bundle import load_model

ROOT = Path(__file__).resolve().parents[1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def p90(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(round(0.9 * len(samples))) - 1)]


def open_once(bundle, trace, name: str, index: tuple[int, ...]) -> float:
    t0 = time.perf_counter()
    d = derive.compute(bundle, trace, name, index)
    derivation_html(trace, d)
    elapsed = time.perf_counter() - t0
    assert d.agrees(), f"{name}{list(index)} does not recompute"
    return elapsed


def bench_en_hi(cells: int) -> None:
    bundle = load_model("en-hi")
    inputs = bundle.prepare("the girl eats an apple", "लड़की सेब खाती है")
    _, trace = bundle.run(inputs)
    with torch.inference_mode():
        bundle.model(inputs.src, inputs.tgt)
        t0 = time.perf_counter()
        for _ in range(10):
            bundle.model(inputs.src, inputs.tgt)
        forward = (time.perf_counter() - t0) / 10
    rng = random.Random(0)
    samples, worst = [], ("", 0.0)
    for step in trace:
        for _ in range(cells):
            index = tuple(rng.randrange(n) for n in step.shape)
            t = open_once(bundle, trace, step.name, index)
            samples.append(t)
            worst = max(worst, (step.name, t), key=lambda x: x[1])
    print(f"en-hi: {len(samples)} derivations, one or more per step of {len(trace)}")
    print(f"  p50 {ms(statistics.median(samples))}   p90 {ms(p90(samples))}   max {ms(worst[1])} ({worst[0]})"
          f"   target ≤ 50 ms: {'met' if worst[1] <= 0.05 else 'NOT met'}")
    ratio = statistics.median(samples) / forward
    print(f"  reference: untraced forward pass {ms(forward)}; p50 derivation = {ratio:.2f}× that")


def bench_paper_long(cells: int) -> None:
    bundle = load_model("paper")
    text = (ROOT / "data" / "samples" / "long_text.txt").read_text(encoding="utf-8")
    inputs = bundle.prepare_windows(text, 512, 8)
    t0 = time.perf_counter()
    _, trace = bundle.run(inputs, keep_output=False)
    print(f"paper preset, 8 windows × 512 tokens: traced in {time.perf_counter() - t0:.1f} s, "
          f"{len(trace.recomputed_steps())} of {len(trace)} steps recomputed on demand")
    rng = random.Random(1)
    recomputed = [s for s in trace.recomputed_steps() if "batch" in s.dims]
    rows = []
    heaviest = [trace[n] for n in ("generator.probs", "generator.logits") if trace.find(n) is not None]
    for step in heaviest + rng.sample(recomputed, min(cells, len(recomputed))):
        index = tuple(rng.randrange(n) for n in step.shape)
        trace.cache.clear()
        cold = open_once(bundle, trace, step.name, index)
        trace.cache.clear()
        t0 = time.perf_counter()
        step.item(index[0])  # the reference: the sublayer alone, rerun for this batch item (the window draws it)
        bare = time.perf_counter() - t0
        rows.append((step.name, open_once(bundle, trace, step.name, index), cold, bare))
    print(f"  {'step':<38} {'open':>10} {'cold':>10}   {'sublayer rerun alone':>20}")
    for name, t, cold, bare in rows:
        print(f"  {name:<38} {ms(t):>10} {ms(cold):>10}   {ms(bare):>20}")
    worst = max(t for _, t, _, _ in rows)
    print(f"  max {ms(worst)}   target ≤ 200 ms: {'met' if worst <= 0.2 else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=3, help="cells derived per step of en-hi")
    parser.add_argument("--long-cells", type=int, default=12, help="recomputed steps derived on the long run")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bench_en_hi(args.cells)
    bench_paper_long(args.long_cells)


if __name__ == "__main__":
    main()
