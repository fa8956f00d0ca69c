"""Which components carry a behaviour: activation-patching sweeps, attribution patching and path patching.

A clean input and a corrupted one (one word changed, the same number of tokens). Each component's activation is
copied from the clean run into the corrupted one, and the metric m at the last decoder position says how much of
the clean answer comes back (scratchformer.patching):

    m = logit[answer] − logit[wrong]     (or log P(answer) with --metric logprob)
    effect = (m_patched − m_corrupt) / (m_clean − m_corrupt)     1: the clean m restored, 0: nothing

The grid: every head's output before W^O of every attention (encoder self, decoder self, cross), at all
positions or (--per-position) at each; every residual-stream point × position; every feed-forward output ×
position. --method exact patches them for real (batched, scratchformer.patching.batched), attribution estimates
them from one backward pass (scratchformer.patching.attribution), both reports the two side by side and marks
where they disagree. --path SENDER RECEIVER adds path patching (scratchformer.patching.paths).

    compute(bundle, clean, corrupt, …) → Sweep;  Sweep.to_dict() is what `sweep --json` prints
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import torch

from ..datasets.corruption import replace_word
from ..errors import UserError
from ..loading.memory import default_budget
from ..patching import attribution, components
from ..patching.batched import patched_metrics
from ..patching.components import component_label
from ..patching.metric import KINDS
from ..patching.pair import Pair, make_pair
from ..patching.paths import path_patch
from ..patching.result import Grid, Sweep  # re-exported: the result's types lived here
from ..plotdata.sweep import explanation

METHODS = ("exact", "attribution", "both")


def corrupted_text(source: str, corrupt_source: str | None, corrupt_word: str | None) -> str:
    """The corrupted sentence: --corrupt-source as given, or the source with word I replaced (--corrupt-word
    I=WORD, words split at spaces and counted from 0)."""
    if (corrupt_source is None) == (corrupt_word is None):
        raise UserError("Give the corrupted input: either --corrupt-source TEXT or --corrupt-word I=WORD.")
    if corrupt_source is not None:
        return corrupt_source
    return replace_word(source, corrupt_word)


def grids(model, pair: Pair, per_position: bool) -> tuple[Grid, Grid, Grid]:
    t = pair.n_positions("tgt")
    s = pair.n_positions("src") if pair.src_clean is not None else 0
    return (Grid(components.head_components(model, t, s, per_position)),
            Grid(components.residual_components(model, t, s)), Grid(components.mlp_components(model, t, s)))


def checked_rows(pair: Pair, families: list, k: int, budget: int | None) -> list[dict]:
    """Attribution patching's k largest estimates over the grids `families` (heads, points, feed-forwards), each
    patched for real: the sweep's `checked` rows (the window's "Check for real" runs this too)."""
    every = [c for g in families for c in g.components]
    estimates = torch.cat([g.estimates for g in families])
    rows = []
    for i, est, exact in attribution.check_top_k(pair, every, estimates, k, budget):
        c = every[i]
        disagree = abs(est - exact) > attribution.DISAGREE
        rows.append({"component": component_label(c), "step": c.step, "head": c.head, "position": c.position,
                     "estimate": est, "effect": exact, "disagree": disagree})  # fmt: skip
    return rows


def sweep_pair(pair: Pair, method: str = "exact", per_position: bool = False, path: tuple[str, str] | None = None,
               check_top: int = 0, budget: int | None = None, progress: Callable[[int, int], None] | None = None,
               cancelled: Callable[[], bool] | None = None) -> Sweep | None:  # fmt: skip
    """The sweep of an existing pair of runs (the window keeps one); None when cancelled() turns true. `budget`:
    the memory the patched batches may take, in bytes (default: half the machine's memory); progress(done, total)
    is called after each batch."""
    budget = default_budget() if budget is None else budget
    if method not in METHODS:
        raise UserError(f"--method is one of {', '.join(METHODS)}, not {method!r}.")
    if check_top and method == "exact":
        raise UserError("--check-top checks attribution patching's largest estimates: add --method attribution.")
    notes: list[str] = []
    if pair.gap == 0:
        notes.append("m_clean equals m_corrupt: there is nothing to restore, so every effect is 0.")
    elif abs(pair.gap) < 0.1:
        notes.append(f"m_clean − m_corrupt is only {pair.gap:.3g}: the effects divide by it and are noisy; pick "
                     f"a corruption that changes the answer more, or {pair.names['tokens']}.")  # fmt: skip
    heads, points, mlp = grids(pair.model, pair, per_position)
    families = [heads, points, mlp]
    every = [c for g in families for c in g.components]
    if method != "exact":
        estimated = pair.share(attribution.estimate(pair, every))
        a = 0
        for g in families:
            g.estimates, a = estimated[a : a + len(g.components)], a + len(g.components)
    if method != "attribution":
        m = patched_metrics(pair, every, budget=budget, notes=notes, progress=progress, cancelled=cancelled)
        if m is None:
            return None
        effects, a = pair.effect(m), 0
        for g in families:
            g.effects, a = effects[a : a + len(g.components)], a + len(g.components)
    checked = checked_rows(pair, families, check_top, budget) if check_top else []
    found = path_patch(pair, *path, budget=budget) if path is not None else None
    if found is not None and not found.possible:
        notes.append(f"{found.receiver} runs before {found.sender} or cannot read its output along the residual "
                     "stream, so the path does not exist and its effect is 0.")  # fmt: skip
    return Sweep(pair.metric, pair.m_clean, pair.m_corrupt, method, per_position, heads, points, mlp,
                 pair.source_tokens, pair.corrupt_tokens, pair.target_tokens, found, checked, notes)  # fmt: skip


def compute(bundle, clean, corrupt, answer: str | None = None, wrong: str | None = None, metric: str = "logit-diff",
            **options) -> Sweep | None:  # fmt: skip
    """The sweep of two inputs (scratchformer.loading.model_bundle.Inputs, one sentence each, the same token length);
    `options` as sweep_pair takes them."""
    return sweep_pair(make_pair(bundle, clean, corrupt, answer, wrong, metric), **options)


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from ..commands.common import add_input_args, add_model_args

    p = sub.add_parser("sweep", help="activation patching of every head, position and feed-forward (clean → "
                       "corrupted), attribution patching and path patching",
                       description="Patch each component's activation from the clean run into the corrupted one and "
                       "measure how much of the clean answer comes back: effect = (m_patched − m_corrupt) / "
                       "(m_clean − m_corrupt), m the logit difference of --answer and --wrong at the last decoder "
                       "position.")  # fmt: skip
    add_model_args(p)
    add_input_args(p)
    p.add_argument("--corrupt-source", metavar="TEXT", help="the corrupted input (the same number of tokens)")
    p.add_argument("--corrupt-word", metavar="I=WORD", help="the corrupted input: the source with word I (from 0) "
                   "replaced by WORD")
    p.add_argument("--answer", metavar="TOKEN", help="the clean answer token (default: the clean run's top token at "
                   "the last decoder position); one token, or id:N")
    p.add_argument("--wrong", metavar="TOKEN", help="the token it is compared with (default: the corrupted run's "
                   "top token there)")
    p.add_argument("--metric", choices=KINDS, default="logit-diff",
                   help="logit-diff (default): logit[answer] − logit[wrong]; logprob: log P(answer)")
    p.add_argument("--per-position", action="store_true", help="patch each head at each position alone")
    p.add_argument("--method", choices=METHODS, default="exact", help="exact patching (default), attribution "
                   "patching (one backward pass), or both side by side")
    p.add_argument("--check-top", type=int, default=0, metavar="K",
                   help="with attribution: patch the K largest estimates for real")
    p.add_argument("--path", nargs=2, metavar=("SENDER", "RECEIVER"),
                   help="path patching: SENDER a head (decoder.0.self_attn.head1), RECEIVER a head's input "
                   "(decoder.1.self_attn.head0.q, .k or .v) or logits")
    p.add_argument("--pairs", metavar="FILE", help="sweep every pair of a JSONL or CSV pairs file (fields source, "
                   "corrupt or corrupt_word, and optional target, answer, wrong) and report each effect as the mean "
                   "over pairs with its std; under torchrun the ranks share the pairs")  # fmt: skip
    p.add_argument("--per-pair", action="store_true", help="with --pairs: add each pair's effects to the JSON")
    p.add_argument("--dictionary", metavar="DIR", help="also patch the features of this SAE (a folder in SAELens's "
                   "layout): each feature that differs between the runs, at each position, set to its clean value "
                   "in the corrupted run; the JSON gains \"features\" (with --pairs: each one's mean over the pairs)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ..commands.common import memory_budget, open_model, print_result, read_inputs

    if args.check_top < 0:
        raise UserError(f"--check-top must be 0 or more, not {args.check_top}.")
    if args.pairs:
        from . import sweep_pairs

        return sweep_pairs.run(args, text_report)
    if args.per_pair:
        raise UserError("--per-pair adds each pair's effects to a sweep over a pairs file: add --pairs FILE.")
    if args.text_file or args.seq_len or args.batch:
        raise UserError("sweep compares two sentences: give --source, not --text-file.")
    bundle = open_model(args)
    text = corrupted_text(args.source or "", args.corrupt_source, args.corrupt_word)
    clean = read_inputs(bundle, args)
    corrupt = bundle.prepare(text, args.target)
    for note in clean.notes:
        print(f"note: {note}", file=sys.stderr)
    pair = make_pair(bundle, clean, corrupt, args.answer, args.wrong, args.metric)
    result = sweep_pair(pair, method=args.method, per_position=args.per_position,
                        path=tuple(args.path) if args.path else None, check_top=args.check_top,
                        budget=memory_budget(args))  # fmt: skip
    payload = result.to_dict()
    if args.dictionary:
        from ..features.folder import load
        from ..features.patching import feature_sweep

        rows, notes = feature_sweep(pair, load(args.dictionary))
        result.notes.extend(notes)
        payload["features"] = rows
        payload["notes"] = result.notes
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return print_result(args.json, payload, lambda: text_report(result, features=payload.get("features")))


def text_report(s: Sweep, top: int = 8, features: list[dict] | None = None) -> str:
    """The metric at both ends, then each family's largest effects."""
    lines = [explanation(s), ""]
    for title, grid in (("heads", s.heads), ("residual stream", s.positions), ("feed-forward", s.mlp)):
        shown = grid.shown()
        if not grid.components:
            continue
        lines.append(f"{title}: largest |effect| of {len(grid.components)}")
        flags = grid.disagree()
        for i in shown.abs().argsort(descending=True)[:top].tolist():
            extra = f"   estimate {float(grid.estimates[i]):+.3f}" if s.method == "both" else ""
            mark = "  (disagree)" if flags is not None and bool(flags[i]) else ""
            lines.append(f"  {float(shown[i]):+.3f}  {component_label(grid.components[i])}{extra}{mark}")
    if features is not None:
        lines.append(f"features: largest |effect| of {len(features)} patched (feature, position)")
        lines += [f"  {f['effect']:+.3f}  feature {f['feature']} at position {f['position'] + 1} ({f['corrupt']:.3g} → "
                  f"{f['clean']:.3g})" for f in features[:top]]  # fmt: skip
    for c in s.checked:
        lines.append(f"checked: {c['component']}: estimate {c['estimate']:+.3f}, patched {c['effect']:+.3f}")
    if s.path is not None:
        p = s.path
        lines.append(f"path {p.sender} → {p.receiver}: {p.path:+.3f} (direct to the logits {p.direct:+.3f}, total "
                     f"{p.total:+.3f})")  # fmt: skip
    return "\n".join(lines)
