"""The Patching view's work off the UI thread (each function is a job's work, app/work/jobs.py), and what a finished
sweep keeps: the two runs (scratchformer.patching.pair.Pair) that a cell's patched run is replayed from."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from scratchformer.analyses.sweep import Sweep, corrupted_text, sweep_pair
from scratchformer.patching.components import attention_modules
from scratchformer.patching.interventions import Patch
from scratchformer.patching.pair import Pair, make_pair
from scratchformer.patching.paths import parse_head, pass_a, path_sweep, possible
from scratchformer.patching.replay import cell_patch, logits_step, metric_from_logits

from .patching_controls import SweepAsk

# what the core's sentences call the metric's inputs: the window's fields, not the command line's options
FIELD_NAMES = {"answer": "The answer token", "wrong": "The wrong token", "logprob": "the log-probability",
               "tokens": "another answer and wrong token"}  # fmt: skip


@dataclass
class PathSweep:
    """Path patching from the chosen sender into every head's q, k or v (scratchformer.patching.paths)."""

    sender: str  # 'decoder.0.self_attn.head1'
    part: str  # 'q', 'k' or 'v'
    receivers: list  # Component per receiver input
    effects: torch.Tensor  # (receivers,)
    readable: list[bool]  # whether each receiver can read the sender at all

    def csv_rows(self) -> tuple:
        return self.sender, self.receivers, self.effects.tolist(), self.readable


def path_sweep_of(pair: Pair, sender: str, part: str, budget: int | None) -> PathSweep:
    """The sender's path into every receiver head (batched: one pass A, then the receivers' patched passes)."""
    model = pair.model
    if part != "q" and all(m.n_kv_heads != m.n_heads for m in attention_modules(model).values()):
        return PathSweep(sender, part, [], torch.zeros(0), [])  # every k and v is shared: no head's alone
    receivers, effects = path_sweep(pair, sender, part, budget)
    att, _ = parse_head(sender, model)
    readable = [possible(model, att, (c.attention, c.head, part)) for c in receivers]
    return PathSweep(sender, part, receivers, effects, readable)


def path_cell_patch(pair: Pair, sender: str, cell: dict) -> Patch:
    """One cell of the path map as a whole run (the work of a job): path patching's pass B — the corrupted run with
    only the receiver head's q, k or v taken from pass A, where the sender alone wrote its clean output."""
    att, head = parse_head(sender, pair.model)
    _, kept = pass_a(pair, att, head, [cell["step"]])
    return cell_patch(pair, cell, f"pass A of the path from {sender} (its write alone)", source=kept)


@dataclass
class Made:
    """A finished sweep and what it was made from (the window replays its cells from `pair`)."""

    ask: SweepAsk
    like: object  # the clean run's RunRequest: its model, device and precision
    pair: Pair
    sweep: Sweep
    clean: object  # scratchformer.loading.model_bundle.Inputs
    corrupt: object
    text: str  # the corrupted sentence
    seconds: float
    paths: PathSweep | None = None  # with a sender chosen: its path into every head
    pairs: int = 0  # a pairs file's sweep: how many pairs the maps average (the cells replay the first pair)
    pairs_file: str = ""


@dataclass
class Replay:
    """A cell's patched run, asked of the window: its inputs (to recognise the run), the cell and its number."""

    inputs: object
    cell: dict
    value: float
    which: str  # the map's numbers: "exact" or "attribution"
    made: Made
    measured: tuple[float, float] | None = None  # (m, effect) read from the patched run's logits


def make_sweep(bundle, ask: SweepAsk, like, budget: int | None, job) -> Made | None:
    """The sweep (the work of a job): both runs, the metric, the grid; None once cancelled."""
    t0 = time.perf_counter()
    text = corrupted_text(ask.source, ask.corrupt_source, ask.corrupt_word)
    clean = bundle.prepare_run(ask.source, ask.target, ask.start_only)  # the text as it is, never continued
    corrupt = bundle.prepare(text, ask.target)
    pair = make_pair(bundle, clean, corrupt, ask.answer, ask.wrong, ask.metric, FIELD_NAMES)
    sweep = sweep_pair(pair, ask.method, ask.per_position, ask.path, budget=budget, progress=job.progress,
                       cancelled=job.cancelled)  # fmt: skip
    paths = None
    if sweep is not None and ask.path is not None and not job.cancelled():
        paths = path_sweep_of(pair, ask.path[0], ask.path_part, budget)
    if sweep is None or job.cancelled():
        return None
    return Made(ask, like, pair, sweep, clean, corrupt, text, time.perf_counter() - t0, paths)


def make_pairs_sweep(bundle, path: str, ask: SweepAsk, like, budget: int | None, job) -> Made | None:
    """The sweep of every pair of a pairs file (scratchformer.analyses.sweep_pairs, the work of a job): the maps are
    the means over the pairs, and the first pair's runs are kept so that a click replays its cell; None once
    cancelled. The form's metric, method and grid apply; a pair's own answer and wrong tokens win over the form's."""
    from scratchformer.analyses.sweep_pairs import sweep_pairs
    from scratchformer.datasets.pairs import read_pairs

    t0 = time.perf_counter()
    specs = read_pairs(path)
    done = sweep_pairs(bundle, specs, ask.metric, ask.method, ask.per_position, ask.start_only, budget,
                       progress=job.progress, cancelled=job.cancelled, answer=ask.answer, wrong=ask.wrong)  # fmt: skip
    if done is None or job.cancelled():
        return None
    first = specs[0]
    clean = bundle.prepare_run(first.source, first.target or "", ask.start_only)
    corrupt = bundle.prepare(first.corrupt, first.target or "")
    pair = make_pair(bundle, clean, corrupt, first.answer or ask.answer, first.wrong or ask.wrong, ask.metric,
                     FIELD_NAMES)  # fmt: skip
    first_ask = replace(ask, source=first.source, target=first.target or "", corrupt_source=first.corrupt,
                        corrupt_word=None, path=None)  # fmt: skip
    return Made(first_ask, like, pair, done.mean, clean, corrupt, first.corrupt, time.perf_counter() - t0,
                pairs=done.n, pairs_file=str(path))  # fmt: skip


def replayed_metric(result, metric) -> float:
    """m of a finished run, read from its own logits at the last decoder position (the work of a job: a lazy
    trace may rerun the output layer)."""
    trace = result.trace
    return metric_from_logits(metric, trace[logits_step(trace)].tensor[0, -1])
