"""`scratchformer train`: train a model on a built-in task, a TSV of pairs or a text file; resume a run.

Started by torchrun (`torchrun --nproc-per-node=N -m scratchformer train …`), every process runs this command
as one rank of a DistributedDataParallel run; only rank 0 prints and writes.

`--progress-json FILE` is the machine-readable channel the window's Train… dialog reads: one JSON object per line
(see ProgressJson). With it, a single process also treats SIGTERM (CTRL_BREAK on Windows) as "stop and save": it
finishes the update in progress, then saves like --max-steps, so whoever started it can cancel it cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import threading
import time

from ..errors import UserError
from ..training import TrainOptions, resumed_options, session, train
from ..training.trainer import SNAPSHOT_DTYPES, WEIGHTS_DTYPES

DEFAULTS = TrainOptions()


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a model (en-hi, copy, reverse, sort, your own TSV or text file)",
        description="Train the encoder-decoder Transformer with teacher forcing, label smoothing 0.1 and the "
        "paper's Adam warm-up schedule. The best model by validation loss is saved to --out.",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--task", choices=("en-hi", "copy", "reverse", "sort"), help="built-in task (default en-hi)")
    what.add_argument("--data", metavar="FILE.tsv", help="your own source<TAB>target pairs")
    what.add_argument("--text", metavar="FILE.txt", help="a plain text file: next-token prediction (GPT-2 tokens)")
    p.add_argument("--out", help="checkpoint folder to write (default runs/<task>)")
    p.add_argument("--resume", metavar="DIR", help="continue the run saved in DIR (its resume/ state)")
    p.add_argument("--epochs", type=int, help=f"epochs in total (default {DEFAULTS.epochs})")
    p.add_argument("--batch-tokens", type=int,
                   help=f"padded tokens per batch (default {DEFAULTS.batch_tokens}); under torchrun the whole "
                   "batch, which the processes share")
    p.add_argument("--preset", metavar="NAME",
                   help="build the model as this preset (architecture and sizes, with the data's vocabulary) "
                   "instead of from --d-model, --heads, --layers and --d-ff; a decoder-only one (llama-tiny-random) "
                   "reads each pair as one sequence: source <sep> target")
    p.add_argument("--d-model", type=int, help=f"default {DEFAULTS.d_model}")
    p.add_argument("--heads", type=int, help=f"default {DEFAULTS.heads}")
    p.add_argument("--layers", type=int, help=f"layers in each stack (default {DEFAULTS.layers})")
    p.add_argument("--d-ff", type=int, help=f"default {DEFAULTS.d_ff}")
    p.add_argument("--dropout", type=float, help=f"default {DEFAULTS.dropout}")
    p.add_argument("--warmup", type=int, help=f"warm-up steps (default {DEFAULTS.warmup})")
    p.add_argument("--lr-scale", type=float, help="multiplies the paper's learning rate (default 1)")
    p.add_argument("--label-smoothing", type=float, help="default 0.1 (the paper's)")
    p.add_argument("--seq-len", type=int, help=f"--text: window length (default {DEFAULTS.seq_len})")
    p.add_argument("--seed", type=int, help="fixes data order, initial weights and dropout (default 0)")
    p.add_argument("--device", help="cpu or cuda (default cpu)")
    p.add_argument("--threads", type=int, help="CPU threads for torch, per process (default 2)")
    p.add_argument("--precision", choices=("fp32", "bf16"),
                   help="bf16: mixed precision with torch.autocast on CUDA (default fp32)")
    p.add_argument("--dist-timeout", type=float, default=10.0, metavar="MINUTES",
                   help="under torchrun: how long a process waits for the others before giving up (default 10)")
    p.add_argument("--max-minutes", type=float, help="stop (and save) after this many minutes")
    p.add_argument("--max-steps", type=int, help="stop (and save) after this many updates")
    p.add_argument("--no-resume-state", action="store_true",
                   help="do not keep <out>/resume/ (optimizer state); smaller, but cannot be resumed")
    p.add_argument("--align-weight", type=float,
                   help="guided alignment (Garg et al. 2019; not in the paper, off by default): weight of a loss "
                   "that teaches one cross-attention head the gold word alignment")
    p.add_argument("--align-layer", type=int, help="decoder layer of the guided head (default -1, the last)")
    p.add_argument("--align-head", type=int, help="the guided head (default 0)")
    p.add_argument("--name", help="the model's name (default: the task)")
    p.add_argument("--snapshots", type=int, metavar="N",
                   help="also keep the model at N steps spread over the run, denser early where attention forms "
                   "(each step twice the one before, the last at the end), in OUT/snapshots/step-NNNNNN/; open one "
                   "with --model OUT@step-NNNNNN (default 0: none)")
    p.add_argument("--snapshots-until", type=int, metavar="STEP",
                   help="spread the snapshots over the first STEP updates instead of the whole run (the last at "
                   "STEP), where attention forms early in a long run")
    p.add_argument("--snapshot-dtype", choices=tuple(SNAPSHOT_DTYPES),
                   help="the snapshots' stored weights (default float32; float16 halves their size, int8 — one "
                   "scale per row — quarters it; both are read back as float32)")
    p.add_argument("--weights-dtype", choices=tuple(WEIGHTS_DTYPES),
                   help="the trained model's stored weights (default float32; float16 halves the file and is read "
                   "back as float32; the resume state stays float32)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--progress-json", metavar="FILE",
                   help="also write the progress as JSON lines to FILE ('-' for stdout): start, step (at most a few "
                   "a second), epoch, snapshot, done or error; SIGTERM then stops the run and saves (one process)")


_FIELDS = ("task", "data", "text", "out", "epochs", "batch_tokens", "d_model", "heads", "layers", "d_ff",
           "dropout", "warmup", "lr_scale", "label_smoothing", "seq_len", "seed", "device", "threads", "precision",
           "max_minutes", "max_steps", "name", "align_weight", "align_layer", "align_head", "snapshots",
           "snapshots_until", "snapshot_dtype", "weights_dtype", "preset")


def options_from_args(args: argparse.Namespace) -> TrainOptions:
    given = {f: getattr(args, f) for f in _FIELDS}
    if given["snapshots"] is not None and given["snapshots"] < 0:
        raise UserError(f"--snapshots must be 0 or more, not {given['snapshots']}.")
    if given["snapshots_until"] is not None and given["snapshots_until"] < 1:
        raise UserError(f"--snapshots-until must be a step of 1 or more, not {given['snapshots_until']}.")
    if args.no_resume_state:
        given["resume_state"] = False
    if args.resume:
        if any(given[k] is not None for k in ("task", "data", "text")):
            raise UserError("--resume continues the saved run's data; leave out --task, --data and --text.")
        changed = [k for k in ("d_model", "heads", "layers", "d_ff", "seq_len", "preset") if given[k] is not None]
        if changed:
            raise UserError(f"--resume keeps the saved model's shape; leave out --{changed[0].replace('_', '-')}.")
        opts = resumed_options(args.resume, given)
        if args.out is None:
            opts.out = args.resume
        return opts
    shaped = [k for k in ("d_model", "heads", "layers", "d_ff") if given[k] is not None]
    if given["preset"] is not None and shaped:
        flag = shaped[0].replace("_", "-")
        raise UserError(f"--preset {given['preset']} gives the model's shape; leave out --{flag}.")
    if given["data"] or given["text"]:
        given["task"] = None
    elif given["task"] is None:
        given["task"] = "en-hi"
    for key in ("epochs", "batch_tokens", "d_model", "heads", "layers", "d_ff", "warmup", "seq_len", "threads",
                "max_steps"):
        if given[key] is not None and given[key] < 1:
            raise UserError(f"--{key.replace('_', '-')} must be at least 1, not {given[key]}.")
    if given["out"] is None:
        stem = given["task"] or "model"
        given["out"] = f"runs/{stem}"
    opts = TrainOptions(**{k: v for k, v in given.items() if v is not None})
    opts.task = given["task"]  # None with --data or --text (not the default task: the model's name comes from it)
    return opts


class ProgressJson:
    """Writes training events as JSON lines, flushed at once, for a program that follows the run.

    Every line is an object with "event": "start" (planned_steps, epochs, parameters, snapshot_steps, out),
    "step" (step, epoch, loss: the mean training loss since the last step line, tokens_per_second; at most one
    every `every_s` seconds, and always the first), "epoch" (the epoch's validation, as in training.json's
    history), "snapshot" (step, path, losses; written after the snapshot is saved), then "done" (stopped, out,
    steps, best_valid_loss, wall_seconds) or "error" (message: the one sentence the command also prints).
    """

    def __init__(self, target: str, every_s: float = 0.2) -> None:
        try:
            self.file = sys.stdout if target == "-" else open(target, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise UserError(f"Cannot write the progress file {target}: {exc.strerror or exc}.") from None
        self.every_s = every_s
        self._last = -math.inf
        self._losses: list[float] = []

    def __call__(self, event: dict) -> None:
        if event.get("event") == "step":
            self._losses.append(event["loss"])
            now = time.monotonic()
            if now - self._last < self.every_s:
                return
            self._last = now
            event = {**event, "loss": sum(self._losses) / len(self._losses)}
            self._losses = []
        self.file.write(json.dumps(event, ensure_ascii=False) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not sys.stdout:
            self.file.close()


@contextlib.contextmanager
def stop_on_terminate(enabled: bool):
    """While inside, SIGTERM (and CTRL_BREAK on Windows) sets the event returned instead of killing the process;
    the trainer asks it before every update. Outside, or when not `enabled`, the signals act as before."""
    stop = threading.Event()
    wanted = [getattr(signal, name) for name in ("SIGTERM", "SIGBREAK") if hasattr(signal, name)]
    previous = {}
    if enabled and threading.current_thread() is threading.main_thread():
        for sig in wanted:
            previous[sig] = signal.signal(sig, lambda _sig, _frame: stop.set())
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(args: argparse.Namespace) -> int:
    channel = ProgressJson(args.progress_json) if getattr(args, "progress_json", None) else None
    try:
        return _run(args, channel)
    except UserError as exc:
        if channel is not None:
            channel({"event": "error", "message": str(exc)})
        raise
    finally:
        if channel is not None:
            channel.close()


def _run(args: argparse.Namespace, channel: ProgressJson | None) -> int:
    opts = options_from_args(args)
    timeout = getattr(args, "dist_timeout", 10.0)
    if timeout <= 0:
        raise UserError(f"--dist-timeout must be more than 0 minutes, not {timeout:g}.")
    # Without torchrun (no WORLD_SIZE in the environment) the session is the one plain process.
    with session(opts.device, timeout) as dist, stop_on_terminate(channel is not None and not dist.active) as stop:
        try:
            result = train(opts, resume=args.resume, progress=not args.quiet, dist=dist, on_event=channel,
                           should_stop=stop.is_set if channel is not None and not dist.active else None)
        except UserError:
            if not dist.is_main:
                return 2  # every rank meets the same mistake: rank 0 alone says it
            raise
        except KeyboardInterrupt:
            if channel is not None and dist.is_main:  # train() saved where it stood before passing Ctrl-C on
                channel({"event": "done", "stopped": "interrupted", "out": opts.out})
            raise
        if not dist.is_main:
            return 0
    if channel is not None:
        channel({"event": "done", "stopped": result["stopped"], "out": opts.out, "steps": result["steps"],
                 "best_valid_loss": result["best_valid_loss"], "wall_seconds": result["wall_seconds"]})
    last = result["history"][-1] if result["history"] else {}
    em = last.get("valid_exact_match")
    best = result["best_valid_loss"]
    what = f"the best model (valid loss {best:.4f})" if best is not None else "the model (not validated yet)"
    print(f"saved {what} to {opts.out}; {result['steps']} steps, {result['epochs_done']} epochs, "
          f"{result['wall_seconds']:.0f} s" + (f", last valid exact match {em:.1%}" if em is not None else ""))
    if result["stopped"] not in ("finished",):
        again = "torchrun [its options] -m scratchformer train" if dist.active else "scratchformer train"
        print(f"stopped early ({result['stopped']}); continue with: {again} --resume {opts.out}", file=sys.stderr)
    return 0
