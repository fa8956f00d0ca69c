"""Arguments and steps that several subcommands share."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError
from ..loading.bundle import Inputs, ModelBundle, default_model_name, load_model
from ..loading.memory import default_budget
from ..running.batching import read_text_file
from ..running.generation import Continuation


def add_model_args(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    parser.add_argument("--model", default=default,
                        help="preset (paper, blog, llama-tiny-random), bundled model, or model folder; "
                        "NAME@step-NNNNNN picks one of a trained model's snapshots (train --snapshots N)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--precision", choices=("float32", "stored"), default="float32",
                        help="a Hugging Face folder's weights in float32 (default) or in the precision they are "
                        "stored in (stored: bfloat16 stays bfloat16, half the memory)")


def add_input_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", help="source sentence")
    parser.add_argument("--text-file", help="read the source from a UTF-8 text file")
    parser.add_argument("--target", default="", help="target sentence for teacher forcing (without it, an "
                        "encoder-decoder reads its own greedy output behind the start token)")
    parser.add_argument("--start-only", action="store_true",
                        help="without --target: the decoder reads the start token alone (a decoder-only model "
                        "reads the text without continuing it)")
    parser.add_argument("--seq-len", type=int, help="with --text-file: window length S")
    parser.add_argument("--batch", type=int, help="with --text-file: number of windows B (stride 1)")
    parser.add_argument("--memory-budget", type=float, metavar="GB",
                        help="refuse a run that would need more memory than this, in GiB (default: half of this "
                        "machine's memory)")


def add_dictionary_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dictionary", action="append", default=[], metavar="DIR",
                        help="attach a sparse dictionary (an SAE or transcoder folder, SAELens's layout): the trace "
                        "gains <step>.dict.pre, .features, .recon and .error after the step it reads (repeatable)")
    parser.add_argument("--clamp", action="append", default=[], metavar="STEP:F=V[@P]",
                        help="set feature F of the dictionary reading STEP to V (at position P, from 0; all "
                        "positions without it): steering, or ablation with 0 (repeatable)")


def run_traced(bundle: ModelBundle, inputs: Inputs, args: argparse.Namespace, others: list = (), **options):
    """bundle.run(inputs, **options) under `others` (interventions) and, when the command line attached any, its
    dictionaries and clamps: (output, trace)."""
    folders, clamp_specs = getattr(args, "dictionary", None) or [], getattr(args, "clamp", None) or []
    if clamp_specs and not folders:
        raise UserError("--clamp sets a dictionary's feature: attach the dictionary with --dictionary DIR.")
    if not folders:
        from ..patching.interventions import intervene

        with intervene(bundle.model, list(others)):
            return bundle.run(inputs, **options)
    from ..features.attach import open_dictionaries, parse_clamp, traced

    return traced(bundle, inputs, open_dictionaries(folders), [parse_clamp(c) for c in clamp_specs], list(others),
                  **options)  # fmt: skip


def memory_budget(args: argparse.Namespace) -> int:
    """--memory-budget in bytes (the default: half the machine's memory)."""
    if args.memory_budget is None:
        return default_budget()
    if not args.memory_budget > 0:
        raise UserError(f"--memory-budget must be a positive number of GB, not {args.memory_budget}.")
    return int(args.memory_budget * 2**30)


def open_model(args: argparse.Namespace) -> ModelBundle:
    return load_model(args.model or default_model_name(), args.device,
                      precision=getattr(args, "precision", "float32"))


def read_inputs(bundle: ModelBundle, args: argparse.Namespace, continuation: Continuation | None = None) -> Inputs:
    """--source / --text-file (optionally windowed by --seq-len/--batch) → Inputs. `continuation`: how a
    decoder-only model continues the text when no --target or --start-only is given (None: it reads the text)."""
    if args.source is not None and args.text_file:
        raise UserError("Give either --source or --text-file, not both.")
    if args.text_file:
        text = read_text_file(args.text_file)
        if args.seq_len or args.batch:
            if not (args.seq_len and args.batch):
                raise UserError("--seq-len and --batch go together.")
            return bundle.prepare_windows(text, args.seq_len, args.batch)
        return bundle.prepare_run(text, args.target, args.start_only, continuation=continuation)
    if args.seq_len or args.batch:
        raise UserError("--seq-len and --batch need --text-file.")
    if args.source is None:
        raise UserError("Give a sentence with --source or a file with --text-file.")
    if args.start_only and args.target:
        raise UserError("--start-only and --target exclude each other: a typed target is the decoder input.")
    return bundle.prepare_run(args.source, args.target, args.start_only, continuation=continuation)


def traced_run(args: argparse.Namespace):
    """(bundle, inputs, trace, batch item from 0) for the command line's model, input and --item; the input's notes
    go to stderr. The export command and the analyses all start from it."""
    bundle = open_model(args)
    inputs = read_inputs(bundle, args)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    _, trace = run_traced(bundle, inputs, args, keep_output=False, budget=memory_budget(args))
    n_items = len(trace.source_tokens or trace.target_tokens) or 1
    if not 1 <= args.item <= n_items:
        raise UserError(f"--item {args.item} is out of range; this run has {n_items} batch item(s).")
    return bundle, inputs, trace, args.item - 1


def print_result(as_json: bool, payload: dict, report) -> int:
    """What every analysis command prints: `payload` as one line of JSON with --json, else `report()`, the text
    table (made only when it is printed). Returns the exit status, 0."""
    if as_json:
        json.dump(payload, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(report())
    return 0
