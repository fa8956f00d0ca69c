"""scratchformer's trace beside TransformerLens's `run_with_cache` (TransformerBridge) on the same folder and tokens
(issue 33): a random-weight model of Qwen2.5-0.5B's shape saved with transformers' save_pretrained, 512 tokens.

    python benchmarks/bench_transformerlens.py --tl-python /path/to/venv-with-transformer-lens/bin/python
        [--tokens 512] [--folder DIR]

TransformerLens is not one of scratchformer's dependencies: give the Python of an environment that has it
(`pip install transformer-lens`). Each side runs in a fresh process, twice (first and second run), and its peak
memory is read with os.wait4. Targets: scratchformer faster, and needing at most half the memory TransformerLens
needs beyond the weights. The machine may be shared: time on a quiet one.
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
GB = 2**30
SHAPE = dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
             intermediate_size=4864, max_position_embeddings=32768, tie_word_embeddings=True,
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, bos_token_id=50256,
             eos_token_id=50256)  # fmt: skip

MAKE = r"""
import sys, torch, transformers
from scratchformer.loading.tokenizers import gpt2_tokenizer
shape = __import__("json").loads(sys.argv[2])
torch.manual_seed(0)
model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape))
model.save_pretrained(sys.argv[1])
gpt2_tokenizer().hf.save_pretrained(sys.argv[1])
"""

OURS = r"""
import json, sys, time, torch
from scratchformer.loading.bundle import load_model
bundle = load_model(sys.argv[1])
weights = sum(p.numel() * p.element_size() for p in bundle.model.parameters())
ids = torch.randint(0, 50000, (1, int(sys.argv[2])), generator=torch.Generator().manual_seed(0))
times = []
for _ in range(2):
    t = time.perf_counter()
    _, trace = bundle.model.run_with_trace(None, ids, keep_output=False)
    times.append(time.perf_counter() - t)
held = trace.stored_bytes()  # what the lazy trace holds (reading every step's tensor would recompute them all)
print(json.dumps({"times": times, "weights": weights, "items": len(trace.steps), "held": held}))
"""

THEIRS = r"""
import json, sys, time, torch
from transformer_lens.model_bridge import TransformerBridge
bridge = TransformerBridge.boot_transformers(sys.argv[1], device="cpu")
weights = sum(p.numel() * p.element_size() for p in bridge.parameters())
ids = torch.randint(0, 50000, (1, int(sys.argv[2])), generator=torch.Generator().manual_seed(0))
times = []
for _ in range(2):
    t = time.perf_counter()
    with torch.no_grad():
        _, cache = bridge.run_with_cache(ids)
    times.append(time.perf_counter() - t)
    held = sum(v.numel() * v.element_size() for v in cache.values())
    items = len(cache)
    del cache
print(json.dumps({"times": times, "weights": weights, "items": items, "held": held}))
"""


def run(python: str, code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([python, "-c", code, *args], stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0), err.seek(0)
        if status != 0:
            raise SystemExit(f"{python} failed:\n{err.read()[-3000:]}")
        text = out.read().strip().splitlines()
    result = json.loads(text[-1]) if text else {}
    result["peak"] = usage.ru_maxrss * 1024
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tl-python", required=True, help="a Python that can import transformer_lens")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--folder", help="where the random model is saved (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.folder or tmp) / "qwen2.5-0.5b-shape"
        if not (folder / "config.json").is_file():
            run(sys.executable, MAKE, str(folder), json.dumps(SHAPE))
        ours = run(sys.executable, OURS, str(folder), str(args.tokens))
        theirs = run(args.tl_python, THEIRS, str(folder), str(args.tokens))
    for name, r in (("scratchformer trace", ours), ("TransformerLens run_with_cache", theirs)):
        extra = (r["peak"] - r["weights"]) / GB
        print(f"{name}: first {r['times'][0]:.2f} s, second {r['times'][1]:.2f} s; peak {r['peak'] / GB:.2f} GB "
              f"(weights {r['weights'] / GB:.2f} GB + {extra:.2f} GB); {r['items']} tensors, "
              f"{r['held'] / GB:.2f} GB held")  # fmt: skip
    ours_extra, theirs_extra = ours["peak"] - ours["weights"], theirs["peak"] - theirs["weights"]
    faster = min(ours["times"]) < min(theirs["times"])
    print(f"second run: {min(theirs['times']) / min(ours['times']):.2f}× faster; memory beyond the weights: "
          f"{ours_extra / theirs_extra:.2f} of TransformerLens's (targets: faster, ≤ 0.5)")
    return 0 if faster and ours_extra <= 0.5 * theirs_extra else 1


if __name__ == "__main__":
    sys.exit(main())
