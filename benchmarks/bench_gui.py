"""GUI benchmark (a script, not a timed test): the paper preset with random weights on CPU.

Prints: forward + trace time at 64 source / 64 target tokens; the median time to redraw the window after a
step change at 64 and at 512 tokens, for first visits and for revisits (the step view keeps images per step,
batch item and head), split into steps the trace holds (target ≤ 16 ms) and steps whose sublayer is recomputed
when first shown (target p90 ≤ 60 ms, issue 12); the time from launch to the first window (target ≤ 1.5 s,
issue 20) and to the main window, each in a fresh process (launch_probe.py). The machine may be shared: with
--rounds R each length is timed R times in fresh windows and the spread of the medians is printed.
Run:  python benchmarks/bench_gui.py [--steps N] [--rounds R] [--threads T]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SCRATCHFORMER_SETTINGS", os.path.join(tempfile.mkdtemp(), "bench.ini"))



def text_of(n_tokens: int, bundle) -> str:
    """Repeated words until the tokenizer gives exactly n tokens."""
    words = "the model reads every token of this sentence".split()
    out: list[str] = []
    i = 0
    while len(bundle.src_tokenizer.encode(" ".join(out))) < n_tokens:
        out.append(words[i % len(words)])
        i += 1
    while len(bundle.src_tokenizer.encode(" ".join(out))) > n_tokens:
        out.pop()
    return " ".join(out)


STORED: list[bool] = []  # per timed step: held by the trace (True) or recomputed when shown
CPU_TIMES: list[float] = []  # process CPU seconds of each redraw (robust against other users of the CPU)


def redraw_times(window, n: int) -> list[float]:

    from app.main import drawn  # until the step is drawn, a recompute off the UI thread included

    visible = window.visible_steps()
    stride = max(1, len(visible) // n)
    times = []
    CPU_TIMES.clear()
    STORED.clear()
    trace = window.current_trace()
    for i in visible[::stride][:n]:
        STORED.append(trace[i].stored)  # a long run's large interiors are recomputed when first shown
        t, c = time.perf_counter(), time.process_time()
        window.go_to(i)
        drawn(window)
        times.append(time.perf_counter() - t)
        CPU_TIMES.append(time.process_time() - c)
    return times


def main() -> int:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60, help="steps to time per length")
    parser.add_argument("--rounds", type=int, default=1, help="fresh windows per length (spread of medians)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the window uses one per core)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from app.main import _application, drawn, wait_for_run
    from app.startup.settings import AppSettings
    from app.window import MainWindow
    from app.work.worker import RunRequest, compute

    app = _application()  # noqa: F841 (the QApplication must stay referenced)
    # Forward + trace (the worker's whole job: tokenize, forward with trace, per-step statistics).
    compute(RunRequest(0, "paper", "cpu", "warm up"), {})
    from app.work import worker

    bundle = worker._SHARED[("paper", "cpu")] if ("paper", "cpu") in worker._SHARED else None
    cache: dict = {}
    result = compute(RunRequest(0, "paper", "cpu", "x"), cache)
    bundle = result.bundle
    src64, tgt64 = text_of(64, bundle), text_of(63, bundle)  # 63 + the start token = 64 decoder positions
    t = time.perf_counter()
    inputs = bundle.prepare(src64, tgt64)
    bundle.run(inputs)
    forward = time.perf_counter() - t
    t = time.perf_counter()
    r64 = compute(RunRequest(0, "paper", "cpu", src64, tgt64), cache)
    worker_total = time.perf_counter() - t
    print(f"paper preset, CPU, {r64.trace['src_embed.tokens'].shape[1]} source / "
          f"{r64.trace['tgt_embed.tokens'].shape[1]} target tokens, {len(r64.trace)} steps")
    print(f"forward + trace:                      {forward * 1000:8.1f} ms")
    print(f"worker run (forward + trace + stats):  {worker_total * 1000:8.1f} ms")

    for n_tokens in (64, 512):
        medians, revisits = [], []
        for _ in range(max(1, args.rounds)):
            window = MainWindow(AppSettings(), persist=False)
            window.resize(1400, 900)
            window.show()
            window.set_model("paper")
            window.set_device("cpu")
            window.set_detail("all")
            window.source_edit.setText(text_of(n_tokens, bundle))
            window.target_edit.setText(text_of(n_tokens - 1, bundle))
            window.run()
            if not wait_for_run(window):
                print(f"run failed: {window.message_text()}")
                return 1
            times = redraw_times(window, args.steps)
            cpu_first = statistics.median(CPU_TIMES)
            again = redraw_times(window, args.steps)  # the same steps again: images from the step view's cache
            cpu_again = statistics.median(CPU_TIMES)
            attn = [i for i in window.visible_steps() if window.current_trace()[i].kind == "attention_weights"]
            attn_times = []
            for i in attn:
                t = time.perf_counter()
                window.go_to(i)
                drawn(window)
                attn_times.append(time.perf_counter() - t)
            median = statistics.median(times) * 1000
            print(f"redraw after a step change, {n_tokens:3d} tokens: median {median:6.1f} ms, "
                  f"p90 {sorted(times)[int(0.9 * len(times))] * 1000:6.1f} ms over {len(times)} steps "
                  f"(attention steps: median {statistics.median(attn_times) * 1000:6.1f} ms)")
            kept = [t for t, s in zip(times, STORED) if s]
            redone = [t for t, s in zip(times, STORED) if not s]
            if kept:
                print(f"  steps the trace holds:               median {statistics.median(kept) * 1000:6.1f} ms "
                      f"over {len(kept)}   target ≤ 16 ms")
            if redone:
                print(f"  steps recomputed when shown:         median {statistics.median(redone) * 1000:6.1f} ms, "
                      f"p90 {sorted(redone)[int(0.9 * (len(redone) - 1))] * 1000:6.1f} ms over {len(redone)}   "
                      "target p90 ≤ 60 ms (issue 12)")
            print(f"  revisiting the same steps:           median {statistics.median(again) * 1000:6.1f} ms, "
                  f"p90 {sorted(again)[int(0.9 * len(again))] * 1000:6.1f} ms")
            print(f"  CPU time per redraw (median):        {cpu_first * 1000:6.1f} ms first visits, "
                  f"{cpu_again * 1000:6.1f} ms revisits")
            medians.append(statistics.median(times))
            revisits.append(statistics.median(again))
            window.close()
        if len(medians) > 1:
            print(f"  {n_tokens} tokens over {len(medians)} rounds: first-visit medians "
                  f"{min(medians) * 1000:.1f} … {max(medians) * 1000:.1f} ms (median of medians "
                  f"{statistics.median(medians) * 1000:.1f}); revisit medians {min(revisits) * 1000:.1f} … "
                  f"{max(revisits) * 1000:.1f} ms")

    from bench_stalls import report_launches
    from launch_probe import measure

    report_launches(measure(3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
