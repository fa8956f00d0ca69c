"""Before training: the model's parameter count and an estimate of the run's time on this machine.

`estimate_run` builds the model the run would build (same data, same config, no training) and counts its
parameters, then times a few real training steps, one validation pass over a slice of the validation split and a
few greedy decodes, and scales them to the run: planned steps × seconds per step + validations + process start.
It is an estimate: the first steps of a real run are not its typical ones, and other programs share the CPU.
estimate_job runs it off the UI thread; the loaded data are cached (the dialog asks again on every change).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from scratchformer.training import Trainer, TrainOptions, build_config, load_data
from scratchformer.transformer.model import Transformer
from scratchformer.transformer.parameters import parameter_counts

PROCESS_START_S = 4.0  # starting Python, importing torch and building the data in the training process
WARM_UP_STEPS = 2
TIMED_STEPS = 8  # at most; fewer when they take more than TIMING_BUDGET_S (the median step counts)
TIMING_BUDGET_S = 2.0
VALID_SAMPLE = 32  # validation examples timed, scaled to the whole split
GREEDY_SAMPLE = 8  # greedy decodes timed, scaled to the decodes of each epoch's exact-match check


@dataclass
class Estimate:
    parameters: int  # sum(p.numel() for p in model.parameters()): tied weights once
    planned_steps: int
    seconds: float | None = None  # None until the steps are timed

    def describe(self) -> str:
        text = f"{self.parameters:,} parameters · {self.planned_steps:,} steps"
        if self.seconds is not None:
            text += f" · about {format_duration(self.seconds)} on this machine (estimated from timing a few steps)"
        return text


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


_DATA: dict[tuple, object] = {}  # (task, data, text, seq_len, seed, file stamp) → TrainData, the last two
_DATA_LOCK = threading.Lock()


def _data(opts: TrainOptions):
    path = opts.data or opts.text
    stamp = None
    if path and Path(path).is_file():
        st = Path(path).stat()
        stamp = (st.st_mtime_ns, st.st_size)
    key = (opts.task, opts.data, opts.text, opts.seq_len, opts.seed, stamp)
    with _DATA_LOCK:
        if key in _DATA:
            return _DATA[key]
    data = load_data(opts)  # UserError with one sentence for a bad file
    with _DATA_LOCK:
        while len(_DATA) >= 2:
            _DATA.pop(next(iter(_DATA)))
        _DATA[key] = data
    return data


def build_model(opts: TrainOptions) -> tuple[Transformer, object]:
    """The untrained model a run with `opts` starts from (global random state untouched), and its data."""
    data = _data(opts)
    config = build_config(opts, data)  # UserError if the sizes do not fit (d_model not divisible by heads, …)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(opts.seed)
        model = Transformer(config)
    return model, data


def count_run(opts: TrainOptions) -> tuple[Estimate, Trainer]:
    model, data = build_model(opts)
    trainer = Trainer(model, data, opts, torch.device("cpu"))
    return Estimate(parameter_counts(model)["total"].count, trainer.planned_steps), trainer


def time_run(estimate: Estimate, trainer: Trainer, is_stale=lambda: False) -> Estimate:
    """Time a few training steps and validation on this machine and scale them to the planned run."""
    opts, data = trainer.opts, trainer.data
    batches = trainer.epoch_batches(0)
    with torch.random.fork_rng(devices=[]):
        for batch in batches[:WARM_UP_STEPS]:  # the first steps pay for allocations and are slow: not timed
            trainer.global_step(batch)
        times: list[float] = []
        budget = time.perf_counter() + TIMING_BUDGET_S
        for batch in batches[WARM_UP_STEPS : WARM_UP_STEPS + TIMED_STEPS] or batches[:1]:
            if is_stale():
                return estimate
            start = time.perf_counter()
            trainer.global_step(batch)
            times.append(time.perf_counter() - start)
            if start > budget:
                break
        per_step = statistics.median(times)
        sample = data.valid[:VALID_SAMPLE]
        start = time.perf_counter()
        trainer.validate(sample)
        per_validation = (time.perf_counter() - start) * len(data.valid) / max(1, len(sample))
        per_check = 0.0
        greedy = min(opts.valid_greedy, len(data.valid)) if not data.decoder_only else 0
        if greedy:
            start = time.perf_counter()
            trainer.exact_match(data.valid[:GREEDY_SAMPLE])
            per_check = (time.perf_counter() - start) * greedy / min(GREEDY_SAMPLE, len(data.valid))
    steps = estimate.planned_steps
    epochs = min(opts.epochs, math.ceil(steps / max(1, len(batches))))
    validations = epochs + min(opts.snapshots, steps)
    seconds = PROCESS_START_S + steps * per_step + validations * per_validation + (epochs + 1) * per_check
    return Estimate(estimate.parameters, steps, seconds)


def estimate_job(opts: TrainOptions, job) -> Estimate | None:
    """count_run then time_run, as the work of a job (app/work/jobs.py): the count goes out first as the job's
    progress, so the dialog shows it while the steps are timed; None once newer choices cancelled the job."""
    estimate, trainer = count_run(opts)
    job.progress(estimate)
    if job.cancelled():
        return None
    return time_run(estimate, trainer, job.cancelled)
