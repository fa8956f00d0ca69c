"""Benchmark: export every attention map of the `paper` preset (6 layers × 3 attention types × 8 heads = 144
maps) for a 64-token source and target, per format, through the same code as `scratchformer export`.

    python benchmarks/bench_export.py [--tokens 64] [--formats png,svg,pdf,csv,npz]

Prints seconds per format (target: PNG ≤ 10 s on the 2-core machine), files, and total size on disk. The
reference line is the forward pass that produced the trace, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from scratchformer.exporting import ExportRun, plan_attention_maps  # noqa: E402
from scratchformer.exporting.job import IMAGE_FORMATS, parse_formats  # noqa: E402
from scratchformer.loading.bundle import Inputs, load_model  # noqa: E402


def inputs(bundle, n: int) -> Inputs:
    """n source and n target tokens (the target starts with the start token)."""
    words = ("the quick brown fox jumps over the lazy dog while machine learning models attend to tokens " * 20)
    ids = bundle.src_tokenizer.encode(words)[:n]
    src = torch.tensor([ids])  # (1, n)
    tgt = torch.tensor([[bundle.start_id()] + ids[: n - 1]])  # (1, n)
    toks = [bundle.src_tokenizer.token_strings(ids)]
    return Inputs(src, tgt, None, None, toks, [bundle.tgt_tokenizer.token_strings(tgt[0].tolist())])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--formats", default="png,svg,pdf,csv,npz")
    parser.add_argument("--scale", type=float, default=2.0, help="PNG pixels per point")
    args = parser.parse_args()
    torch.set_num_threads(1)
    formats = parse_formats(args.formats)

    t0 = time.perf_counter()
    bundle = load_model("paper")
    _, trace = bundle.run(inputs(bundle, args.tokens))
    forward = time.perf_counter() - t0
    renderer = None
    if any(f in IMAGE_FORMATS for f in formats):
        from app.export.render import renderer as qt_renderer
        from app.startup.qt_application import application

        application()
        renderer = qt_renderer(args.scale)

    print(f"paper preset, {args.tokens} tokens, {len(trace.attention_steps())} attention steps; "
          f"load + traced forward: {forward:.2f} s")  # fmt: skip
    print(f"{'format':<7} {'files':>6} {'seconds':>8} {'cpu s':>7} {'ms/file':>8} {'size MB':>8}")
    total_bytes = 0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in formats:
            folder = Path(tmp) / fmt
            folder.mkdir()
            t, cpu = time.perf_counter(), time.process_time()
            tasks = plan_attention_maps(trace, folder, [fmt])
            result = ExportRun(tasks, folder, renderer).run()
            secs, cpu = time.perf_counter() - t, time.process_time() - cpu
            size = sum(p.stat().st_size for p in folder.iterdir())
            total_bytes += size
            n = len(result.files)
            print(f"{fmt:<7} {n:>6} {secs:>8.2f} {cpu:>7.2f} {1000 * secs / n:>8.1f} {size / 1e6:>8.2f}")
    print(f"load average while running: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"total size on disk: {total_bytes / 1e6:.1f} MB (each format also writes index.csv + index.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
