"""Attribution graphs beside circuit-tracer (issue 45): the same GPT-2-shaped folder and the same per-layer
transcoders, saved in both layouts, give the same graph — the same active features, the same edges (within 1e-3
relative), the same pruned graph and scores — and how long each side takes. Then en-hi's graph of one translated
token, against its 2 s target.

    python benchmarks/bench_graph.py --ct-python .venv-circuit-tracer/bin/python
        [--folder DIR] [--transcoders DIR] [--train-steps N] [--tc-steps N] [--threads T] [--repeats R]

The folder is benchmarks/bench_sweep_pairs.py's GPT-2 (4 layers × 8 heads, d_model 256, GPT-2's vocabulary)
trained here on IOI sentences for `--train-steps` steps; its transcoder set is trained with `scratchformer features
train --kind transcoder --every-layer` on IOI sentences (BatchTopK, stored as JumpReLU) and converted to
circuit-tracer's format by `to_circuit_tracer`: one safetensors per layer with W_enc (d_sae × d_model, ours
transposed), W_dec, b_enc, b_dec and activation_function.threshold, reading `mlp.hook_in` (the MLP's input after
ln2's scale and shift, which our transcoders read) and writing `mlp.hook_out` (the MLP's output) — the hooks
circuit-tracer's replacement model adds around each MLP.

Both sides explain the same quantity by the same conventions: circuit-tracer attributes the demeaned logit (logit
minus the mean logit), holds the first position (the start token) out of the graph (its features and error are
constants) and makes each embedding node the token's vector alone (GPT-2's position embedding is a constant);
our `build_graph(..., like_circuit_tracer=True)` does the same. Each side attributes the top token's logit only,
every active feature a node (no cap), prunes at 0.8 / 0.98 and scores on the full graph. Times are the graph alone
(models and transcoders loaded, best of `--repeats`): ours `build_graph` (replacement, attribution, pruning,
scores), theirs `attribute` + `prune_graph` + `compute_graph_scores`, each side on `--threads` threads (ours
through build_graph's `threads`; left to itself it runs a model this small on one). circuit-tracer is not a
dependency: give the Python of an environment that has it (scripts/circuit-tracer-env.sh). The machine may be
shared: the load is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDE = Path(__file__).with_name("circuit_tracer_side.py")
PROMPTS = ["When Mary and John went to the store, John gave a drink to",
           "When Tom and Sarah went to the park, Sarah gave a ball to",
           "When Anna and David went to the school, Anna gave a book to"]  # fmt: skip
INPUT_HOOK, OUTPUT_HOOK = "mlp.hook_in", "mlp.hook_out"  # circuit-tracer's ReplacementMLP hooks
TOLERANCE = 1e-3  # relative, on the edges (issue 45)

sys.path.insert(0, str(Path(__file__).resolve().parent))


def to_circuit_tracer(set_dir: str | Path, out_dir: str | Path, n_layers: int) -> list[str]:
    """Our transcoder set (one SAELens-layout folder per feed-forward, decoder.L.ffn.out) → circuit-tracer's per-layer
    files out_dir/layer_L.safetensors; returns their paths in layer order.

    Ours: pre = x W_enc + b_enc (W_enc d_in × d_sae; x − b_dec when the folder centres its input), f = pre where
    pre > threshold and pre > 0. circuit-tracer's: pre = x W_encᵀ + b_enc (W_enc d_sae × d_model), f = pre where
    pre > threshold. So W_enc is transposed, a centring is folded into b_enc (b_enc − b_dec W_enc), and a negative
    threshold is raised to 0 (ours also asks pre > 0)."""
    from safetensors.torch import save_file

    from scratchformer.features.folder import load

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for layer in range(n_layers):
        d = load(Path(set_dir) / f"decoder.{layer}.ffn.out")
        if d.stored_architecture() != "jumprelu":
            sys.exit(f"{set_dir}: layer {layer}'s transcoder is {d.architecture}; circuit-tracer runs JumpReLU and "
                     "ReLU transcoders (BatchTopK is stored as JumpReLU).")  # fmt: skip
        b_enc = d.b_enc - d.b_dec @ d.W_enc if d.centres_input else d.b_enc
        tensors = {"W_enc": d.W_enc.T, "W_dec": d.W_dec, "b_enc": b_enc, "b_dec": d.b_dec,
                   "activation_function.threshold": d.threshold.clamp_min(0.0)}  # fmt: skip
        path = out_dir / f"layer_{layer}.safetensors"
        save_file({k: v.detach().float().contiguous() for k, v in tensors.items()}, str(path))
        paths.append(str(path))
    return paths


def ours(folder: str, set_dir: str, prompts: list[str], out_dir: Path, repeats: int, node_threshold: float = 0.8,
         edge_threshold: float = 0.98, precision: str | None = None, threads: int = 1) -> list[dict]:  # fmt: skip
    """Our graphs of the prompts (circuit-tracer's conventions), each saved as out_dir/ours_I.pt for the other side;
    the best of `repeats` builds is timed, the model and transcoders open. `precision`, `threads`: build_graph's
    (the same threads as circuit-tracer's side)."""
    import torch

    from scratchformer.graph import build_graph
    from scratchformer.graph.transcoders import open_set
    from scratchformer.loading.bundle import load_model

    bundle = load_model(folder)
    sets = open_set(bundle, set_dir)
    rows = []
    for i, text in enumerate(prompts):
        inputs = bundle.prepare_run(text)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            r = build_graph(bundle, inputs, sets, node_threshold=node_threshold, edge_threshold=edge_threshold,
                            like_circuit_tracer=True, precision=precision, threads=threads)  # fmt: skip
            times.append(time.perf_counter() - t)
        g = r.graph
        feats = [n for n in g.nodes if n.kind == "feature"]
        path = out_dir / f"ours_{i}.pt"
        torch.save({"adjacency": g.adjacency, "features": torch.tensor([[n.layer, n.position, n.feature]
                                                                          for n in feats]).reshape(-1, 3),
                    "activations": torch.tensor([n.activation for n in feats], dtype=torch.float64)}, path)  # fmt: skip
        rows.append({"text": text, "ids": inputs.tgt[0].tolist(), "target": g.token_id, "token": g.token,
                     "times": times, "result": r, "path": str(path)})  # fmt: skip
    return rows


def run_side(python: str, job: dict, where: Path) -> dict:
    path = where / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1", "WANDB_MODE": "disabled"}
    python = os.path.abspath(python)  # it runs in the temporary folder (not resolved: a venv's python is a link)
    done = subprocess.run([python, str(SIDE), str(path)], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir())  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"circuit-tracer's side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(mine: dict, theirs: dict) -> dict:
    """One prompt's graphs side by side: the active features, the edges (node for node), pruning, scores."""
    import torch

    r = mine["result"]
    g = r.graph
    a_ours = g.adjacency
    a_theirs = theirs["adjacency"].double()
    f_ours = {(n.layer, n.position, n.feature) for n in g.nodes if n.kind == "feature"}
    f_theirs = {tuple(int(x) for x in row) for row in theirs["features"].tolist()}
    out = {"features": (len(f_ours), len(f_theirs), len(f_ours & f_theirs)), "same_features": f_ours == f_theirs}
    if f_ours != f_theirs or a_ours.shape != a_theirs.shape:
        return out
    # same node order on both sides: features by (layer, position, feature), errors by layer then position,
    # the embeddings by position, the logit
    order = [(n.layer, n.position, n.feature) for n in g.nodes if n.kind == "feature"]
    assert order == [tuple(int(x) for x in row) for row in theirs["features"].tolist()]
    edges = (a_ours != 0) | (a_theirs != 0)
    diff = (a_ours - a_theirs).abs()
    rel = diff[edges] / a_theirs.abs()[edges].clamp_min(1e-30)
    row_max = a_theirs.abs().max(dim=1, keepdim=True).values.expand_as(a_theirs)
    big = edges & (a_theirs.abs() >= 1e-3 * row_max)  # the edges that carry at least 1e-3 of their target's largest
    out["edges"] = int(edges.sum())
    out["max_rel_all"] = float(rel.max())
    out["median_rel"] = float(rel.median())
    out["max_rel_big"] = float((diff[big] / a_theirs.abs()[big]).max())
    out["big"] = int(big.sum())
    out["max_rel_to_row"] = float((diff[edges] / row_max[edges].clamp_min(1e-30)).max())
    out["zero_mismatch"] = int(((a_ours == 0) != (a_theirs == 0)).sum())
    out["scores_ours"] = (r.replacement, r.completeness)
    out["scores_theirs"] = tuple(theirs["scores"])
    out["scores_theirs_on_ours"] = tuple(theirs["on_ours"]["scores"])
    nodes_ours, edges_ours = r.kept.nodes, r.kept.edges
    out["pruned_ours"] = (int(nodes_ours.sum()), int(edges_ours.sum()))
    out["pruned_theirs"] = (int(theirs["node_mask"].sum()), int(theirs["edge_mask"].sum()))
    out["same_nodes"] = torch.equal(nodes_ours, theirs["node_mask"])
    # circuit-tracer's edge mask may keep zero entries between kept nodes (score 0 ≥ a cutoff of 0); ours keeps
    # non-zero edges only: compare the non-zero ones
    out["same_edges"] = torch.equal(edges_ours, theirs["edge_mask"] & (a_theirs != 0))
    held = theirs["on_ours"]
    out["same_nodes_on_ours"] = torch.equal(nodes_ours, held["node_mask"])
    out["same_edges_on_ours"] = torch.equal(edges_ours, held["edge_mask"] & (a_ours != 0))
    return out


def en_hi_time(repeats: int = 3) -> tuple[float, int, int]:
    """en-hi's graph of its first translated token (bundled model and transcoders), best of `repeats`."""
    from scratchformer.graph import build_graph
    from scratchformer.graph.transcoders import open_set
    from scratchformer.loading.bundle import load_model

    bundle = load_model("en-hi")
    inputs = bundle.prepare_run("the girl eats an apple")
    sets = open_set(bundle)
    best, r = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        r = build_graph(bundle, inputs, sets)
        best = min(best, time.perf_counter() - t)
    return best, len(r.graph.nodes), r.graph.n_features


def make_folder(folder: str, steps: int, threads: int) -> None:
    from bench_sweep import run
    from bench_sweep_pairs import NAMES, PLACES, THINGS, TRAIN

    # --threads here too: on this busy two-core machine 300 steps took 3.3 min on one thread, over 10 min on two
    code = f"import torch; torch.set_num_threads({threads})\n" + TRAIN
    trained = run(sys.executable, code, folder, str(steps), json.dumps([NAMES, PLACES, THINGS]))
    print(f"GPT-2 trained on IOI sentences ({steps} steps): accuracy {trained['accuracy']:.3f}, last loss "
          f"{trained['loss']:.4f}")  # fmt: skip


def make_transcoders(folder: str, set_dir: str, steps: int, threads: int, where: Path) -> None:
    import random

    from bench_sweep_pairs import NAMES, PLACES, THINGS

    rng = random.Random(7)
    lines = []
    for _ in range(3000):
        a, b = rng.sample(NAMES, 2)
        lines.append(f"When{a} and{b} went to the{rng.choice(PLACES)},{rng.choice([a, b])} gave a"
                     f"{rng.choice(THINGS)} to")  # fmt: skip
    corpus = where / "ioi.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "scratchformer", "features", "train", "--model", folder, "--kind", "transcoder",
           "--every-layer", "--corpus", str(corpus), "--out", set_dir, "--threads", str(threads), "--steps",
           str(steps), "--width", "512", "--k", "8", "--tokens", "30000", "--json", "--quiet"]  # fmt: skip
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"training the transcoders failed:\n{done.stderr[-3000:]}")
    print(f"transcoders trained in {time.perf_counter() - t:.0f} s: {done.stdout.strip().splitlines()[-1][:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ct-python", required=True, help="a Python with circuit-tracer installed")
    parser.add_argument("--folder", help="reuse a GPT-2 folder (default: train one in a temporary folder)")
    parser.add_argument("--transcoders", help="reuse its transcoder set (default: train one)")
    parser.add_argument("--train-steps", type=int, default=300, help="training steps of the GPT-2 (default 300)")
    parser.add_argument("--tc-steps", type=int, default=400, help="training steps of each transcoder (default 400)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each side (default 1)")
    parser.add_argument("--repeats", type=int, default=2, help="graphs built per prompt and side, the best timed")
    parser.add_argument("--precision", choices=("float32", "float64"), default="float32",
                        help="our graphs' arithmetic set beside circuit-tracer's float32 (default float32); the "
                        "other is timed too")  # fmt: skip
    parser.add_argument("--ct-batch-size", type=int, default=512,
                        help="circuit-tracer's batch_size (default 512, its own default)")  # fmt: skip
    parser.add_argument("--ct-also", type=int, nargs="*", default=[16, 64], metavar="B",
                        help="also time circuit-tracer at these batch sizes (default 16 64: a CPU's)")  # fmt: skip
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = args.folder or str(tmp / "gpt2")
        if not args.folder:
            make_folder(folder, args.train_steps, args.threads)
        set_dir = args.transcoders or str(tmp / "transcoders")
        if not args.transcoders:
            make_transcoders(folder, set_dir, args.tc_steps, args.threads, tmp)
        n_layers = json.loads((Path(folder) / "config.json").read_text())["n_layer"]
        paths = to_circuit_tracer(set_dir, tmp / "circuit-tracer", n_layers)
        mine = ours(folder, set_dir, PROMPTS, tmp, args.repeats, precision=args.precision, threads=args.threads)
        other = "float64" if args.precision == "float32" else "float32"
        (tmp / other).mkdir()
        t_other = sum(min(m["times"]) for m in ours(folder, set_dir, PROMPTS, tmp / other, args.repeats,
                                                    precision=other, threads=args.threads))  # fmt: skip
        job = {"folder": folder, "transcoders": paths, "input_hook": INPUT_HOOK, "output_hook": OUTPUT_HOOK,
               "prompts": [{"ids": m["ids"], "target": m["target"], "ours": m["path"]} for m in mine],
               "threads": args.threads, "repeats": args.repeats, "out": str(tmp / "theirs.pt"),
               "batch_size": args.ct_batch_size, "why": True}  # fmt: skip
        side = run_side(args.ct_python, job, tmp)
        theirs = torch.load(tmp / "theirs.pt", weights_only=False)
        also = {}  # batch size → circuit-tracer's time for every prompt (attribute + prune + scores, best of repeats)
        for size in args.ct_also:
            job |= {"batch_size": size, "why": False, "out": str(tmp / f"theirs_{size}.pt"),
                    "prompts": [{**p, "ours": None} for p in job["prompts"]]}  # fmt: skip
            also[size] = sum(min(p["times"]) for p in run_side(args.ct_python, job, tmp)["prompts"])
    print(
        f"circuit-tracer {side['circuit_tracer']} (TransformerLens {side['transformer_lens']}, transformers "
        f"{side['transformers']}) beside scratchformer ({args.precision}), PyTorch {side['torch']}, {args.threads} "
        f"thread(s) a side"
    )
    for line in side["why_not_from_pretrained"]:
        print(f"  circuit-tracer's own loader: {line}")
    worst, t_ours, t_theirs, t_attr, ok = 0.0, 0.0, 0.0, 0.0, True
    for m, t in zip(mine, theirs):
        c = compare(m, t)
        n_o, n_t, n_both = c["features"]
        print(f"\n“{m['text']}” → “{m['token']}” (id {m['target']}; theirs: argmax {t['argmax']}, demeaned logit "
              f"{t['demeaned']:.4f} vs ours {float(m['result'].graph.real[-1]):.4f})")  # fmt: skip
        same = "the same" if c["same_features"] else "DIFFERENT"
        print(f"  active features: ours {n_o}, theirs {n_t}, shared {n_both}: {same}")
        if "edges" not in c:
            ok = False
            continue
        print(f"  edges: {c['edges']} non-zero; max relative difference {c['max_rel_big']:.2e} over the {c['big']} "
              f"edges ≥ 1e-3 of their target's largest, {c['max_rel_all']:.2e} over all (median "
              f"{c['median_rel']:.1e}), {c['max_rel_to_row']:.2e} of the target's largest; zero on one side "
              f"only: {c['zero_mismatch']}")  # fmt: skip
        so, st, sh = c["scores_ours"], c["scores_theirs"], c["scores_theirs_on_ours"]
        print(f"  scores (replacement, completeness): ours {so[0]:.6f}, {so[1]:.6f}; theirs {st[0]:.6f}, {st[1]:.6f}; "
              f"theirs on our adjacency {sh[0]:.6f}, {sh[1]:.6f}")  # fmt: skip
        print(f"  pruned (nodes, edges): ours {c['pruned_ours']}, theirs {c['pruned_theirs']}: nodes "
              f"{'same' if c['same_nodes'] else 'DIFFERENT'}, edges {'same' if c['same_edges'] else 'DIFFERENT'}; "
              f"its pruning of our adjacency: nodes {'same' if c['same_nodes_on_ours'] else 'DIFFERENT'}, edges "
              f"{'same' if c['same_edges_on_ours'] else 'DIFFERENT'}")  # fmt: skip
        to, tt, ta = min(m["times"]), min(t["times"]), min(t["attribute_times"])
        print(f"  time: ours {to:.3f} s, theirs {tt:.3f} s ({ta:.3f} s of it attribute; batch_size "
              f"{args.ct_batch_size}): {tt / to:.1f}×")  # fmt: skip
        t_ours, t_theirs, t_attr = t_ours + to, t_theirs + tt, t_attr + ta
        worst = max(worst, c["max_rel_big"])
        ok &= c["same_features"] and c["same_nodes"] and c["same_edges"] and c["same_nodes_on_ours"]
        ok &= c["same_edges_on_ours"] and max(abs(a - b) for a, b in zip(so, st)) < 1e-4
    print(f"\nall prompts: ours {t_ours:.3f} s, theirs {t_theirs:.3f} s ({t_attr:.3f} s attribute): "
          f"{t_theirs / t_ours:.1f}× faster (target 2×); largest relative edge difference {worst:.2e} "
          f"({'within' if worst <= TOLERANCE else 'NOT within'} {TOLERANCE:g})")  # fmt: skip
    for size, seconds in also.items():
        print(f"circuit-tracer at batch_size {size}: {seconds:.3f} s for all prompts: ours {seconds / t_ours:.2f}× as "
              f"fast (the speed-up)")  # fmt: skip
    print(f"ours in {args.precision} (above) against ours in {other}: {t_ours:.3f} s against {t_other:.3f} s")
    best, nodes, feats = en_hi_time()
    print(f"en-hi, “the girl eats an apple”, the first translated token: {best:.3f} s ({nodes} nodes, {feats} "
          f"features; target < 2 s)")  # fmt: skip
    print(f"load average: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    if not ok or worst > TOLERANCE:
        sys.exit(1)


if __name__ == "__main__":
    main()
