"""Activation patching over 100 IOI-style pairs (issue 44): `scratchformer sweep --pairs`'s mean effects beside
TransformerLens's batched patching on the same GPT-2-shaped folder and tokens.

    python benchmarks/bench_sweep_pairs.py --tl-python /path/to/venv-with-transformer-lens/bin/python
        [--pairs 100] [--folder DIR]

The folder is GPT-2 small's shape with random weights (as benchmarks/bench_sweep.py makes it). Each pair is
"When A and B went to the PLACE, B gave a THING to" (15 tokens with the start token), its corruption the same with
the second B replaced by A; the metric is logit(A) − logit(B) at the last position, each pair's effect
(m_patched − m_corrupt) / (m_clean − m_corrupt), averaged over the pairs. TransformerLens runs the 100 pairs as
one batch per patch, as its users do (`patching.get_act_patch_attn_head_out_all_pos`, `get_act_patch_resid_pre`,
`get_act_patch_mlp_out`, a metric that averages each pair's normalised effect); scratchformer runs its whole grid
(every head over all positions, every residual point and feed-forward output at every position), of which the
same 504 cells are compared: equal means within 1e-4, and the time of each side. TransformerLens is not a
dependency: give the Python of an environment that has it. The machine may be shared: time on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

NAMES = [" Mary", " John", " Tom", " James", " Sarah", " David", " Paul", " Mark", " Anna", " Kate"]
PLACES = [" store", " park", " school", " house", " garden", " station"]
THINGS = [" drink", " book", " ball", " letter", " ring", " bag"]

OURS = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[3]))
from scratchformer.analyses.sweep_pairs import sweep_pairs
from scratchformer.datasets.pairs import read_pairs
from scratchformer.loading.bundle import load_model
from scratchformer.patching.components import layer_input_step
bundle = load_model(sys.argv[1])
specs = read_pairs(sys.argv[2])
times = []
for _ in range(2):
    t = time.perf_counter()
    result = sweep_pairs(bundle, specs)
    times.append(time.perf_counter() - t)
out = result.to_dict()
c = bundle.config
T = len(out["tokens"]["target"])
heads = [[0.0] * c.n_heads for _ in range(c.n_decoder_layers)]
for r in out["heads"]:
    heads[r["layer"]][r["head"]] = r["effect"]
resid = {r["step"] + "@" + str(r["position"]): r["effect"] for r in out["positions"]}
mlp = {r["step"] + "@" + str(r["position"]): r["effect"] for r in out["mlp"]}
grids = {"heads": heads,
         "resid_pre": [[resid[layer_input_step(bundle.model, "decoder", l) + "@" + str(p)] for p in range(T)]
                       for l in range(c.n_decoder_layers)],
         "mlp_out": [[mlp[f"decoder.{l}.ffn.out@{p}"] for p in range(T)] for l in range(c.n_decoder_layers)]}
ids = [[bundle.prepare(s.source).tgt[0].tolist(), bundle.prepare(s.corrupt).tgt[0].tolist()] for s in specs]
cells = len(out["heads"]) + len(out["positions"]) + len(out["mlp"])
print(json.dumps({"times": times, "grids": grids, "ids": ids, "cells": cells, "notes": out["notes"],
                  "answers": [[r["answer"]["id"], r["wrong"]["id"]] for r in result.to_dict(True)["per_pair"]]}))
"""

THEIRS = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[3]))
from transformer_lens import patching
from transformer_lens.model_bridge import TransformerBridge
folder, data = sys.argv[1], json.load(open(sys.argv[2]))
bridge = TransformerBridge.boot_transformers(folder, device="cpu")
bridge.eval()
clean = torch.tensor([c for c, _ in data["ids"]]); corrupt = torch.tensor([k for _, k in data["ids"]])
answers = torch.tensor(data["answers"])  # (P, 2): answer, wrong
rows = torch.arange(len(clean))
def m(logits):  # (P,) logit(answer) − logit(wrong) at the last position
    last = logits[:, -1]
    return last[rows, answers[:, 0]] - last[rows, answers[:, 1]]
t = time.perf_counter()
with torch.no_grad():
    clean_logits, cache = bridge.run_with_cache(clean)
    m_clean, m_corrupt = m(clean_logits), m(bridge(corrupt))
metric = lambda logits: ((m(logits) - m_corrupt) / (m_clean - m_corrupt)).mean()
grids = {}
with torch.no_grad():
    for name, fn in (("heads", patching.get_act_patch_attn_head_out_all_pos),
                     ("resid_pre", patching.get_act_patch_resid_pre), ("mlp_out", patching.get_act_patch_mlp_out)):
        g = fn(bridge, corrupt, cache, metric)
        grids[name] = (g if isinstance(g, torch.Tensor) else g.values).tolist()
print(json.dumps({"times": [time.perf_counter() - t], "grids": grids}))
"""


def ioi_pairs(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.sample(NAMES, 2)
        place, thing = rng.choice(PLACES), rng.choice(THINGS)
        clean = f"When{a} and{b} went to the{place},{b} gave a{thing} to"
        corrupt = f"When{a} and{b} went to the{place},{a} gave a{thing} to"
        out.append({"source": clean, "corrupt": corrupt, "answer": a, "wrong": b})
    return out


sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep import MAKE, run  # noqa: E402 - a GPT-2-shaped folder, and the last JSON line a Python prints


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tl-python", required=True, help="a Python with transformer-lens installed")
    parser.add_argument("--folder", help="reuse a GPT-2-shaped folder (default: make one in a temporary folder)")
    parser.add_argument("--pairs", type=int, default=100, help="how many IOI-style pairs (default 100)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads of each side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or str(Path(tmp) / "gpt2-random")
        if not args.folder:
            run(sys.executable, MAKE, folder)
        pairs = Path(tmp) / "ioi.jsonl"
        pairs.write_text("".join(json.dumps(p) + "\n" for p in ioi_pairs(args.pairs)), encoding="utf-8")
        ours = run(sys.executable, OURS, folder, str(pairs), str(args.threads))
        given = Path(tmp) / "given.json"
        given.write_text(json.dumps({"ids": ours["ids"], "answers": ours["answers"]}), encoding="utf-8")
        theirs = run(args.tl_python, THEIRS, folder, str(given), str(args.threads))
    import torch

    diffs = {k: float((torch.tensor(ours["grids"][k]) - torch.tensor(theirs["grids"][k])).abs().max())
             for k in ours["grids"]}  # fmt: skip
    compared = sum(torch.tensor(g).numel() for g in ours["grids"].values())
    t_ours, t_theirs = min(ours["times"]), theirs["times"][0]
    print(f"GPT-2-shaped folder, {args.pairs} IOI-style pairs of {len(ours['ids'][0][0])} tokens")
    runs = ", ".join(f"{t:.2f}" for t in ours["times"])
    print(f"  scratchformer     {t_ours:7.2f} s   the whole grid, {ours['cells']} cells a pair (runs: {runs})")
    print(f"  TransformerLens   {t_theirs:7.2f} s   {compared} cells (heads all positions, resid_pre, mlp_out)")
    print(f"  speed-up {t_theirs / t_ours:.1f}× (scratchformer doing {ours['cells'] / compared:.1f}× the cells)")
    for k, d in diffs.items():
        print(f"  {k}: max |mean effect difference| {d:.2e}")
    worst = max(diffs.values())
    print(f"  {'within' if worst <= 1e-4 else 'NOT within'} 1e-4;  notes: {ours['notes']}")
    print(f"load average: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    if worst > 1e-4:
        sys.exit(1)


if __name__ == "__main__":
    main()
