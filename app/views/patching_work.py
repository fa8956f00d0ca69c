"""The Patching view's work off the UI thread (each function is a job's work, app/jobs.py), and what a finished
sweep keeps: the two runs (scratchformer.patching.pair.Pair) that a cell's patched run is replayed from."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from scratchformer.analyses.sweep import Sweep, corrupted_text, sweep_pair
from scratchformer.errors import UserError
from scratchformer.patching.attribution import DISAGREE, check_top_k
from scratchformer.patching.components import component_label
from scratchformer.patching.pair import Pair, make_pair
from scratchformer.patching.replay import logits_step, metric_from_logits

from .patching_controls import SweepAsk

# the core's sentences name its command-line options; the window names its fields (in this order)
OPTIONS = {"other --answer/--wrong tokens": "another answer and wrong token", "--answer": "The answer token",
           "--wrong": "The wrong token", "--metric logprob": "the log-probability"}


@dataclass
class Made:
    """A finished sweep and what it was made from (the window replays its cells from `pair`)."""

    ask: SweepAsk
    like: object  # the clean run's RunRequest: its model, device and precision
    pair: Pair
    sweep: Sweep
    clean: object  # scratchformer.model_bundle.Inputs
    corrupt: object
    text: str  # the corrupted sentence
    seconds: float


@dataclass
class Replay:
    """A cell's patched run, asked of the window: its inputs (to recognise the run), the cell and its number."""

    inputs: object
    cell: dict
    value: float
    which: str  # the map's numbers: "exact" or "attribution"
    made: Made
    measured: tuple[float, float] | None = None  # (m, effect) read from the patched run's logits


def window_words(text: str) -> str:
    """A core sentence written for the command line, reworded for the window's fields."""
    for option, words in OPTIONS.items():
        text = text.replace(option, words)
    return text


def make_sweep(bundle, ask: SweepAsk, like, budget: int | None, job) -> Made | None:
    """The sweep (the work of a job): both runs, the metric, the grid; None once cancelled."""
    t0 = time.perf_counter()
    try:
        text = corrupted_text(ask.source, ask.corrupt_source, ask.corrupt_word)
        clean = bundle.prepare_run(ask.source, ask.target, ask.start_only)  # the text as it is, never continued
        corrupt = bundle.prepare(text, ask.target)
        pair = make_pair(bundle, clean, corrupt, ask.answer, ask.wrong, ask.metric)
        sweep = sweep_pair(pair, ask.method, ask.per_position, ask.path, budget=budget, progress=job.progress,
                           cancelled=job.cancelled)  # fmt: skip
    except UserError as exc:
        raise UserError(window_words(str(exc))) from None
    if sweep is None:
        return None
    return Made(ask, like, pair, sweep, clean, corrupt, text, time.perf_counter() - t0)


def checked_rows(pair: Pair, sweep: Sweep, k: int, budget: int | None) -> list[dict]:
    """Attribution patching's k largest estimates patched for real (the work of a job), as the sweep's `checked`."""
    grids = (sweep.heads, sweep.positions, sweep.mlp)
    every = [c for g in grids for c in g.components]
    estimates = torch.cat([g.estimates for g in grids])
    rows = []
    for i, est, exact in check_top_k(pair, every, estimates, k, budget):
        c = every[i]
        rows.append({"component": component_label(c), "step": c.step, "head": c.head, "position": c.position,
                     "estimate": est, "effect": exact, "disagree": abs(est - exact) > DISAGREE})  # fmt: skip
    return rows


def replayed_metric(result, metric) -> float:
    """m of a finished run, read from its own logits at the last decoder position (the work of a job: a lazy
    trace may rerun the output layer)."""
    trace = result.trace
    return metric_from_logits(metric, trace[logits_step(trace)].tensor[0, -1])
