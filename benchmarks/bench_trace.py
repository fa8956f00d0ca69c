"""Trace memory and speed at scale (issue 12), against the untraced forward pass measured in the same run.

    python benchmarks/bench_trace.py [--seq-len 512] [--batch 8] [--skip-window] [--skip-gpt2]

Targets (paper preset, random weights, the walkthrough's windows of --seq-len tokens, --batch of them, CPU):
    peak RSS of `scratchformer trace`                       ≤ 2.5 GB
    traced forward (bundle.run)                             ≤ 1.2 × the untraced forward of the same batch (issue 32;
                                                            1.5 × before; 1.20–1.26 × with the output summary made
                                                            on first use and the fused kernel's context, 2026-11-26)
    the window: first heatmap painted after the forward     ≤ 2 s
    the window: redraw after a step change                  median ≤ 16 ms (stored steps), p90 ≤ 60 ms (recomputed)
    the window: longest gap of a 10 ms UI timer, Run → first heatmap  ≤ 100 ms
    the window: export of every attention map               works, streaming (peak RSS barely grows)
    a random GPT-2-small-sized decoder at 1024 tokens, traced and every step visited   ≤ 3 GB peak RSS
Peak RSS is measured in a fresh process per case (os.wait4), so one case's memory never counts for another.
The machine may be shared: timings are medians of a few runs, and the untraced reference runs alternately with
the traced one so both see the same load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "data" / "samples" / "long_text.txt"
GB = 2**30


def peak_rss(code: str, *args: str) -> tuple[float, str]:
    """Run `python -c code args` in a fresh process; (its peak RSS in bytes, its stdout)."""
    import tempfile

    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak, not the largest of all children
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise SystemExit(f"case failed:\n{err.read()[-2000:]}")
        return usage.ru_maxrss * 1024, out.read()


UNTRACED = r"""
import sys, torch
torch.set_num_threads(2)
from scratchformer.loading.bundle import load_model
from scratchformer.running.batching import read_text_file
b = load_model("paper", "cpu")
inputs = b.prepare_windows(read_text_file(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
with torch.inference_mode():
    b.model(inputs.src, inputs.tgt)
"""

TRACE_COMMAND = r"""
import sys
from scratchformer.cli import main
sys.argv = ["scratchformer", "trace", "--model", "paper", "--text-file", sys.argv[1], "--seq-len", sys.argv[2],
            "--batch", sys.argv[3]]
import io, contextlib
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(sys.argv[1:])
sys.exit(rc)
"""

GPT2_SIZED = r"""
import torch
torch.set_num_threads(2)
from scratchformer import Transformer, TransformerConfig
from scratchformer.plotdata import step_heatmap
config = TransformerConfig(d_model=768, n_heads=12, d_ff=3072, n_encoder_layers=0, n_decoder_layers=12,
                           src_vocab_size=50257, tgt_vocab_size=50257, max_len=1024, dropout=0.0,
                           positional="learned", norm_first=True, final_layer_norm=True, activation="gelu_tanh",
                           share_embeddings=False)
model = Transformer(config).eval()
ids = torch.randint(0, 50257, (1, 1024))
_, trace = model.run_with_trace(None, ids, keep_output=False)
for step in trace:  # every step visited as the window would: one heatmap of item 1, head 1
    step_heatmap(trace, step, 0, 0)
print(len(trace), trace.stored_bytes(), trace.cache.bytes)
"""


def core(seq_len: int, batch: int) -> None:
    import torch

    torch.set_num_threads(2)
    from scratchformer.loading.bundle import load_model
    from scratchformer.running.batching import read_text_file

    args = (str(TEXT), str(seq_len), str(batch))
    rss_ref, _ = peak_rss(UNTRACED, *args)
    rss_trace, _ = peak_rss(TRACE_COMMAND, *args)
    print(f"paper preset, {batch} windows of {seq_len} tokens (encoder and decoder), CPU")
    print(f"  peak RSS, untraced forward (reference):  {rss_ref / GB:5.2f} GB")
    print(f"  peak RSS, scratchformer trace:            {rss_trace / GB:5.2f} GB   target ≤ 2.5 GB  "
          f"({rss_trace / rss_ref:.2f} × the untraced forward)")

    bundle = load_model("paper", "cpu")
    inputs = bundle.prepare_windows(read_text_file(TEXT), seq_len, batch)
    estimate = bundle.memory_estimate(inputs)
    print(f"  the budget check's estimate:              {estimate.total / GB:5.2f} GB")
    untraced, traced = [], []
    for _ in range(2):
        t = time.perf_counter()
        with torch.inference_mode():
            bundle.model(inputs.src, inputs.tgt)
        untraced.append(time.perf_counter() - t)
        t = time.perf_counter()
        _, trace = bundle.run(inputs, keep_output=False)
        traced.append(time.perf_counter() - t)
        del trace
    u, tr = statistics.median(untraced), statistics.median(traced)
    print(f"  untraced forward {u:6.2f} s, traced {tr:6.2f} s:  {tr / u:.2f} ×   target ≤ 1.2 ×")


def gpt2_sized() -> None:
    rss, out = peak_rss(GPT2_SIZED)
    n, held, cache = (int(x) for x in out.split())
    print("random GPT-2-small-sized decoder (12 layers, 12 heads, 768 dims), 1024 tokens, every step visited")
    print(f"  peak RSS {rss / GB:5.2f} GB   target ≤ 3 GB   ({n} steps; the trace holds {held / 2**20:.0f} MB, "
          f"the recompute cache {cache / 2**20:.0f} MB)")


def window(seq_len: int, batch: int) -> None:
    import tempfile

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("SCRATCHFORMER_SETTINGS", os.path.join(tempfile.mkdtemp(), "bench.ini"))
    import torch
    from PySide6.QtCore import QTimer

    from app.main import _application, drawn
    from app.startup.settings import AppSettings
    from app.window import MainWindow
    from scratchformer.exporting import ExportRun, plan_attention_maps
    from scratchformer.running.batching import read_text_file

    torch.set_num_threads(2)
    app = _application()
    w = MainWindow(AppSettings(), persist=False)
    w.resize(1400, 900)
    w.show()
    w.set_model("paper")
    w.set_device("cpu")
    w.set_detail("all")
    w.source_edit.setText(read_text_file(TEXT))
    w.input_bar.set_windows((seq_len, batch))
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    t_run = time.perf_counter()
    w.run()
    while w.is_busy():
        app.processEvents()
        time.sleep(0.002)
    app.processEvents()  # paints the first heatmap
    t_painted = time.perf_counter()
    timer.stop()
    result = w._result
    if result is None:
        print(f"window: the run failed: {w.message_text()}")
        return
    gaps = [b - a for a, b in zip([t_run] + ticks, ticks + [t_painted])]
    after_forward = t_painted - result.forward_end
    print(f"the window, paper preset, {batch} windows of {seq_len} tokens")
    print(f"  Run → first heatmap: {t_painted - t_run:5.1f} s; longest UI gap {max(gaps) * 1000:6.0f} ms, "
          f"p99 {sorted(gaps)[int(0.99 * (len(gaps) - 1))] * 1000:5.0f} ms over {len(gaps)} timer ticks   "
          "target: no gap over 100 ms")
    print(f"  first heatmap painted {after_forward:5.2f} s after the forward pass ended   target ≤ 2 s")

    stored, recomputed = [], []
    trace = result.trace
    for i in w.visible_steps():
        step = trace[i]
        if step.kind in ("logits", "probabilities"):
            continue  # the output tab's vocab-wide maps are prepared in the worker
        t = time.perf_counter()
        w.go_to(i)
        drawn(w)
        (stored if step.stored else recomputed).append(time.perf_counter() - t)
    p90 = sorted(recomputed)[int(0.9 * (len(recomputed) - 1))] if recomputed else 0.0
    print(f"  redraw after a step change: stored steps median {statistics.median(stored) * 1000:5.1f} ms "
          f"({len(stored)} steps)   target ≤ 16 ms")
    print(f"                              recomputed steps median {statistics.median(recomputed) * 1000:5.1f} ms, "
          f"p90 {p90 * 1000:5.1f} ms ({len(recomputed)} steps)   target p90 ≤ 60 ms")

    import resource

    from app.export.render import renderer

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with tempfile.TemporaryDirectory() as folder:
        tasks = plan_attention_maps(trace, folder, ["png"], 0)
        run = ExportRun(tasks, folder, renderer(0.5))
        t = time.perf_counter()
        while run.step():
            pass
        result_files = run.finish()
        seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  export of every attention map (png): {len(result_files.files)} files in {seconds:5.1f} s; peak RSS "
          f"grew by {(after - before) / 2**20:.0f} MB (the maps are built one at a time)")
    w.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--skip-window", action="store_true")
    parser.add_argument("--skip-gpt2", action="store_true")
    args = parser.parse_args()
    core(args.seq_len, args.batch)
    if not args.skip_gpt2:
        gpt2_sized()
    if not args.skip_window:
        window(args.seq_len, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
