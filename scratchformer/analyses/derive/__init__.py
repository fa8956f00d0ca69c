"""How one number was made: any cell of any step of a trace, derived from the cells and parameters it was
computed from, with the formula written out in this run's numbers and the value recomputed from those inputs.

    compute(bundle, trace, "decoder.1.cross_attn.weights", (0, 1, 3, 4)) → Derivation

`scratchformer derive --model M --source S STEP I [I …] [--json]` prints the same. The rule for each kind of step
lives beside this file (embedding_rules, attention_rules, stream_rules); `graph` finds which step feeds which.
"""

from __future__ import annotations

import argparse
import sys

from ...errors import UserError
from ...recording.trace import Trace, step_path
from . import attention_rules as attn
from . import embedding_rules as embed
from . import feature_rules as feature
from . import moe_rules as moe
from . import stream_rules as stream
from .reader import Reader, check_index, split_batch
from .result import Derivation, Term, num

__all__ = ["Derivation", "Term", "compute", "add_parser", "run"]

# One rule per kind of step; the residual stream's kinds and the output layer's are in stream_rules.
RULES = {
    "tokens": embed.tokens,
    "embedding": lambda r, s, *a: (embed.scaled if s.name.endswith(".scaled") else embed.lookup)(r, s, *a),
    "positional_encoding": embed.positional_encoding,
    "input": embed.summed_input,
    "output_scale": embed.output_scale,
    "qkv": attn.projection_in,
    "heads": attn.head_split,
    "scores": attn.score,
    "scaled_scores": attn.scaled_score,
    "position_bias": attn.position_bias,
    "mask": attn.mask,
    "masked_scores": attn.masked_score,
    "attention_weights": attn.weight,
    "context": attn.context,
    "concat": attn.concat,
    "projection": attn.output_projection,
    "rotary": attn.rotary,
    "qk_norm": attn.qk_norm,
    "softcap": attn.softcap,
    "residual": stream.residual,
    "layer_norm": stream.norm,
    "ffn_hidden": stream.ffn_hidden,
    "ffn_gate": stream.ffn_gate,
    "ffn_out": lambda r, s, *a: (moe.ffn_out if s.sublayer.endswith(".moe") else stream.ffn_out)(r, s, *a),
    "router": moe.router,
    "dropout": stream.dropout,
    "logits": stream.logits,
    "probabilities": stream.probabilities,
    "features": lambda r, s, *a: (feature.pre if s.name.endswith(".dict.pre") else feature.features)(r, s, *a),
    "reconstruction": feature.reconstruction,
}


def compute(bundle, trace: Trace, step_name: str, index: tuple[int, ...] | list[int]) -> Derivation:
    """Derive one cell. `index` has one 0-based entry per axis of the step, in the order of its dims. Raises
    UserError (one sentence) for an unknown step or an index out of range. Reads recomputed steps, so it may run
    a sublayer again (off the UI thread in the window)."""
    step = trace.find(step_name)
    if step is None:
        raise UserError(f"This run has no step named {step_name!r}; `scratchformer trace` lists every step's name "
                        "(for example encoder.0.self_attn.weights).")  # fmt: skip
    index = tuple(int(i) for i in index)
    check_index(step, index)
    batch, rest = split_batch(step, index)
    value = float(step.item(batch)[rest])
    reader = Reader(trace, bundle.model)
    made = RULES[step.kind](reader, step, index, value, bundle)
    derivation = Derivation(step.name, index, value, inputs=reader.cells, unlisted=reader.unlisted,
                            title=step_path(step), **made)  # fmt: skip
    changed = [i.spec() for i in trace.interventions if i.spec().startswith(step.sublayer)]
    if changed and not derivation.agrees():
        derivation.note += (f" This run changed this sublayer on purpose ({'; '.join(changed)}), so the value "
                            "differs from the unchanged formula.")  # fmt: skip
    return derivation


def explain_index(trace: Trace, step_name: str, index: tuple[int, ...]) -> str:
    """'batch 1, head 2, query “girl” (1), key “eats” (2)': the cell's place in words, with token labels."""
    step = trace[step_name]
    batch = index[0] if step.dims and step.dims[0] == "batch" else 0
    words = []
    for dim, i in zip(step.dims, index):
        labels = trace.labels(dim, batch)
        if dim == "batch":
            words.append(f"batch item {i + 1}")
        elif dim == "head":
            words.append(f"head {i + 1}")
        elif labels is not None and i < len(labels):
            words.append(f"{dim} {i} “{labels[i]}”")
        else:
            words.append(f"{dim} {i}")
    return ", ".join(words)


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from ...commands.common import add_dictionary_args, add_input_args, add_model_args

    p = sub.add_parser("derive", help="show how one cell of one step was computed from its inputs")
    add_model_args(p)
    add_input_args(p)
    add_dictionary_args(p)
    p.add_argument("step", help="the step's name, e.g. decoder.1.cross_attn.weights (see `scratchformer trace`)")
    p.add_argument("index", nargs="+", type=int, help="one 0-based index per axis of the step, in the order of "
                                                      "its dims (batch first)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from ...commands.common import memory_budget, open_model, print_result, read_inputs, run_traced

    bundle = open_model(args)
    inputs = read_inputs(bundle, args)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    _, trace = run_traced(bundle, inputs, args, keep_output=False, budget=memory_budget(args))
    derivation = compute(bundle, trace, args.step, args.index)
    return print_result(args.json, derivation.to_dict(), lambda: text_report(trace, derivation))


def text_report(trace: Trace, d: Derivation) -> str:
    """The derivation for a terminal: value, formula, expression, terms and the inputs it read, by step."""
    lines = [f"{d.title}  [{d.step}]", f"cell: {explain_index(trace, d.step, d.index)}",
             f"value:       {num(d.value)}", f"formula:     {d.formula}", f"with values: {d.expression}",
             f"recomputed:  {num(d.recomputed)}  ({'equals' if d.agrees() else 'DIFFERS FROM'} the trace's value)"]
    if d.note:
        lines.append(f"note:        {d.note}")
    if d.terms:
        lines.append("terms:")
        lines += [f"  {t.label:<36} {num(t.value)}" for t in d.terms]
    groups = d.input_groups()
    params: dict[str, int] = {}
    for c in d.inputs:
        if c.param is not None:
            params[c.param] = params.get(c.param, 0) + 1
    if groups or params or d.unlisted:
        lines.append("reads:")
        lines += [f"  {len(cells):>5} cell{'s' if len(cells) > 1 else ''} of step {name}" for name, cells in groups]
        lines += [f"  {n:>5} entr{'ies' if n > 1 else 'y'} of parameter {name}" for name, n in params.items()]
        if d.unlisted:
            lines.append(f"  {d.unlisted:>5} more cells (not listed one by one)")
    return "\n".join(lines)
