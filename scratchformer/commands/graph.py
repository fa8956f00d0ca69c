"""`scratchformer graph`: the attribution graph of one prediction through transcoder features
(scratchformer.graph; DESIGN.md gives the JSON, docs/graphs.md explains it)."""

from __future__ import annotations

import argparse
import sys

from ..errors import UserError
from .common import add_input_args, add_model_args, memory_budget, open_model, print_result, read_inputs
from .intervening import ablations, add_ablate_arg


def add_parser(sub) -> None:
    from ..graph.build import MAX_FEATURES
    from ..graph.influence import EDGE_THRESHOLD, NODE_THRESHOLD

    p = sub.add_parser("graph", help="attribution graph of one prediction through transcoder features",
                       description="Replace every feed-forward by its transcoder (plus an error node), freeze the "
                       "attention patterns and norm scales at this run's values, and show which input tokens, "
                       "features and errors push the chosen logit, directly and through each other — for an "
                       "encoder-decoder across the cross-attention too. Pruned by influence on the logit.")  # fmt: skip
    add_model_args(p)
    add_input_args(p)
    add_ablate_arg(p)
    p.add_argument("--transcoders", metavar="DIR",
                   help="a transcoder set: one folder per feed-forward (features train --kind transcoder "
                   "--every-layer); default: the set a bundled model ships")  # fmt: skip
    p.add_argument(
        "--dictionary",
        action="append",
        default=[],
        metavar="DIR",
        help="a single transcoder folder, with or instead of a set (repeatable)",
    )
    p.add_argument("--token", metavar="TOKEN",
                   help="explain this token's logit instead of the most likely one's: one token of the model's "
                   "vocabulary (GPT-2's often start with a space: ' Mary'), or id:N")  # fmt: skip
    p.add_argument("--versus", metavar="TOKEN",
                   help="explain the logit difference: the explained token's logit minus this token's (why the model "
                   "prefers the one to the other); one token, or id:N")  # fmt: skip
    p.add_argument("--position", type=int, default=None, metavar="P",
                   help="the decoder position whose prediction is explained, from 0 (default: the last of a typed "
                   "decoder input; the first generated token when the model writes its own)")  # fmt: skip
    p.add_argument(
        "--node-threshold",
        type=float,
        default=NODE_THRESHOLD,
        metavar="F",
        help=f"keep the nodes that carry this share of the influence on the logit (default {NODE_THRESHOLD})",
    )
    p.add_argument(
        "--edge-threshold",
        type=float,
        default=EDGE_THRESHOLD,
        metavar="F",
        help=f"keep the edges that carry this share of the influence on the logit (default {EDGE_THRESHOLD})",
    )
    p.add_argument("--no-prune", action="store_true", help="keep every node and edge")
    p.add_argument("--max-features", type=int, default=MAX_FEATURES, metavar="N",
                   help=f"most feature nodes; beyond it the most influential are kept and the others join the "
                   f"error nodes (default {MAX_FEATURES})")  # fmt: skip
    p.add_argument("--demeaned", action="store_true",
                   help="explain the logit minus the mean of every logit there (circuit-tracer's target)")  # fmt: skip
    p.add_argument("--like-circuit-tracer", action="store_true",
                   help="circuit-tracer's conventions: the demeaned logit, embedding nodes of the token alone (the "
                   "positional encoding a constant), the first position's features and errors held as "
                   "constants")  # fmt: skip
    p.add_argument("--graph-precision", choices=("float64", "float32"),
                   help="the replacement's arithmetic: float64 (the default below 50 million parameters: its sums "
                   "close to about 1e-12) or float32 (the default above, as circuit-tracer computes: to about "
                   "1e-5, in about half the time)")  # fmt: skip
    p.add_argument("--qk", action="append", default=[], metavar="ATTENTION.headH[@Q[,K]]",
                   help="why attention moved it: split this head's score at query Q and key K (default: the "
                   "explained position and the key it attends to most) into query-node × key-node products of the "
                   "graph's nodes; the JSON gains \"qk\" (repeatable)")  # fmt: skip
    p.add_argument("--top", type=int, default=12, metavar="N", help="nodes and edges listed without --json")
    p.add_argument("--json", action="store_true", help="print the graph as JSON")


def run(args: argparse.Namespace) -> int:
    from ..graph.build import build_graph

    if args.top < 1:
        raise UserError(f"--top must be at least 1, not {args.top}.")
    if args.seq_len or args.batch:
        raise UserError("A graph explains one prediction of one input: --seq-len and --batch do not apply.")
    bundle = open_model(args)
    inputs = read_inputs(bundle, args)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    result = build_graph(bundle, inputs, args.transcoders, args.position, args.node_threshold, args.edge_threshold,
                         not args.no_prune, args.max_features, memory_budget(args), args.dictionary, args.demeaned,
                         args.like_circuit_tracer, precision=args.graph_precision,
                         interventions=ablations(bundle, args), token=args.token, versus=args.versus)  # fmt: skip
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    payload = result.to_dict()
    splits = []
    if args.qk:
        from ..graph.qk import parse_qk, split_score

        splits = [split_score(result.replacement_model, result.graph, *parse_qk(spec), top=args.top)
                  for spec in args.qk]  # fmt: skip
        payload["qk"] = [s.to_dict() for s in splits]
    return print_result(args.json, payload, lambda: "\n\n".join([result.text(args.top), *(s.text() for s in splits)]))
