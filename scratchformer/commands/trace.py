"""`scratchformer trace`: print the walkthrough as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from ..patching.interventions import intervene
from ..recording.nonfinite import find_nonfinite
from ..recording.trace import Trace
from ..running.generation import Continuation
from ..transformer.departures import departures
from .common import (
    add_dictionary_args,
    add_input_args,
    add_model_args,
    memory_budget,
    open_model,
    read_inputs,
    run_traced,
)
from .intervening import ablations, add_intervention_args, patches


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="print every step of the forward pass (table or JSON)")
    add_model_args(p)
    add_input_args(p)
    add_dictionary_args(p)
    add_intervention_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--values", action="store_true", help="with --json: include every tensor's values")
    p.add_argument("--explain", action="store_true",
                   help="add a plain-language explanation, with this run's numbers, to every step")


DECODER_INPUT_TEXT = {
    "generated": "the model's own output (greedy decoding) behind the start token",
    "continued": "the text and the model's greedy continuation of it behind the start token",
    "typed": "the typed target behind the start token (teacher forcing)",
    "start_only": "the start token alone",
    "windows": "each window shifted right behind the start token",
    "none": "none (the model has no decoder)",
}


def decoder_input_text(decoder_input: str, has_encoder: bool) -> str:
    """What the decoder read, in words: a decoder-only model's generated input is its continuation of the text."""
    continued = decoder_input == "generated" and not has_encoder
    return DECODER_INPUT_TEXT.get("continued" if continued else decoder_input, decoder_input)


def trace_to_dict(trace: Trace, config: dict, values: bool = False, explanations: list[str] | None = None,
                  decoder_input: str | None = None, translation: str = "") -> dict:
    steps = []
    for s in trace:
        row = {"index": s.index, "name": s.name, "kind": s.kind, "title": s.title, "shape": list(s.shape),
               "dims": list(s.dims)}
        if explanations is not None:
            row["explanation"] = explanations[s.index]
        if values:
            row["values"] = _finite(s.tensor.tolist())
        steps.append(row)
    out = {
        "model": config,
        "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens,
    }
    if decoder_input is not None:
        out["decoder_input"] = decoder_input
        if decoder_input == "generated":
            out["translation"] = translation
    if trace.interventions:
        out["interventions"] = [i.spec() for i in trace.interventions]
    out["steps"] = steps
    return out


def model_dict(bundle) -> dict:
    """The config, its departures from the 2017 paper, and parameter counts keyed by block name (each sublayer,
    layer, stack, embeddings, total)."""
    from ..transformer.parameters import parameter_counts

    counts = {k: v.count for k, v in parameter_counts(bundle.model).items()}
    return {**bundle.config.to_dict(), "departures": departures(bundle.config), "parameters": counts}


def _finite(value):
    """JSON has no infinities: masked cells (−∞) become the string "-inf"."""
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, int):
        return value
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


def run(args: argparse.Namespace) -> int:
    if args.values and not args.json:
        print("scratchformer: --values only goes with --json.", file=sys.stderr)
        return 2
    bundle = open_model(args)
    ablate = ablations(bundle, args)
    with intervene(bundle.model, ablate):  # a generated decoder input is the changed model's own output
        inputs = read_inputs(bundle, args, Continuation())  # a decoder-only model continues the text greedily
    changes = ablate + patches(bundle, args, inputs)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    _, trace = run_traced(bundle, inputs, args, changes, keep_output=False, budget=memory_budget(args))
    found = find_nonfinite(bundle.model, trace)  # NaN or ±∞ in the weights or the steps: said, never hidden
    if found is not None:
        print(f"warning: {found.sentence()}", file=sys.stderr)
    explanations = None
    if args.explain:
        from ..explain import explain_step

        names = bundle.tgt_tokenizer.token_strings
        explanations = [explain_step(trace, s, bundle.config, vocab_labels=names).text() for s in trace]
    if args.json:
        out = trace_to_dict(trace, model_dict(bundle), args.values, explanations, inputs.decoder_input,
                            inputs.translation)
        if found is not None:
            out["nonfinite"] = found.to_json()
        if inputs.lost:  # what the tokenizer could not keep (absent when it kept everything), as the note says
            out["lost_text"] = {side: [{"text": a, "became": b} for a, b in pairs]
                                for side, pairs in inputs.lost.items()}
        json.dump(out, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    print(bundle.describe())
    changed = departures(bundle.config)
    print("departures from the 2017 paper: " + ("; ".join(changed) if changed else "none, the paper's architecture"))
    if bundle.untrained:
        print("untrained: random weights, attention carries no meaning yet")
    print(f"source: {' | '.join(trace.source_tokens[0]) if trace.source_tokens else '-'}")
    print(f"target: {' | '.join(trace.target_tokens[0]) if trace.target_tokens else '-'}")
    continued = inputs.decoder_input == "generated" and not bundle.config.has_encoder
    print(f"decoder input: {decoder_input_text(inputs.decoder_input, bundle.config.has_encoder)}")
    if trace.interventions:
        print(f"interventions: {'; '.join(i.spec() for i in trace.interventions)}")
    if inputs.decoder_input == "generated":
        print(f"the model's {'continuation' if continued else 'output'}: {inputs.translation}")
    width = max(len(s.name) for s in trace)
    print(f"{'step':>4}  {'name':<{width}}  {'kind':<19}  {'shape':<18}  dims")
    for s in trace:  # steps counted from 1, as in the window and the explanations' links (JSON "index" is 0-based)
        shape = "×".join(map(str, s.shape))
        mark = "  ⚠ first step with values that are not finite" if found and s.index == found.first_index else ""
        print(f"{s.index + 1:>4}  {s.name:<{width}}  {s.kind:<19}  {shape:<18}  {' × '.join(s.dims)}{mark}")
        if explanations is not None:
            for line in explanations[s.index].splitlines():
                print(f"        {line}" if line else "")
    return 0
