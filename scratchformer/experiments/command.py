"""`scratchformer experiment NAME --model M --source S [--json]`: one live experiment on that model and input,
as a table or as JSON (DESIGN.md "Analyses and teaching"). An experiment that does not apply to the model says
why in one sentence (exit status 2)."""

from __future__ import annotations

import argparse

from . import EXPERIMENTS, experiment_named, run_experiment


def add_parser(sub) -> None:
    from ..commands.common import add_model_args

    names = ", ".join(EXPERIMENTS)
    p = sub.add_parser("experiment", help=f"measure one claim on a model: {names}",
                       description=f"Run one live experiment ({names}) on a model and a sentence.")
    p.add_argument("name", metavar="NAME", help=f"the experiment: {names} (teacher-forcing is accepted too)")
    add_model_args(p)
    p.add_argument("--source", help="source sentence (default: the model's first example)")
    p.add_argument("--target", default="", help="target sentence (the decoder input, or the teacher-forcing "
                                                "reference); without it the model's own greedy output")  # fmt: skip
    p.add_argument("--d-k", type=int, dest="d_k", help="scaling: the d_k of the highlighted row (default 64)")
    p.add_argument("--temperature", type=float, help="temperature: T of the output softmax (default 1)")
    p.add_argument("--position", type=int, help="temperature: the decoder position whose next token is shown")
    p.add_argument("--snapshot", type=int, help="teacher_forcing: the training step of the snapshot to decode")
    p.add_argument("--sparsity", type=float, help="superposition: the sparse setting's S, the chance that a feature "
                                                  "is 0 (default 0.9; the dense setting has 0)")  # fmt: skip
    p.add_argument("--seed", type=int, help="seed of the random draws (q and k, replaced tokens, the shuffle, "
                                            "sampling); default 0")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ..commands.common import open_model, print_result

    exp = experiment_named(args.name)  # an unknown name: one sentence before any model loads
    bundle = open_model(args)
    source = args.source if args.source is not None else bundle.examples()[0].source  # every model has one
    given = {"d_k": args.d_k, "temperature": args.temperature, "position": args.position,
             "snapshot": args.snapshot, "seed": args.seed, "sparsity": args.sparsity}
    controls = {k: v for k, v in given.items() if v is not None}
    unused = sorted(set(controls) - set(exp.controls))
    if unused:
        from ..errors import UserError

        option = "--" + unused[0].replace("_", "-")
        raise UserError(f"{option} does not apply to the {exp.name} experiment; its controls are "
                        f"{', '.join(k for k in exp.controls if k not in SWITCHES) or 'none'}.")  # fmt: skip
    result = run_experiment(exp.name, bundle, source, args.target, **controls)
    return print_result(args.json, result, lambda: text_report(result))


SWITCHES = ("masked", "positional", "batchnorm", "sparse")  # the window's switches: which half of a result it draws


def _row(label: str, *cells) -> str:
    return f"  {label:<28}" + "".join(f"{c:>14}" for c in cells)


def _num(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def text_report(r: dict) -> str:
    """The result as a terminal table: what was measured, both sides of the claim, and the summary."""
    name = r["experiment"]
    lines = [f"{name} on {r['model']}: {r['claim']}", f"source: {r['source']}"]
    if name == "scaling":
        lines.append(_row(f"random q, k ({r['samples']}×{r['keys']})", "max weight", "entropy", "|∂softmax|"))
        for row in r["rows"]:
            for side in ("unscaled", "scaled"):
                s = row[side]
                lines.append(_row(f"d_k {row['d_k']:>4}  {side}", _num(s["max_weight"]), _num(s["entropy"]),
                                  _num(s["mean_abs_gradient"])))  # fmt: skip
        m = r["model_qk"]
        lines.append(f"the model's own q and k ({m['attention']}, d_k {m['d_k']}, {m['heads']} heads):")
        for side in ("unscaled", "scaled"):
            s = m[side]
            lines.append(_row(side, _num(s["max_weight"]), _num(s["entropy"]), _num(s["mean_abs_gradient"])))
    elif name == "mask":
        lines.append(_row("", "max change from a later token"))
        lines.append(_row("with the causal mask", _num(r["with_mask"]["max_change_from_future"])))
        lines.append(_row("without it", _num(r["without_mask"]["max_change_from_future"])))
        lines.append("decoder input: " + " ".join(r["decoder_tokens"]))
    elif name == "order":
        lines.append(_row("", "put back", "in place"))
        for key, label in (("with_pe", "with positional encoding"), ("without_pe", "without it")):
            lines.append(_row(label, _num(r[key]["max_diff_after_unpermuting"]), _num(r[key]["max_diff_in_place"])))
        lines.append("shuffled source: " + " ".join(r["shuffled_tokens"]))
    elif name == "norm":
        lines.append(_row("", "other item", "padding"))
        for key, label in (("layernorm", "LayerNorm"), ("batchnorm", "BatchNorm")):
            lines.append(_row(label, _num(r[key]["change_from_other_items"]), _num(r[key]["padding_shift"])))
    elif name == "teacher_forcing":
        lines.append(f"snapshot: {r['snapshot']['spec']}; reference: {r['reference']['text']}")
        lines.append(_row("position", *[str(i + 1) for i in range(len(r["reference"]["tokens"]))]))
        lines.append(_row("reference", *r["reference"]["tokens"]))
        for key, label in (("teacher_forced", "teacher forcing"), ("free_running", "free-running")):
            marks = [f"{t}{'' if ok else ' ✗'}" for t, ok in zip(r[key]["predicted"], r[key]["correct"])]
            lines.append(_row(f"{label} ({r[key]['accuracy']:.0%})", *marks))
        if r["snapshots"]:
            lines.append(_row("by snapshot", "teacher", "free"))
            lines += [_row(f"step {s['step']}", _num(s["teacher_forced"]), _num(s["free_running"]))
                      for s in r["snapshots"]]
    elif name == "temperature":
        n = r["next_token"]
        lines.append(_row(f"T = {r['temperature']:g}", "entropy", "top p"))
        lines.append(_row("next token", _num(n["entropy"]), _num(n["top_probability"])))
        lines.append(_row("at T = 1", _num(r["at_1"]["entropy"]), _num(r["at_1"]["top_probability"])))
        lines.append("top tokens: " + ", ".join(f"{t['token']} {t['p']:.3f}" for t in n["top"]))
        lines.append(f"greedy:  {r['greedy']['text']}")
        lines.append(f"sampled: {r['sampled']['text']}  (seed {r['sampled']['seed']})")
    elif name == "superposition":
        lines.append(f"{r['features']} features into {r['dims']} dimensions, importance "
                     + ", ".join(f"{i:.2f}" for i in r["importance"]) + f"; stored: ‖W_i‖ > {r['threshold']}")
        lines.append(_row("feature", *[str(i + 1) for i in range(r["features"])]))
        for key in ("dense", "sparse"):
            side = r[key]
            lines.append(f"sparsity {side['sparsity']:g}: {side['stored']} stored, loss {_num(side['loss'])}")
            lines.append(_row("  ‖W_i‖", *[_num(v) for v in side["norms"]]))
            lines.append(_row("  interference", *[_num(v) for v in side["interference"]]))
            lines.append(_row("  b_i", *[_num(v) for v in side["b"]]))
    elif name == "polysemantic":
        n = r["neuron"]
        lines.append(f"{n['step']}, neuron {n['index']}: over {r['sentences']} sentences ({r['tokens']} tokens)")
        lines.append(_row("word", "class", "activation"))
        lines += [_row(t["token"], t["class"], _num(t["activation"])) for t in n["top"]]
    for note in r.get("notes", []):
        lines.append(f"note: {note}")
    lines.append(r["summary"])
    return "\n".join(lines)
