"""`scratchformer evaluate`: exact match and cross-attention alignment accuracy on a task's split or a TSV."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError
from ..loading.bundle import default_model_name, load_model
from ..patching.interventions import intervene
from ..training.evaluation import evaluate, format_table
from .intervening import ablations, add_ablate_arg


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="exact-match and alignment accuracy of a trained model")
    p.add_argument("--model", default=None, help="bundled model or model folder (default: the bundled en-hi)")
    p.add_argument("--split", choices=("test", "valid", "train"), default="test",
                   help="which split of the model's task (default test)")
    p.add_argument("--data", metavar="FILE.tsv", help="evaluate on your own source<TAB>target[<TAB>alignment] file")
    p.add_argument("--layer", type=int, help="report this decoder layer's alignment, counted from 1 as in the window "
                   "(default: the model's choice)")
    p.add_argument("--limit", type=int, help="only the first N pairs")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_ablate_arg(p)
    p.add_argument("--head-importance", action="store_true",
                   help="also zero each head in turn and print how much the gold tokens' probability drops")


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
    if args.layer is not None and args.layer < 1:
        raise UserError(f"--layer counts from 1, as in the window; {args.layer} is not a layer.")
    bundle = load_model(args.model or default_model_name(), args.device)
    changes = ablations(bundle, args)  # a bad spec is refused before the split is built
    pairs, split = _pairs(bundle, args)
    if args.limit:
        pairs = pairs[: args.limit]
    with intervene(bundle.model, changes):  # greedy decoding and the alignment pass both see the changes
        result = evaluate(bundle, pairs, split, layer=args.layer - 1 if args.layer is not None else None)
    specs = [c.spec() for c in changes]
    importance = None
    if args.head_importance:
        from ..patching.head_importance import format_importance, head_importance_on_pairs

        with intervene(bundle.model, changes):
            importance = head_importance_on_pairs(bundle, pairs)
    if args.json:
        out = {"model": bundle.name, **result.to_dict()}
        if specs:
            out["interventions"] = specs
        if importance is not None:
            out["head_importance"] = {"base": importance.base, "n_tokens": importance.n_tokens,
                                      "drops": {k: v.tolist() for k, v in importance.drops.items()}}
        json.dump(out, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    print(format_table(result, bundle.name))
    if specs:
        print(f"interventions (every figure above is with them): {'; '.join(specs)}")
    guided = bundle.config.extra.get("guided_alignment")
    if guided:
        print(f"note: head {guided['head'] + 1} of decoder layer {guided['layer'] + 1} was trained with guided "
              f"alignment (weight {guided['weight']}); the other heads learnt to attend on their own.")
    if importance is not None:
        print(format_importance(importance))
    return 0
