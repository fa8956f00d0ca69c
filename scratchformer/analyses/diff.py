"""Diff two models step by step: where do two checkpoints start to compute something different?

The same input goes through model A and model B (a model and one of its snapshots, two trained runs, a model and
its imported twin, a base model and a fine-tune of it), and every step that both traces name is compared:

    max_abs_diff  = max |a − b|                       over the step's cells
    relative_diff = max |a − b| / max(|a|, |b|)        the largest difference against the largest value

A step "differs" when its relative difference exceeds the tolerance (default 1e-5: float32 keeps about seven
digits, so an imported twin that computes the same thing in another order stays below it), or when its shape
differs. The first such step in A's order is where the two models part. Cells that are −∞ (masking) or NaN in
both count as equal; a cell finite in one model and not in the other is an infinite difference.

Both models read the same decoder input: a typed --target, or else A's own greedy output, which B then reads by
teacher forcing, so their decoder positions line up. When the two tokenizers mean the same tokens by the ids of
this input, B reads A's very ids. Otherwise each model tokenizes the text itself and the steps are compared only
at the positions whose ids (and token strings) agree in both, which the notes say once.

The parameters are compared by state_dict name: those that differ, with the largest difference; those whose
shapes differ or that only one model has, as such.

    compute(a, b, source, target="", start_only=False) → ModelDiff;
    `scratchformer diff --model A --against B --source S [--json]`
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field

import torch

from ..errors import UserError
from ..recording.trace import Trace

TOLERANCE = 1e-5  # relative: a step differs when max|a − b| > TOLERANCE · max(|a|, |b|)
POSITION_DIMS = ("src_pos", "tgt_pos")


@dataclass
class StepDiff:
    """One step both traces name. max_abs_diff and relative_diff are None when the shapes differ."""

    step: str
    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]
    max_abs_diff: float | None
    relative_diff: float | None
    block: str = ""  # the diagram block it belongs to (plotdata.blocks.block_key)

    def differs(self, tolerance: float) -> bool:
        return self.relative_diff is None or self.relative_diff > tolerance

    def to_dict(self) -> dict:
        return {"step": self.step, "max_abs_diff": _number(self.max_abs_diff),
                "relative_diff": _number(self.relative_diff), "shape_a": list(self.shape_a),
                "shape_b": list(self.shape_b)}  # fmt: skip


@dataclass
class ParameterDiff:
    """One state_dict entry that differs: by value (max_abs_diff), by shape, or present in one model only (the
    other's shape is None)."""

    name: str
    shape_a: tuple[int, ...] | None
    shape_b: tuple[int, ...] | None
    max_abs_diff: float | None  # None when the shapes differ or one model lacks it
    relative_diff: float | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "max_abs_diff": _number(self.max_abs_diff),
                "relative_diff": _number(self.relative_diff),
                "shape_a": None if self.shape_a is None else list(self.shape_a),
                "shape_b": None if self.shape_b is None else list(self.shape_b)}  # fmt: skip


@dataclass
class ModelDiff:
    model_a: str
    model_b: str
    steps: list[StepDiff]  # the steps both traces name, in A's order
    tolerance: float
    parameters: list[ParameterDiff]  # only those that differ
    equal_parameters: int  # state_dict entries equal in both, bit for bit
    only_in_a: list[str] = field(default_factory=list)  # step names B's trace lacks
    only_in_b: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trace_a: Trace | None = None  # the two runs, for the side-by-side maps (plotdata.diff); not in to_dict
    trace_b: Trace | None = None
    # per position axis, the positions compared (where both tokenizations agree); None: every position
    positions: dict[str, list[int]] | None = None

    @property
    def first_difference(self) -> str | None:
        """The first step (in A's order) whose relative difference exceeds the tolerance or whose shape differs."""
        return next((s.step for s in self.steps if s.differs(self.tolerance)), None)

    def step(self, name: str) -> StepDiff:
        for s in self.steps:
            if s.step == name:
                return s
        raise UserError(f"The step {name!r} is not one that both models compute.")

    def to_dict(self) -> dict:
        return {"model_a": self.model_a, "model_b": self.model_b, "steps": [s.to_dict() for s in self.steps],
                "first_difference": self.first_difference, "tolerance": self.tolerance,
                "parameters": [p.to_dict() for p in self.parameters], "equal_parameters": self.equal_parameters,
                "only_in_a": self.only_in_a, "only_in_b": self.only_in_b, "positions": self.positions,
                "notes": self.notes}  # fmt: skip


def _number(x: float | None) -> float | None:
    """JSON has no infinity: an infinite difference (a cell finite in one model only) is written as null."""
    return None if x is None or not math.isfinite(x) else float(x)


# --- comparing tensors ---------------------------------------------------------------------------------------------


@torch.inference_mode()
def largest_differences(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> list[tuple[float, float]]:
    """(max |a − b|, max(|a|, |b|) over finite cells) for each pair of equally shaped tensors. The plain formula
    first, all pairs read back at once; a pair whose answer is not finite (masking's −∞ in both gives
    −∞ − (−∞) = NaN) is measured again cell by cell with equal non-finite cells counted as equal."""
    if not pairs:
        return []
    found = []
    for a, b in pairs:
        if a.numel() == 0:
            found.append(torch.zeros(6))
            continue
        a, b = _floats(a), _floats(b)
        d, ra, rb = (a - b).aminmax(), a.aminmax(), b.aminmax()  # one pass each gives both ends
        found.append(torch.stack([d.min, d.max, ra.min, ra.max, rb.min, rb.max]))
    out = []
    for pair, ends in zip(pairs, torch.stack(found).double().tolist()):  # (pairs, 6), one read-back
        if all(math.isfinite(v) for v in ends):
            dn, dx, an, ax, bn, bx = ends
            out.append((max(-dn, dx), max(-an, ax, -bn, bx)))
        else:
            out.append(_careful(*pair))
    return out


def _floats(t: torch.Tensor) -> torch.Tensor:
    """float32 (or float64) as it is; ids, masks and half precision as float32. The difference of two float32
    numbers within a factor 2 of each other is exact (Sterbenz), so float32 loses nothing near zero."""
    return t if t.dtype in (torch.float32, torch.float64) else t.to(torch.float32)


def _careful(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """largest_differences for one pair with non-finite cells: −∞ in both (masking) or NaN in both is equal; a
    cell finite in one model only is an infinite difference."""
    a, b = _floats(a), _floats(b)
    same = (a == b) | (a.isnan() & b.isnan())
    d = (a - b).abs().masked_fill(same, 0.0).nan_to_num(nan=math.inf, posinf=math.inf)
    magnitude = torch.maximum(a.abs(), b.abs()).nan_to_num(nan=0.0, posinf=0.0)
    return float(d.amax()), float(magnitude.amax())


def relative(max_abs: float, magnitude: float) -> float:
    """max |a − b| / max(|a|, |b|); 0 when both are 0 everywhere."""
    if max_abs == 0:
        return 0.0
    return max_abs / magnitude if magnitude > 0 else math.inf


# --- the two runs --------------------------------------------------------------------------------------------------


def _same_tokens(tok_a, tok_b, ids: list[int]) -> bool:
    """Whether both tokenizers mean the same token by every id here."""
    if tok_a is tok_b:
        return True
    if any(i >= tok_b.vocab_size for i in ids):
        return False
    return tok_a.token_strings(ids) == tok_b.token_strings(ids)


def _agreeing(ids_a: list[int], ids_b: list[int], strings_a: list[str], strings_b: list[str]) -> list[int]:
    n = min(len(ids_a), len(ids_b))
    return [i for i in range(n) if ids_a[i] == ids_b[i] and strings_a[i] == strings_b[i]]


def paired_inputs(a, b, source: str, target: str = "", start_only: bool = False):
    """(A's inputs, B's inputs, the positions compared per position axis or None for all, notes). B reads A's
    decoder input: the typed target, or A's greedy output behind the start token."""
    inputs_a = a.prepare_run(source, target, start_only)
    notes = list(inputs_a.notes)
    if inputs_a.decoder_input == "generated":
        notes.append(f"Without a target, both models read {a.name}'s own output “{inputs_a.translation}” behind the "
                     "start token (teacher forcing for the other), so their decoder positions line up.")
    ids_of = {"src_pos": inputs_a.src, "tgt_pos": inputs_a.tgt}
    same = (a.config.has_encoder == b.config.has_encoder and a.config.has_decoder == b.config.has_decoder
            and (inputs_a.src is None or _same_tokens(a.src_tokenizer, b.src_tokenizer, inputs_a.src[0].tolist()))
            and (inputs_a.tgt is None or _same_tokens(a.tgt_tokenizer, b.tgt_tokenizer, inputs_a.tgt[0].tolist()))
            and (inputs_a.tgt is None or inputs_a.tgt[0, 0].item() == b.start_id()))  # fmt: skip
    if same:
        return inputs_a, inputs_a, None, notes
    # B reads the text through its own tokenizer: compare where the ids agree
    decoder_text = inputs_a.translation if inputs_a.decoder_input == "generated" else target
    inputs_b = b.prepare(source, decoder_text, truncate=True)
    positions: dict[str, list[int]] = {}
    said = []
    for dim, tokens_b, ids_b in (("src_pos", inputs_b.source_tokens, inputs_b.src),
                                 ("tgt_pos", inputs_b.target_tokens, inputs_b.tgt)):  # fmt: skip
        ids_a = ids_of[dim]
        if ids_a is None or ids_b is None:
            continue
        tokens_a = inputs_a.source_tokens if dim == "src_pos" else inputs_a.target_tokens
        keep = _agreeing(ids_a[0].tolist(), ids_b[0].tolist(), tokens_a[0], tokens_b[0])
        if not keep:
            side = "source" if dim == "src_pos" else "decoder input"
            raise UserError(f"{a.name} and {b.name} tokenize the {side} into different ids at every position, so no "
                            "step can be compared; compare models that share a tokenizer (a model and its "
                            "snapshots, its fine-tunes or its imported twin).")
        positions[dim] = keep
        said.append(f"{len(keep)} of {ids_a.shape[1]} {'source' if dim == 'src_pos' else 'decoder-input'} positions")
    if said:
        notes.append(f"{a.name} and {b.name} tokenize this input differently, so the steps are compared only where "
                     f"the token ids agree: {' and '.join(said)}.")
    return inputs_a, inputs_b, positions, notes


def _selected(step, positions: dict[str, list[int]] | None) -> torch.Tensor:
    """The step's whole tensor, cut to the compared positions on every position axis."""
    t = step.tensor
    if not positions:
        return t
    for axis, dim in enumerate(step.dims):
        keep = positions.get(dim)
        if keep is not None and t.shape[axis] >= max(keep) + 1:
            t = t.index_select(axis, torch.tensor(keep, dtype=torch.long))
    return t


def compare_traces(trace_a: Trace, trace_b: Trace, positions: dict[str, list[int]] | None = None
                   ) -> tuple[list[StepDiff], list[str], list[str]]:  # fmt: skip
    """(the steps both name, compared; A's steps B lacks; B's steps A lacks)."""
    from ..plotdata.blocks import block_key

    names_b = {s.name for s in trace_b}
    common = [s for s in trace_a if s.name in names_b]
    only_a = [s.name for s in trace_a if s.name not in names_b]
    names_a = {s.name for s in trace_a}
    only_b = [s.name for s in trace_b if s.name not in names_a]
    diffs, pairs, where = [], [], []
    for step_a in common:
        step_b = trace_b[step_a.name]
        ta, tb = _selected(step_a, positions), _selected(step_b, positions)
        diffs.append(StepDiff(step_a.name, tuple(step_a.shape), tuple(step_b.shape), None, None, block_key(step_a)))
        if ta.shape == tb.shape:
            pairs.append((ta, tb))
            where.append(len(diffs) - 1)
    for i, (max_abs, magnitude) in zip(where, largest_differences(pairs)):
        diffs[i].max_abs_diff, diffs[i].relative_diff = max_abs, relative(max_abs, magnitude)
    return diffs, only_a, only_b


def compare_parameters(model_a: torch.nn.Module, model_b: torch.nn.Module) -> tuple[list[ParameterDiff], int]:
    """(the state_dict entries that differ, how many are equal), matched by name, in A's order then B's extras."""
    sa, sb = model_a.state_dict(), model_b.state_dict()
    out: list[ParameterDiff] = []
    pairs, names = [], []
    for name, ta in sa.items():
        tb = sb.get(name)
        if tb is None:
            out.append(ParameterDiff(name, tuple(ta.shape), None, None))
        elif ta.shape != tb.shape:
            out.append(ParameterDiff(name, tuple(ta.shape), tuple(tb.shape), None))
        else:
            pairs.append((ta.detach().cpu(), tb.detach().cpu()))
            names.append(name)
    out += [ParameterDiff(name, None, tuple(tb.shape), None) for name, tb in sb.items() if name not in sa]
    equal = 0
    for name, (ta, _), (max_abs, magnitude) in zip(names, pairs, largest_differences(pairs)):
        if max_abs == 0:
            equal += 1
        else:
            out.append(ParameterDiff(name, tuple(ta.shape), tuple(ta.shape), max_abs, relative(max_abs, magnitude)))
    order = {name: i for i, name in enumerate([*sa, *(n for n in sb if n not in sa)])}
    out.sort(key=lambda p: order[p.name])
    return out, equal


def compute(a, b, source: str, target: str = "", start_only: bool = False, tolerance: float = TOLERANCE
            ) -> ModelDiff:  # fmt: skip
    """Run the input through bundles a and b and compare every step both name, and their parameters."""
    if not tolerance >= 0:
        raise UserError(f"The tolerance must be a number of at least 0, not {tolerance}.")
    inputs_a, inputs_b, positions, notes = paired_inputs(a, b, source, target, start_only)
    _, trace_a = a.run(inputs_a, keep_output=False)
    _, trace_b = b.run(inputs_b, keep_output=False)
    return diff_traces(a, b, trace_a, trace_b, positions, notes, tolerance)


def diff_traces(a, b, trace_a: Trace, trace_b: Trace, positions=None, notes=None, tolerance: float = TOLERANCE
                ) -> ModelDiff:  # fmt: skip
    """The diff of two traced runs of the same input (the window has them already)."""
    steps, only_a, only_b = compare_traces(trace_a, trace_b, positions)
    if not steps:
        raise UserError(f"{a.name} and {b.name} have no step in common, so there is nothing to compare; diff needs "
                        "two models whose steps share names, such as a model and one of its snapshots, two runs of "
                        "one architecture, or a model and its imported twin.")
    parameters, equal = compare_parameters(a.model, b.model)
    notes = list(notes or [])
    if only_a or only_b:
        notes.append(f"{len(only_a)} step(s) of {a.name} and {len(only_b)} of {b.name} have no namesake in the other "
                     "model and are listed apart.")
    return ModelDiff(a.name, b.name, steps, tolerance, parameters, equal, only_a, only_b, notes, trace_a, trace_b,
                     positions)  # fmt: skip


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from ..commands.common import add_input_args, add_model_args

    p = sub.add_parser("diff", help="where two models (or a model and a snapshot) start to differ, step by step",
                       description="Run one input through two models whose steps share names (a model and one of "
                       "its snapshots NAME@step-N, two trained runs, a model and its imported twin, a base model "
                       "and a fine-tune) and compare every step: the largest difference, a relative one, and the "
                       "first step that differs beyond the tolerance; then the parameters that differ.")  # fmt: skip
    add_model_args(p)
    p.add_argument("--against", required=True, help="the second model: anything --model takes")
    add_input_args(p)
    p.add_argument("--tolerance", type=float, default=TOLERANCE,
                   help=f"relative difference above which a step differs (default {TOLERANCE:g})")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ..commands.common import open_model, print_result
    from ..loading.bundle import default_model_name, load_model

    if not args.tolerance >= 0:
        raise UserError(f"The tolerance must be a number of at least 0, not {args.tolerance}.")
    if args.text_file or args.seq_len or args.batch:
        raise UserError("diff compares one sentence: give it with --source (and --target if you like).")
    if args.source is None:
        raise UserError("Give a sentence with --source.")
    if args.start_only and args.target:
        raise UserError("--start-only and --target exclude each other: a typed target is the decoder input.")
    a = open_model(args)
    b = load_model(args.against, args.device, precision=args.precision)
    if (args.model or default_model_name()) == args.against:
        print(f"note: --model and --against both name {args.against}; every difference should be 0.", file=sys.stderr)
    result = compute(a, b, args.source, args.target, args.start_only, args.tolerance)
    return print_result(args.json, result.to_dict(), lambda: text_report(result))


def text_report(d: ModelDiff, shown_parameters: int = 12) -> str:
    """Every step with its differences, the first one that differs marked; then the parameters that differ."""
    lines = [f"A = {d.model_a}, B = {d.model_b}; a step differs when max|A − B| > {d.tolerance:g} × max(|A|, |B|)"]
    width = max(len(s.step) for s in d.steps)
    first = d.first_difference
    for s in d.steps:
        if s.max_abs_diff is None:
            what = f"shapes differ: {list(s.shape_a)} and {list(s.shape_b)}"
        else:
            what = f"max |A − B| {s.max_abs_diff:<10.3g} relative {s.relative_diff:.3g}"
        lines.append(f"  {s.step:<{width}}  {what}{'   ← first difference' if s.step == first else ''}")
    lines.append(f"first difference: {first}" if first else "first difference: none (every step within tolerance)")
    if d.only_in_a or d.only_in_b:
        lines.append(f"steps only in A: {', '.join(d.only_in_a) or 'none'}; "
                     f"only in B: {', '.join(d.only_in_b) or 'none'}")
    if d.parameters:
        lines.append(f"parameters that differ ({len(d.parameters)}; {d.equal_parameters} equal):")
        for p in sorted(d.parameters, key=lambda p: -(p.max_abs_diff if p.max_abs_diff is not None else math.inf)
                        )[:shown_parameters]:  # fmt: skip
            if p.max_abs_diff is not None:
                lines.append(f"  {p.name}  max |A − B| {p.max_abs_diff:.3g}")
            elif p.shape_a is None or p.shape_b is None:
                lines.append(f"  {p.name}  only in {'B' if p.shape_a is None else 'A'}")
            else:
                lines.append(f"  {p.name}  shapes differ: {list(p.shape_a)} and {list(p.shape_b)}")
        if len(d.parameters) > shown_parameters:
            lines.append(f"  … and {len(d.parameters) - shown_parameters} more (--json lists them all)")
    else:
        lines.append(f"parameters: all {d.equal_parameters} equal")
    lines += [f"note: {n}" for n in d.notes]
    return "\n".join(lines)
