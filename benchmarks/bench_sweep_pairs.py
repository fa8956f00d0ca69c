"""Activation patching over 100 IOI-style pairs (issue 44): `scratchformer sweep --pairs`'s mean effects beside
TransformerLens's batched patching on the same GPT-2 folder and tokens.

    python benchmarks/bench_sweep_pairs.py --tl-python /path/to/venv-with-transformer-lens/bin/python
        [--pairs 100] [--random] [--folder DIR] [--threads T]

The folder is a GPT-2 (transformers' GPT2LMHeadModel, 4 layers × 8 heads, d_model 256, GPT-2's vocabulary)
trained here for a few minutes on IOI sentences until it names the right person, so the clean and corrupted runs
disagree by a real margin; `--random` takes GPT-2 small's shape with random weights instead (as
benchmarks/bench_sweep.py makes it), whose logit differences hardly depend on the names. Each pair is "When A and
B went to the PLACE, B gave a THING to" (15 tokens with the start token), its corruption the same with the second
B replaced by A; the metric is logit(' A') − logit(' B') at the last position, each pair's effect
(m_patched − m_corrupt) / (m_clean − m_corrupt), averaged over the pairs. TransformerLens runs the pairs as one
batch per patch, as its users do (`patching.get_act_patch_attn_head_out_all_pos`, `get_act_patch_resid_pre`,
`get_act_patch_mlp_out`, a metric that averages each pair's normalised effect); scratchformer runs its whole grid
(every head over all positions, every residual point and feed-forward output at every position), of which the
cells TransformerLens computes are compared: equal means within 1e-4, and the time of each side. Each pair's own
numbers are compared too, which shows where means part: a pair whose m_clean − m_corrupt is near 0 (common with
random weights) turns a rounding difference of the logits into a large one of its effect. TransformerLens is not
a dependency: give the Python of an environment that has it. The machine may be shared: time on a quiet one.
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

TRAIN = r"""
import json, random, sys, torch, transformers
from scratchformer.loading.tokenizers import gpt2_tokenizer
folder, steps = sys.argv[1], int(sys.argv[2])
NAMES, PLACES, THINGS = json.loads(sys.argv[3])
torch.set_num_threads(int(sys.argv[4]))
torch.manual_seed(0)
rng = random.Random(1)  # the benchmark's pairs come from seed 0
tok = gpt2_tokenizer().hf
model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=4, n_head=8, n_embd=256, n_positions=64))
def batch(n):  # IOI sentences, the repeated name either one: the answer is the name said once
    ids, answers = [], []
    for _ in range(n):
        a, b = rng.sample(NAMES, 2)
        s, o = (b, a) if rng.random() < 0.5 else (a, b)
        place, thing = rng.choice(PLACES), rng.choice(THINGS)
        ids.append(tok(f"<|endoftext|>When{a} and{b} went to the{place},{s} gave a{thing} to")["input_ids"])
        answers.append(tok(o)["input_ids"][0])
    return torch.tensor(ids), torch.tensor(answers)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(steps):
    x, y = batch(64)
    h = model.transformer(x).last_hidden_state[:, -1]  # (B, d): only the last position's prediction is trained
    loss = torch.nn.functional.cross_entropy(model.lm_head(h), y)
    opt.zero_grad(); loss.backward(); opt.step()
model.save_pretrained(folder); tok.save_pretrained(folder)
x, y = batch(512)
with torch.no_grad():
    accuracy = (model(x).logits[:, -1].argmax(-1) == y).float().mean().item()
print(json.dumps({"loss": loss.item(), "accuracy": accuracy}))
"""

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
out = result.to_dict(True)
c = bundle.config
T = len(out["tokens"]["target"])
rows = out["heads"] + out["positions"] + out["mlp"]  # the order of each pair's effects
where = {("heads", r["layer"], r["head"]): i for i, r in enumerate(out["heads"])}
where.update({("point", r["step"], r["position"]): len(out["heads"]) + i for i, r in enumerate(out["positions"])})
where.update({("mlp", r["step"], r["position"]): len(out["heads"]) + len(out["positions"]) + i
              for i, r in enumerate(out["mlp"])})
order = ([where[("heads", l, h)] for l in range(c.n_decoder_layers) for h in range(c.n_heads)]
         + [where[("point", layer_input_step(bundle.model, "decoder", l), p)] for l in range(c.n_decoder_layers)
            for p in range(T)]
         + [where[("mlp", f"decoder.{l}.ffn.out", p)] for l in range(c.n_decoder_layers) for p in range(T)])
L, H = c.n_decoder_layers, c.n_heads
mean = [rows[i]["effect"] for i in order]
grids = {"heads": [mean[l * H:(l + 1) * H] for l in range(L)],
         "resid_pre": [mean[L * H + l * T:L * H + (l + 1) * T] for l in range(L)],
         "mlp_out": [mean[L * H + L * T + l * T:L * H + L * T + (l + 1) * T] for l in range(L)]}
per = out["per_pair"]
ids = [[bundle.prepare(s.source).tgt[0].tolist(), bundle.prepare(s.corrupt).tgt[0].tolist()] for s in specs]
print(json.dumps({"times": times, "grids": grids, "ids": ids, "cells": len(rows), "notes": out["notes"],
                  "answers": [[r["answer"]["id"], r["wrong"]["id"]] for r in per],
                  "clean": [r["clean"] for r in per], "corrupt": [r["corrupt"] for r in per],
                  "effects": [[r["effects"][i] for i in order] for r in per]}))
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
raw = []  # each patch's per-pair metric, in the order the patching functions call it (their grids' order)
def metric(logits):
    v = m(logits)
    raw.append(v.tolist())
    return ((v - m_corrupt) / (m_clean - m_corrupt)).mean()
grids = {}
with torch.no_grad():
    for name, fn in (("heads", patching.get_act_patch_attn_head_out_all_pos),
                     ("resid_pre", patching.get_act_patch_resid_pre), ("mlp_out", patching.get_act_patch_mlp_out)):
        g = fn(bridge, corrupt, cache, metric)
        grids[name] = (g if isinstance(g, torch.Tensor) else g.values).tolist()
print(json.dumps({"times": [time.perf_counter() - t], "grids": grids, "raw": raw, "clean": m_clean.tolist(),
                  "corrupt": m_corrupt.tolist()}))
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
    parser.add_argument("--folder", help="reuse a GPT-2 folder (default: make one in a temporary folder)")
    parser.add_argument(
        "--random",
        action="store_true",
        help="GPT-2 small's shape with random weights instead of the small GPT-2 trained on IOI",
    )
    parser.add_argument("--train-steps", type=int, default=500, help="training steps of the IOI model (default 500)")
    parser.add_argument("--pairs", type=int, default=100, help="how many IOI-style pairs (default 100)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads of each side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or str(Path(tmp) / "gpt2")
        if not args.folder and args.random:
            run(sys.executable, MAKE, folder)
        elif not args.folder:
            trained = run(sys.executable, TRAIN, folder, str(args.train_steps), json.dumps([NAMES, PLACES, THINGS]),
                          str(args.threads))  # fmt: skip
            print(f"trained on IOI sentences: accuracy {trained['accuracy']:.3f}, last loss {trained['loss']:.4f}")
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
    kind = "GPT-2 small's shape, random weights" if args.random else "the small GPT-2 trained on IOI"
    print(f"{kind}, {args.pairs} IOI-style pairs of {len(ours['ids'][0][0])} tokens")
    runs = ", ".join(f"{t:.2f}" for t in ours["times"])
    print(f"  scratchformer     {t_ours:7.2f} s   the whole grid, {ours['cells']} cells a pair (runs: {runs})")
    print(f"  TransformerLens   {t_theirs:7.2f} s   {compared} cells (heads all positions, resid_pre, mlp_out)")
    print(f"  speed-up {t_theirs / t_ours:.1f}× (scratchformer doing {ours['cells'] / compared:.1f}× the cells)")
    for k, d in diffs.items():
        print(f"  {k}: max |mean effect difference| {d:.2e}")
    worst = max(diffs.values())
    print(f"  {'within' if worst <= 1e-4 else 'NOT within'} 1e-4;  notes: {ours['notes']}")
    per_pair_check(ours, theirs)
    print(f"load average: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    if worst > 1e-4:
        sys.exit(1)


def per_pair_check(ours: dict, theirs: dict) -> None:
    """Where the means part: each pair's own numbers side by side. The patched metric (a logit difference) is what
    both sides compute; the normalised effect divides it by the pair's gap m_clean − m_corrupt, so a pair whose gap
    is near 0 turns a rounding difference of the logits into a large difference of its effect and of the mean."""
    import torch

    P = len(ours["clean"])
    clean = torch.tensor(ours["clean"], dtype=torch.float64)
    corrupt = torch.tensor(ours["corrupt"], dtype=torch.float64)
    gap = clean - corrupt  # (P,)
    eff_ours = torch.tensor(ours["effects"], dtype=torch.float64)  # (P, cells)
    raw_ours = corrupt[:, None] + eff_ours * gap[:, None]  # (P, cells): each pair's patched metric
    raw_theirs = torch.tensor(theirs["raw"], dtype=torch.float64).T  # (cells, P) → (P, cells)
    t_clean = torch.tensor(theirs["clean"], dtype=torch.float64)
    t_corrupt = torch.tensor(theirs["corrupt"], dtype=torch.float64)
    eff_theirs = (raw_theirs - t_corrupt[:, None]) / (t_clean - t_corrupt)[:, None]
    print(
        f"  per pair: |m_clean difference| ≤ {(clean - t_clean).abs().max():.2e}, |m_corrupt difference| ≤ "
        f"{(corrupt - t_corrupt).abs().max():.2e}, |patched logit difference| ≤ "
        f"{(raw_ours - raw_theirs).abs().max():.2e} (logit differences of size up to {raw_ours.abs().max():.2f})"
    )
    change = lambda raw, c: (raw - c[:, None]).mean(0)  # noqa: E731 - the mean change of the logit difference
    print(
        f"  the mean change of the logit difference (unnormalised), max |difference| "
        f"{(change(raw_ours, corrupt) - change(raw_theirs, t_corrupt)).abs().max():.2e}"
    )
    d = (eff_ours - eff_theirs) / P  # (P, cells): each pair's share of the mean's difference
    cell = int(d.sum(0).abs().argmax())
    j = int(d[:, cell].abs().argmax())
    print(
        f"  the worst cell's mean difference {float(d[:, cell].sum()):.2e}: pair {j + 1} alone gives "
        f"{float(d[j, cell]):.2e}; its gap m_clean − m_corrupt is {float(gap[j]):.2e} (the median |gap| "
        f"{float(gap.abs().median()):.2e})"
    )
    for floor in (1e-2, 1e-1):
        keep = gap.abs() >= floor
        if keep.any():
            diff = (eff_ours[keep].mean(0) - eff_theirs[keep].mean(0)).abs().max()
            print(
                f"  over the {int(keep.sum())} pairs with |gap| ≥ {floor:g}: max |mean effect difference| "
                f"{float(diff):.2e}"
            )


if __name__ == "__main__":
    main()
