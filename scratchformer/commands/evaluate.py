"""`scratchformer evaluate`: exact match and cross-attention alignment accuracy on a task's split or a TSV."""

from __future__ import annotations

import argparse
import json
import sys

from ..bundle import default_model_name, load_model
from ..errors import UserError
from ..evaluation import evaluate, format_table


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="exact-match and alignment accuracy of a trained model")
    p.add_argument("--model", default=None, help="bundled model or model folder (default: the bundled en-hi)")
    p.add_argument("--split", choices=("test", "valid", "train"), default="test",
                   help="which split of the model's task (default test)")
    p.add_argument("--data", metavar="FILE.tsv", help="evaluate on your own source<TAB>target[<TAB>alignment] file")
    p.add_argument("--layer", type=int, help="report this decoder layer's alignment (default: the model's choice)")
    p.add_argument("--limit", type=int, help="only the first N pairs")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _pairs(bundle, args):
    if args.data:
        from ..tasks import read_pairs_tsv

        try:
            return read_pairs_tsv(args.data), args.data
        except ValueError as exc:
            raise UserError(str(exc)) from None
    task = bundle.config.extra.get("task")
    if task not in ("en-hi", "copy", "reverse", "sort"):
        raise UserError(f"{bundle.name} was not trained on a built-in task; give its pairs with --data FILE.tsv.")
    from ..training import task_splits

    return task_splits(task, int(bundle.config.extra.get("seed", 0)))[args.split], args.split


def run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, not {args.limit}.")
    bundle = load_model(args.model or default_model_name(), args.device)
    pairs, split = _pairs(bundle, args)
    if args.limit:
        pairs = pairs[: args.limit]
    result = evaluate(bundle, pairs, split, layer=args.layer)
    if args.json:
        json.dump({"model": bundle.name, **result.to_dict()}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(format_table(result, bundle.name))
        guided = bundle.config.extra.get("guided_alignment")
        if guided:
            print(f"note: head {guided['head']} of decoder layer {guided['layer']} was trained with guided "
                  f"alignment (weight {guided['weight']}); the other heads learnt to attend on their own.")
    return 0
