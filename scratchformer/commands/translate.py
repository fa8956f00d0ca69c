"""`scratchformer translate`: greedy or beam-search decoding of one sentence with the KV cache."""

from __future__ import annotations

import argparse
import sys

from ..bundle import default_model_name, load_model
from ..decoding import beam_search, greedy
from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("translate", help="translate (generate from) one sentence with a trained model")
    p.add_argument("--model", default=None, help="bundled model, preset or model folder (default: the bundled en-hi)")
    p.add_argument("--source", required=True, help="the sentence to translate")
    p.add_argument("--beam", type=int, default=1, metavar="K", help="beam size (default 1: greedy search)")
    p.add_argument("--max-len", type=int, default=None, help="most tokens to generate (default: 2 × source + 10)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--tokens", action="store_true", help="also print the generated tokens separated by ' | '")


def run(args: argparse.Namespace) -> int:
    if args.beam < 1:
        raise UserError(f"--beam must be at least 1, not {args.beam}.")
    if args.max_len is not None and args.max_len < 1:
        raise UserError(f"--max-len must be at least 1, not {args.max_len}.")
    bundle = load_model(args.model or default_model_name(), args.device)
    if not bundle.config.has_decoder:
        raise UserError(f"{bundle.name} has no decoder, so it cannot translate; choose a trained model.")
    inputs = bundle.prepare(args.source)
    unknown = bundle.src_tokenizer.unknown_words(args.source.strip())
    if unknown:
        print(f"Unknown words (not in the model's vocabulary): {', '.join(unknown)}", file=sys.stderr)
    src_ids = inputs.src[0].tolist() if inputs.src is not None else []
    max_len = args.max_len or 2 * len(inputs.source_tokens[0]) + 10
    if bundle.config.has_encoder:
        ids = (beam_search(bundle, src_ids, max_len, k=args.beam) if args.beam > 1
               else greedy(bundle, src_ids, max_len))
    else:  # decoder-only: the source is a prompt to continue
        if args.beam > 1:
            raise UserError("--beam works with encoder-decoder models; this one is decoder-only.")
        prompt = inputs.tgt[0, 1:].tolist()
        ids = greedy(bundle, [], max_len, prefix=prompt)
    print(bundle.tgt_tokenizer.decode(ids))
    if args.tokens:
        print(" | ".join(bundle.tgt_tokenizer.token_strings(ids)))
    return 0
