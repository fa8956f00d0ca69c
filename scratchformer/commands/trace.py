"""`scratchformer trace`: print the walkthrough as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from ..trace import Trace
from .common import add_input_args, add_model_args, open_model, read_inputs


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="print every step of the forward pass (table or JSON)")
    add_model_args(p)
    add_input_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--values", action="store_true", help="with --json: include every tensor's values")


def trace_to_dict(trace: Trace, config: dict, values: bool = False) -> dict:
    steps = []
    for s in trace:
        row = {"index": s.index, "name": s.name, "kind": s.kind, "title": s.title, "shape": list(s.shape),
               "dims": list(s.dims)}
        if values:
            row["values"] = _finite(s.tensor.tolist())
        steps.append(row)
    return {
        "model": config,
        "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens,
        "steps": steps,
    }


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
    inputs = read_inputs(bundle, args)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    _, trace = bundle.run(inputs)
    if args.json:
        json.dump(trace_to_dict(trace, bundle.config.to_dict(), args.values), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    print(bundle.describe())
    print(f"source: {' | '.join(trace.source_tokens[0]) if trace.source_tokens else '-'}")
    print(f"target: {' | '.join(trace.target_tokens[0]) if trace.target_tokens else '-'}")
    width = max(len(s.name) for s in trace)
    print(f"{'#':>4}  {'name':<{width}}  {'kind':<19}  {'shape':<18}  dims")
    for s in trace:
        shape = "×".join(map(str, s.shape))
        print(f"{s.index:>4}  {s.name:<{width}}  {s.kind:<19}  {shape:<18}  {' × '.join(s.dims)}")
    return 0
