"""`scratchformer features`: sparse dictionaries (SAEs and transcoders) of a model's activations.

    scratchformer features train --model en-hi --at decoder.1.add_norm3.out --corpus task:en-hi --out DIR
    scratchformer features train --model en-hi --kind transcoder --every-layer --corpus task:en-hi --out DIR
    scratchformer features info DIR
    scratchformer features card --model en-hi --dictionary DIR --corpus task:en-hi --feature 12 --out card.svg

Under torchrun (`torchrun --nproc-per-node N -m scratchformer features train …`) each rank reads its share of the
corpus and rank 0 writes the folder and prints.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError

SUMMARY_KEYS = ("fvu", "l0", "dead", "ce_recovered", "tokens", "seconds")


def add_parser(sub) -> None:
    from .common import add_model_args

    p = sub.add_parser("features", help="train and inspect sparse dictionaries (SAEs, transcoders) of a model's steps",
                       description="Sparse dictionaries of a model's activations: train one (train) or describe a "
                       "folder (info). Folders use SAELens's layout (cfg.json + sae_weights.safetensors).")
    what = p.add_subparsers(dest="features_command", metavar="ACTION")
    t = what.add_parser("train", help="train an SAE on a step, or a transcoder from one step to another")
    add_model_args(t)
    t.add_argument("--at", metavar="STEP", help="the step whose activations are read (e.g. decoder.1.add_norm3.out)")
    t.add_argument("--to", metavar="STEP", help="a transcoder's target step (e.g. decoder.1.ffn.out)")
    t.add_argument("--kind", choices=("sae", "transcoder"), default="sae")
    t.add_argument("--every-layer", action="store_true",
                   help="with --kind transcoder: one transcoder per feed-forward (its input → its output), each in "
                   "OUT/<feed-forward step>/: a transcoder set")
    t.add_argument("--corpus", required=True, metavar="C",
                   help="a text file (one input a line), JSONL/CSV with a source field, or task:NAME (a bundled task)")
    t.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    t.add_argument("--architecture", choices=("topk", "batchtopk", "jumprelu", "standard"),
                   help="topk (an SAE's default), batchtopk (a transcoder's), or standard (ReLU + L1)")
    t.add_argument("--width", type=int, default=512, help="number of features (default 512)")
    t.add_argument("--k", type=int, default=8, help="active features per token (default 8)")
    t.add_argument("--tokens", type=int, default=200_000, help="activations read at most (default 200000)")
    t.add_argument("--epochs", type=float, default=8.0, help="passes over the activations (default 8)")
    t.add_argument("--steps", type=int, help="training steps (default: from --epochs)")
    t.add_argument("--lr", type=float, help="Adam's learning rate (default 2e-4·√(16384/width))")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, help="CPU threads (default: half the cores, at least 1: on a busy "
                   "two-core machine a second thread slows the small matrix products down)")
    t.add_argument("--memory-budget", type=float, metavar="GB", help="memory the model's batches may take")
    t.add_argument("--json", action="store_true", help='print {"fvu", "l0", "dead", "ce_recovered", "tokens", '
                   '"seconds"} as JSON')
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    c = what.add_parser("card", help="draw one feature's card (top contexts, histogram, pushed tokens) as PNG/SVG/PDF")
    add_model_args(c)
    c.add_argument("--dictionary", required=True, metavar="DIR", help="the dictionary's folder")
    c.add_argument("--corpus", required=True, metavar="C", help="the inputs the card reads (as for train)")
    c.add_argument("--feature", required=True, type=int, metavar="N", help="the feature, counted from 0")
    c.add_argument("--out", required=True, metavar="FILE", help="card.png, card.svg or card.pdf")
    c.add_argument("--inputs", type=int, default=1000, help="inputs of the corpus read at most (default 1000)")
    i = what.add_parser("info", help="describe a dictionary folder")
    i.add_argument("folder", metavar="DIR")
    i.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.features_command == "info":
        return _info(args)
    if args.features_command == "card":
        return _card(args)
    if args.features_command != "train":
        raise UserError("Say what to do: scratchformer features train … or scratchformer features info DIR.")
    return _train(args)


def _info(args) -> int:
    from ..features.folder import load

    d = load(args.folder)
    payload = {"describe": d.describe(), "kind": d.info.kind, "architecture": d.architecture, "d_in": d.d_in,
               "d_sae": d.d_sae, "d_out": d.d_out, "k": d.k, "at": d.info.at, "to": d.info.to, "model": d.info.model,
               "trained": d.info.trained}  # fmt: skip
    if args.json:
        print(json.dumps(payload, ensure_ascii=False))
    else:
        print(d.describe())
        for key, value in d.info.trained.items():
            print(f"  {key}: {value}")
    return 0


def _card(args) -> int:
    """Every feature's card over the corpus (cached beside the dictionary), then feature N's drawn to --out."""
    from pathlib import Path

    from .. import frontends
    from ..features.cards import cards_for
    from ..features.folder import hook_step, load
    from ..features.points import readable_steps
    from ..plotdata.feature_cards import card_plot
    from .common import open_model

    if Path(args.out).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UserError(f"--out {args.out}: name a .png, .svg or .pdf file.")
    if args.inputs < 1:
        raise UserError(f"--inputs must be 1 or more, not {args.inputs}.")
    d = load(args.dictionary)
    bundle = open_model(args)
    step = hook_step(bundle.model, d.info.at, readable_steps(bundle.model))
    if not 0 <= args.feature < d.d_sae:
        raise UserError(f"--feature {args.feature}: the dictionary has features 0 to {d.d_sae - 1}.")
    if d.d_in != bundle.config.d_model:
        raise UserError(f"The dictionary reads vectors of {d.d_in} numbers, but {step} holds {bundle.config.d_model} "
                        "per token in this model: it was trained on another model.")  # fmt: skip
    cards = cards_for(bundle, d, step, args.corpus, args.dictionary, args.inputs)
    write = frontends.load("card", "Drawing a feature card")(2.0)  # Qt draws it (app/export/card_render.py)
    print(f"wrote {write(card_plot(cards, args.feature), args.out)}")
    return 0


def _bar(enabled: bool):
    """progress(what, done, total) drawing a tqdm bar per phase on stderr (nothing when disabled)."""
    if not enabled:
        return None
    from tqdm import tqdm

    bars: dict[str, tqdm] = {}

    def progress(what: str, done: int, total: int) -> None:
        bar = bars.get(what)
        if bar is None:
            bar = bars[what] = tqdm(total=total, desc=what, file=sys.stderr, leave=False, dynamic_ncols=True)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return progress


def _train(args) -> int:
    from pathlib import Path

    from ..features.activations import corpus_texts
    from ..features.build import Request, train_dictionary, transcoder_requests
    from ..features.training import TrainSettings
    from ..training.distributed import session
    from .common import memory_budget, open_model

    if args.every_layer and args.kind != "transcoder":
        raise UserError("--every-layer trains transcoders: add --kind transcoder.")
    if args.every_layer and (args.at or args.to):
        raise UserError("--every-layer picks each feed-forward's input and output itself: leave out --at and --to.")
    if not args.every_layer and not args.at:
        raise UserError("Name the step to read with --at (e.g. decoder.1.add_norm3.out); `scratchformer trace "
                        "--list-steps` shows them.")  # fmt: skip
    if args.tokens is not None and args.tokens < 1:
        raise UserError(f"--tokens must be 1 or more, not {args.tokens}.")
    budget = memory_budget(args)
    import os

    import torch

    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be 1 or more, not {args.threads}.")
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 2) // 2))
    with session(args.device) as dist:
        bundle = open_model(args)
        texts = corpus_texts(args.corpus)
        settings = TrainSettings(epochs=args.epochs, steps=args.steps, lr=args.lr, seed=args.seed)
        progress = _bar(dist.is_main and not args.quiet and not args.json and sys.stderr.isatty())
        if args.every_layer:
            requests = transcoder_requests(bundle, args.width, args.k, args.tokens, args.architecture)
            outs = [Path(args.out) / r.to for r in requests]
        else:
            requests = [Request(args.at, args.to, args.kind, args.architecture, args.width, args.k, args.tokens)]
            outs = [Path(args.out)]
        results = {}
        for req, out in zip(requests, outs):
            try:
                figures = train_dictionary(bundle, req, texts, out, TrainSettings(**vars(settings)), budget,
                                           progress, dist=dist)  # fmt: skip
            except KeyboardInterrupt:
                raise UserError(f"interrupted; {out} holds the last checkpoint.") from None
            results[req.to if args.every_layer else req.at] = figures
        if not dist.is_main:
            return 0
    if args.every_layer:
        payload = {step: {k: f.get(k) for k in SUMMARY_KEYS} for step, f in results.items()}
        if args.json:
            print(json.dumps(payload))
        else:
            for step, f in payload.items():
                print(_line(step, f))
            print(f"wrote a transcoder set of {len(payload)} to {args.out}")
        return 0
    figures = next(iter(results.values()))
    if args.json:
        print(json.dumps({k: figures.get(k) for k in SUMMARY_KEYS}))
    else:
        print(_line(requests[0].at, figures))
        print(f"wrote {args.out}")
    return 0


def _line(step: str, f: dict) -> str:
    ce = "n/a" if f.get("ce_recovered") is None else f"{f['ce_recovered']:.1%}"
    return (f"{step}: FVU {f['fvu']:.3f}, L0 {f['l0']:.1f}, {f['dead']} dead, CE loss recovered {ce} "
            f"({f['tokens']} tokens, {f['seconds']:.1f} s)")  # fmt: skip
