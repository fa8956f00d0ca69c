"""`scratchformer export`: write attention plots and tensors to a folder with no display.

Goes through the same plan and writer as the window (scratchformer.exporting); PNG/SVG/PDF are drawn by the front
end's Qt renderer on an offscreen surface, found through an entry point (scratchformer/frontends.py) only when an
image format is asked for, so npz and csv export need no Qt at all and the core never imports the GUI.

With --snapshots it follows one attention map over a trained model's snapshots instead
(exporting/snapshots.py): an animation (gif, apng) and a grid of small multiples (png, svg, pdf).

With --format html it writes one self-contained interactive page of the whole run (scratchformer.page), PAGE_NAME
in --out. The page builder uses the analyses (derivations, lens), which sit above the commands, so it is imported
by name when asked for, as cli.py imports the analyses' commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import frontends
from ..errors import UserError
from ..explain import explainer
from ..exporting.files import prepare_folder
from ..exporting.job import FORMATS, IMAGE_FORMATS, ExportRun, parse_formats, plan_export
from ..exporting.snapshots import ATTENTION_NAMES
from ..loading.bundle import default_model_name
from ..running.batching import read_text_file
from .common import add_dictionary_args, add_input_args, add_model_args, traced_run


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write attention plots (png, svg, pdf) and tensors (npz, csv) to a folder",
        description="Run a sentence through the model and write its attention maps or steps to --out, "
        "with an index (index.csv, index.json) of every file written.",
    )
    add_model_args(p)
    add_input_args(p)
    add_dictionary_args(p)
    p.add_argument("--cards-corpus", metavar="C", help="with --dictionary and --format html: the corpus the page's "
                   "feature cards are made from (default: a bundled task's model reads its task)")
    p.add_argument("--graph", action="store_true", help="with --format html: the page also carries the attribution "
                   "graph of the run's prediction (as `scratchformer graph` builds it), to hover and prune")
    p.add_argument("--transcoders", metavar="DIR", help="with --graph: the transcoder set (default: the set a bundled "
                   "model ships)")
    p.add_argument("--live", action="store_true", help="with --format html: the page carries the model's weights and "
                   "reruns it in the browser on the sentence you type (for a model it cannot run: one sentence why, "
                   "and the recorded page)")
    p.add_argument("--out", required=True, help="folder to write into (created if its parent exists)")
    p.add_argument("--format", help=f"comma-separated, from {','.join(FORMATS)} (default png); or html alone: one "
                   f"self-contained interactive page of every step ({PAGE_NAME}); with --snapshots from "
                   "gif,apng,png,svg,pdf (default gif,png)")
    p.add_argument(
        "--steps", nargs="+", default=None, metavar="STEPS",
        help="attention (every layer × head × attention type, one file each), all (every step), "
        "or step names / shell patterns such as 'decoder.*.cross_attn.weights'",
    )  # fmt: skip
    p.add_argument("--item", type=int, default=1, help="batch item to draw, counted from 1 (default 1)")
    p.add_argument("--scale", type=float, default=2.0, help="PNG (and GIF/APNG) pixels per point (default 2 = 144 dpi)")
    p.add_argument("--overwrite", action="store_true", help="replace files that already exist")
    g = p.add_argument_group("training snapshots", "follow one attention map over a trained model's snapshots")
    g.add_argument("--snapshots", action="store_true",
                   help="write the map of every snapshot and the final model as an animation (gif, apng) and a "
                   "grid of small multiples (png, svg, pdf)")
    g.add_argument("--attention", choices=list(ATTENTION_NAMES),
                   help="which attention to follow (default cross, else the model's last kind)")
    g.add_argument("--layer", type=int, help="layer, counted from 1 (default the last)")
    g.add_argument("--head", type=int, help="head, counted from 1 (default the most aligned head of the last "
                   "snapshot: the guided one if the model was trained with guided alignment)")


PAGE_NAME = "page.html"


def run(args: argparse.Namespace) -> int:
    if not 0.25 <= args.scale <= 8:
        raise UserError("--scale must be between 0.25 and 8.")
    if args.snapshots:
        return run_snapshots(args)
    for name in ("attention", "layer", "head"):
        if getattr(args, name) is not None:
            raise UserError(f"--{name} chooses the map that --snapshots follows; add --snapshots or leave it out.")
    if args.format and "html" in args.format.lower().replace(",", " ").split():
        return run_page(args)
    if args.graph or args.transcoders:
        raise UserError("--graph and --transcoders put an attribution graph into the page: add --format html.")
    if args.live:
        raise UserError("--live makes the interactive page rerun the model: add --format html.")
    formats = parse_formats(args.format or "png")
    args.steps = args.steps or ["attention"]
    folder = prepare_folder(args.out, create=True)
    bundle, _, trace, item = traced_run(args)
    names = bundle.tgt_tokenizer.token_strings
    explain = explainer(trace, bundle.config, item, names)  # the index explains every file
    tasks = plan_export(trace, folder, formats, args.steps, item, names, explain)
    renderer = None
    if any(f in IMAGE_FORMATS for f in formats):
        renderer = frontends.load("renderer", "Drawing PNG, SVG and PDF")(args.scale)  # Qt only for images
    result = ExportRun(tasks, folder, renderer, overwrite=args.overwrite).run()
    print(result.summary())
    print(folder.resolve())
    return 0


def run_page(args: argparse.Namespace) -> int:
    """`export --format html`: the interactive page of the whole run, one file in --out."""
    if args.format.lower().replace(",", " ").split() != ["html"]:
        raise UserError("--format html writes one page on its own; export the other formats in a second run.")
    if args.steps is not None:
        raise UserError("The page holds every step; leave out --steps with --format html.")
    page = importlib.import_module("scratchformer.page")  # see the module's docstring: above the commands
    folder = prepare_folder(args.out, create=True)
    target = folder / PAGE_NAME
    if target.exists() and not args.overwrite:
        raise UserError(f"{target} already exists; add --overwrite to replace it or choose another folder.")
    bundle, inputs, trace, item = traced_run(args)
    run_args = page.run_arguments(args.model or default_model_name(), args.source, args.target, args.start_only,
                                  args.text_file, args.seq_len, args.batch)  # fmt: skip
    live = _live(page, bundle, trace, args)
    data = page.page_data(bundle, trace, inputs, item=item, run_args=run_args, cards=_cards(bundle, trace, args),
                          graph=_graph(page, bundle, inputs, args), live=live)  # fmt: skip
    size = page.write_page(target, data, overwrite=args.overwrite)
    what = "the live page, which reruns the model as you type," if live else "the interactive page"
    print(f"Wrote {target} ({size / 1e6:.1f} MB): {what} of {len(trace)} steps; open it in a browser.")
    return 0


def _live(page, bundle, trace, args: argparse.Namespace) -> dict | None:
    """What a live page's boxes open with (--live), or None; for a run the page cannot rerun, the sentence why goes
    to stderr and the recorded page is written as without --live."""
    if not args.live:
        return None
    why = page.live_page_refusal(bundle, trace)
    if why is not None:
        print(f"note: {why} The recorded page is written instead.", file=sys.stderr)
        return None
    source = read_text_file(args.text_file) if args.text_file else args.source
    return page.live_text(args.model or default_model_name(), source or "", args.target or "")


def _graph(page, bundle, inputs, args: argparse.Namespace) -> dict | None:
    """The attribution graph the page draws (--graph) of the run's prediction, made by `page` (scratchformer.page,
    imported as run_page does); None without --graph."""
    if not args.graph:
        if args.transcoders:
            raise UserError("--transcoders chooses the set the page's graph reads: add --graph.")
        return None
    from ..graph import build_graph

    if inputs.tgt is not None and inputs.tgt.shape[0] > 1:
        raise UserError("--graph explains one prediction of one input: give one sentence (no --batch).")
    result = build_graph(bundle, inputs, args.transcoders)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return page.page_graph(result)


def _cards(bundle, trace, args: argparse.Namespace) -> dict | None:
    """The attached dictionaries' card sets over --cards-corpus (a bundled task's model: its task by default), for
    the page to carry; None without dictionaries. Made once per dictionary and corpus, then read from the cache."""
    if not trace.dictionaries:
        if args.cards_corpus:
            raise UserError("--cards-corpus reads the cards of an attached dictionary: add --dictionary DIR.")
        return None
    from ..features.activations import default_corpus
    from ..features.cards import cards_for

    corpus = args.cards_corpus or default_corpus(bundle.name)
    if corpus is None:
        print("note: the page carries no feature cards: name a corpus to make them from with --cards-corpus.",
              file=sys.stderr)  # fmt: skip
        return None
    folders = dict(zip((s for s in trace.dictionaries), getattr(args, "dictionary", []) or []))
    return {step: cards_for(bundle, d, step, corpus, folders.get(step))
            for step, (d, _at, _to) in trace.dictionaries.items()}  # fmt: skip


def run_snapshots(args: argparse.Namespace) -> int:
    """`export --snapshots`: one attention map over training, as an animation and a grid of small multiples."""
    from ..exporting.animation import parse_snapshot_formats, plan_snapshot_export
    from ..exporting.snapshots import attention_choice, snapshot_series

    formats = parse_snapshot_formats(args.format or "gif,png")
    if args.steps is not None:
        raise UserError("--steps does not apply to --snapshots; choose the map with --attention, --layer and --head.")
    if args.seq_len or args.batch or args.item != 1:
        raise UserError("--snapshots follows one sentence; leave out --seq-len, --batch and --item.")
    for name in ("layer", "head"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UserError(f"--{name} counts from 1, as the window shows it; {value} is not a {name}.")
    if args.source is not None and args.text_file:
        raise UserError("Give either --source or --text-file, not both.")
    if args.start_only and args.target:
        raise UserError("--start-only and --target exclude each other: a typed target is the decoder input.")
    source = read_text_file(args.text_file) if args.text_file else args.source
    if source is None:
        raise UserError("Give a sentence with --source or a file with --text-file.")
    folder = prepare_folder(args.out, create=True)
    series = snapshot_series(
        args.model or default_model_name(), source, args.target, attention_choice(args.attention),
        None if args.layer is None else args.layer - 1, None if args.head is None else args.head - 1,
        start_only=args.start_only, device=args.device,
    )  # fmt: skip
    frames = frontends.load("frames", "Drawing animations")(args.scale)  # Qt draws the frames and the grid
    tasks = plan_snapshot_export(series, folder, formats, frames)
    result = ExportRun(tasks, folder, frontends.load("renderer", "Drawing the grid")(args.scale),
                       overwrite=args.overwrite).run()  # fmt: skip
    print(f"{series.title}: {len(series.frames)} frames (steps {', '.join(str(f.step) for f in series.frames)}).")
    print(result.summary())
    print(folder.resolve())
    return 0
