"""Activation patching of every head at every position (issue 35): scratchformer's batched sweep beside
TransformerLens's `patching.get_act_patch_attn_head_out_by_pos` on the same GPT-2-shaped folder and tokens, and
en-hi's full head sweep.

    python benchmarks/bench_sweep.py --tl-python /path/to/venv-with-transformer-lens/bin/python [--folder DIR]

The folder is GPT-2 small's shape (12 layers × 12 heads, d_model 768) with random weights, saved with
transformers' save_pretrained and GPT-2's tokenizer; the prompt is 15 tokens (the start token and an IOI-style
sentence) and its corruption swaps one name. Both sides patch each head's output before W^O (hook_z) at each
position (12 × 15 × 12 = 2,160 patches) from the clean run into the corrupted one and report the logit
difference logit(' Mary') − logit(' John') at the last position; the two grids must agree within 1e-4, and the
target is scratchformer at least 10× faster. Each side runs in a fresh process (scratchformer twice,
TransformerLens once by default: it takes minutes); times exclude loading the model and include the clean and
corrupted runs. TransformerLens is not a dependency of scratchformer: give the Python of an environment that has
it. The machine may be shared: time on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When Mary and John went to the store, Mary gave a drink to"
ANSWER, WRONG = " Mary", " John"

MAKE = r"""
import sys, torch, transformers
from scratchformer.loading.tokenizers import gpt2_tokenizer
torch.manual_seed(0)
transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(sys.argv[1])
gpt2_tokenizer().hf.save_pretrained(sys.argv[1])
"""

OURS = r"""
import json, sys, time, torch
from scratchformer.loading.bundle import load_model
from scratchformer.patching import components
from scratchformer.patching.batched import patched_metrics
from scratchformer.patching.pair import make_pair
folder, clean, corrupt, answer, wrong = sys.argv[1:6]
bundle = load_model(folder)
times = []
for _ in range(2):
    t = time.perf_counter()
    pair = make_pair(bundle, bundle.prepare(clean), bundle.prepare(corrupt), answer, wrong)
    comps = components.head_components(bundle.model, pair.n_positions("tgt"), 0, per_position=True)
    m = patched_metrics(pair, comps)
    times.append(time.perf_counter() - t)
c = bundle.config
grid = torch.zeros(c.n_decoder_layers, pair.n_positions("tgt"), c.n_heads)  # [layer, pos, head], as TransformerLens
for c, v in zip(comps, m.tolist()):
    grid[c.layer, c.position, c.head] = v
print(json.dumps({"times": times, "patches": len(comps), "ids": pair.tgt_clean[0].tolist(),
                  "corrupt_ids": pair.tgt_corrupt[0].tolist(), "answer": pair.metric.answer,
                  "wrong": pair.metric.wrong, "m_clean": pair.m_clean, "m_corrupt": pair.m_corrupt,
                  "grid": grid.tolist()}))
"""

THEIRS = r"""
import json, sys, time, torch
from transformer_lens import patching
from transformer_lens.model_bridge import TransformerBridge
folder, clean, corrupt, answer, wrong = sys.argv[1], *map(json.loads, sys.argv[2:6])
bridge = TransformerBridge.boot_transformers(folder, device="cpu")
bridge.eval()
clean, corrupt = torch.tensor([clean]), torch.tensor([corrupt])
metric = lambda logits: logits[0, -1, answer] - logits[0, -1, wrong]
times = []
for _ in range(int(sys.argv[6])):
    t = time.perf_counter()
    with torch.no_grad():
        _, cache = bridge.run_with_cache(clean)
        grid = patching.get_act_patch_attn_head_out_by_pos(bridge, corrupt, cache, metric)
    times.append(time.perf_counter() - t)
grid = grid if isinstance(grid, torch.Tensor) else grid.values  # a PatchingResult in newer releases
print(json.dumps({"times": times, "grid": grid.tolist()}))
"""


def run(python: str, code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "TQDM_DISABLE": "1"}  # fmt: skip
    done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"{python} failed:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}  # MAKE prints nothing


def en_hi_heads() -> float:
    """The full head sweep of en-hi (every head of every attention, all positions), best of three, model loaded."""
    code = r"""
import json, time
from scratchformer.analyses.sweep import compute
from scratchformer.loading.bundle import load_model
b = load_model("en-hi")
clean, corrupt = b.prepare_run("the girl eats an apple"), b.prepare("the boy eats an apple")
times = []
for _ in range(3):
    t = time.perf_counter()
    compute(b, clean, corrupt)
    times.append(time.perf_counter() - t)
print(json.dumps({"times": times}))
"""
    return min(run(sys.executable, code)["times"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tl-python", required=True, help="a Python with transformer-lens installed")
    parser.add_argument("--folder", help="reuse a GPT-2-shaped folder (default: make one in a temporary folder)")
    parser.add_argument("--tl-runs", type=int, default=1, help="TransformerLens's runs (default 1: it takes minutes)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or str(Path(tmp) / "gpt2-random")
        if not args.folder:
            run(sys.executable, MAKE, folder)
        ours = run(sys.executable, OURS, folder, CLEAN, CORRUPT, ANSWER, WRONG)
        theirs = run(args.tl_python, THEIRS, folder, *(json.dumps(ours[k]) for k in ("ids", "corrupt_ids", "answer",
                                                                                     "wrong")),
                     str(args.tl_runs))  # fmt: skip
    import torch

    a, b = torch.tensor(ours["grid"]), torch.tensor(theirs["grid"])
    diff = float((a - b).abs().max())
    t_ours, t_theirs = min(ours["times"]), min(theirs["times"])
    print(f"GPT-2-shaped folder, {len(ours['ids'])} tokens, {ours['patches']} patches (heads × positions)")
    print(f"  m_clean {ours['m_clean']:.4f}, m_corrupt {ours['m_corrupt']:.4f}")
    print(f"  scratchformer     {t_ours:7.2f} s   (runs: {', '.join(f'{t:.2f}' for t in ours['times'])})")
    print(f"  TransformerLens   {t_theirs:7.2f} s   (runs: {', '.join(f'{t:.2f}' for t in theirs['times'])})")
    print(f"  speed-up {t_theirs / t_ours:.1f}×   max |difference| {diff:.2e}  "
          f"({'within' if diff <= 1e-4 else 'NOT within'} 1e-4)")
    print(f"en-hi, every head of every attention: {en_hi_heads():.3f} s")
    print(f"load average: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")


if __name__ == "__main__":
    main()
