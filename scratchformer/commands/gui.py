"""`scratchformer gui` (and `scratchformer` alone): open the window. The Qt code lives in app/."""

from __future__ import annotations

import argparse

from .. import frontends


def add_parser(sub) -> None:
    p = sub.add_parser("gui", help="open the window (the default)")
    p.add_argument("--model", help="preset, bundled model or model folder")
    p.add_argument("--device", default=None, help="cpu or cuda")
    p.add_argument("--source", help="source sentence")
    p.add_argument("--target", help="target sentence (teacher forcing)")
    p.add_argument("--step", help="step name or index to show, e.g. decoder.0.cross_attn.weights")
    p.add_argument("--view", help="the view to open, by its tab's title, e.g. 'Q·K neuron view' or 'Weighted sum'")
    p.add_argument("--derive", metavar="I,J,…", help="with --step and --screenshot: show how this cell of the step "
                   "was made (one 0-based index per axis, e.g. 0,2,3,1)")
    p.add_argument("--lesson", metavar="ID|FILE", help="open a lesson (`scratchformer lesson list`) or a lesson file")
    p.add_argument("--page", type=int, default=None, help="with --lesson: the page to open (from 1)")
    p.add_argument("--dictionary", action="append", metavar="DIR", help="attach a sparse dictionary (a folder in "
                   "SAELens's layout) to the run: its features become steps, and the Features view reads them; "
                   "repeatable")
    p.add_argument("--screenshot", metavar="FILE", help="render the window at --step to a PNG and exit")


def run(args: argparse.Namespace) -> int:
    # The GUI is a front end of the core, not part of it: found through its entry point (scratchformer/frontends.py)
    # only when the window is asked for.
    return frontends.load("gui", "The window")(args)
