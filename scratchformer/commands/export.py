"""`scratchformer export`: write attention plots and tensors to a folder with no display.

Goes through the same plan and writer as the window (scratchformer.exporting); PNG/SVG/PDF are drawn by
app/export/render.py on an offscreen Qt surface, imported only when an image format is asked for, so npz and
csv export need no Qt at all.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import UserError
from ..explain import explainer
from ..exporting.files import prepare_folder
from ..exporting.job import FORMATS, IMAGE_FORMATS, ExportRun, parse_formats, plan_export
from .common import add_input_args, add_model_args, open_model, read_inputs


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write attention plots (png, svg, pdf) and tensors (npz, csv) to a folder",
        description="Run a sentence through the model and write its attention maps or steps to --out, "
        "with an index (index.csv, index.json) of every file written.",
    )
    add_model_args(p)
    add_input_args(p)
    p.add_argument("--out", required=True, help="folder to write into (created if its parent exists)")
    p.add_argument("--format", default="png", help=f"comma-separated, from {','.join(FORMATS)} (default png)")
    p.add_argument(
        "--steps", nargs="+", default=["attention"], metavar="STEPS",
        help="attention (every layer × head × attention type, one file each), all (every step), "
        "or step names / shell patterns such as 'decoder.*.cross_attn.weights'",
    )  # fmt: skip
    p.add_argument("--item", type=int, default=1, help="batch item to draw, counted from 1 (default 1)")
    p.add_argument("--scale", type=float, default=2.0, help="PNG pixels per point (default 2 = 144 dpi)")
    p.add_argument("--overwrite", action="store_true", help="replace files that already exist")


def run(args: argparse.Namespace) -> int:
    formats = parse_formats(args.format)
    if not 0.25 <= args.scale <= 8:
        raise UserError("--scale must be between 0.25 and 8.")
    folder = prepare_folder(args.out, create=True)
    bundle = open_model(args)
    inputs = read_inputs(bundle, args)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    _, trace = bundle.run(inputs)
    n_items = len(trace.source_tokens or trace.target_tokens) or 1
    if not 1 <= args.item <= n_items:
        raise UserError(f"--item {args.item} is out of range; this run has {n_items} batch item(s).")
    names = bundle.tgt_tokenizer.token_strings
    explain = explainer(trace, bundle.config, args.item - 1, names)  # the index explains every file
    tasks = plan_export(trace, folder, formats, args.steps, args.item - 1, names, explain)
    renderer = None
    if any(f in IMAGE_FORMATS for f in formats):
        from app.export.render import ensure_gui_app  # Qt only for image formats
        from app.export.render import renderer as qt_renderer

        ensure_gui_app()
        renderer = qt_renderer(args.scale)
    result = ExportRun(tasks, folder, renderer, overwrite=args.overwrite).run()
    print(result.summary())
    print(folder.resolve())
    return 0
