"""Analyses of a run: each is one module here with `compute(...)` (a small result dataclass), its plot data and
explanation, and its command line (`add_parser(subparsers)`, `run(args)`).

ANALYSES is the one registry both the command line (scratchformer.cli) and the window read: a new analysis is
one module here, one view in app/, and one line below.
"""

from __future__ import annotations

# command name → module (imported only when used, so `scratchformer --help` stays quick)
ANALYSES: dict[str, str] = {
    "derive": "scratchformer.analyses.derive",
    "lens": "scratchformer.analyses.lens",
    "rollout": "scratchformer.analyses.rollout",
    "attribute": "scratchformer.analyses.attribute",
    "sweep": "scratchformer.analyses.sweep",
    "diff": "scratchformer.analyses.diff",
    "trajectory": "scratchformer.analyses.trajectory",
    "head_metrics": "scratchformer.analyses.head_metrics",  # the command is head-metrics
    "experiment": "scratchformer.experiments.command",  # the live experiments (scratchformer.experiments)
    "lesson": "scratchformer.lessons.command",  # the guided lessons: lesson list | check (scratchformer.lessons)
}
