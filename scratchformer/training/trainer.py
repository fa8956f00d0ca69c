"""The Trainer (teacher forcing, Adam with warm-up, validation, resume state) and the driver that runs it.

The best model by validation loss is saved as a checkpoint directory; the full training state (model, Adam
moments, step, random-number states) goes to `<out>/resume/`, all in safetensors + JSON, so a run can be
resumed and a fixed seed reproduces it. With `--snapshots N` the model is also kept at N steps spread over the
run, in `<out>/snapshots/step-NNNNNN/` (snapshots.py says where), and training.json records the loss curve.
Under torchrun the same Trainer runs on every rank with a Distributed (distributed.py): each rank computes its
share of every batch, DDP all-reduces the gradients, validation metrics are summed over ranks (snapshot
validation too), and rank 0 alone prints and writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from ..errors import UserError
from ..loading.checkpoint import SNAPSHOTS, is_checkpoint, load_checkpoint, save_checkpoint, snapshot_name
from ..running.decoding import greedy_batch
from ..transformer.model import Transformer
from . import snapshots as schedule
from .data import Batch, Example, TrainData, collate, token_batches
from .distributed import Distributed
from .formulas import IGNORE, label_smoothed_loss, noam_lr
from .options import TrainOptions, _retokenize, build_config, load_data, preset_decoder_only
from .sequences import completion_hits, prompt_length

RESUME_DIR = "resume"
STATE_FILE, OPTIMIZER_FILE = "trainer_state.json", "optimizer.safetensors"
TRAINING_FILE = "training.json"  # in <out>: the command, options, history, loss curve and snapshots
# How checkpoints store their weights (None: as trained, float32); both are read back into a float32 model.
SNAPSHOT_DTYPES = {"float32": None, "float16": torch.float16, "int8": torch.int8}
WEIGHTS_DTYPES = {k: v for k, v in SNAPSHOT_DTYPES.items() if k != "int8"}  # the model itself: never 8-bit
KEEP = (RESUME_DIR, SNAPSHOTS)  # what a new best checkpoint in <out> keeps of the folder it replaces


@dataclass
class EpochResult:
    epoch: int
    step: int
    train_loss: float
    valid_loss: float
    valid_token_accuracy: float
    valid_exact_match: float | None
    tokens_per_second: float
    seconds: float


class Trainer:
    """Owns the model, the optimizer and where training stands (epoch, batch within it, step).

    `dist` says which rank this is (default: the only one). `model` is always the plain Transformer (for
    validation, decoding and checkpoints); `net` is what training steps call: the model, or DDP around it.
    """

    def __init__(self, model: Transformer, data: TrainData, opts: TrainOptions, device: torch.device,
                 dist: Distributed | None = None) -> None:
        self.model, self.data, self.opts, self.device = model, data, opts, device
        self.dist = dist or Distributed()
        self.net = self.dist.wrap(model, device)
        # Paper §5.3: Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9; the learning rate is set every step.
        self.optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
        self.step = 0  # optimizer updates done
        self.epoch = 0  # the epoch in progress (0-based)
        self.batch_in_epoch = 0  # batches of that epoch already done
        self.best_valid = math.inf
        self.history: list[dict] = []
        self.elapsed = 0.0  # seconds of training, summed over resumed runs
        # The loss curve: {"step", "train_loss"} every curve_every steps (the mean over those steps), and
        # {"valid_loss", "valid_token_accuracy"} at every validation (epoch ends, snapshots), merged by step.
        self.curve: list[dict] = []
        self.snapshots: list[dict] = []  # {"step", "path", "train_loss", "valid_loss", "valid_token_accuracy"}
        self._pending: list[float] = []  # training losses since the last point of the curve
        self._recent: deque[float] = deque(maxlen=self.curve_every)  # the last curve_every losses
        self._validated: tuple[int, float, float] | None = None  # (step, valid loss, accuracy) of the last check

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return token_batches(self.data.train, self.opts.batch_tokens, random.Random(f"{self.opts.seed}:{epoch}"))

    @functools.cached_property
    def planned_steps(self) -> int:
        """The updates the run will make if no limit but --max-steps stops it: the batches of every epoch."""
        total = sum(len(self.epoch_batches(e)) for e in range(self.opts.epochs))
        return min(total, self.opts.max_steps) if self.opts.max_steps is not None else total

    @functools.cached_property
    def curve_every(self) -> int:
        return schedule.curve_every(self.planned_steps)

    @functools.cached_property
    def snapshot_steps(self) -> list[int]:
        """The steps after which the model is kept (--snapshots N, spread geometrically; see snapshots.py)."""
        return schedule.snapshot_steps(self.planned_steps, self.opts.snapshots, self.opts.snapshots_until)

    def validated(self) -> tuple[float, float]:
        """validate() on the validation split, once per step (a snapshot at an epoch's last step shares it)."""
        if self._validated is None or self._validated[0] != self.step:
            self._validated = (self.step, *self.validate(self.data.valid))
        return self._validated[1], self._validated[2]

    def _curve_add(self, step: int, **values: float) -> None:
        if self.curve and self.curve[-1]["step"] == step:
            self.curve[-1].update(values)
        else:
            self.curve.append({"step": step, **values})

    def flush_curve(self) -> None:
        """The training losses not yet on the curve become its point at this step."""
        if self._pending:
            self._curve_add(self.step, train_loss=sum(self._pending) / len(self._pending))
            self._pending = []

    def record(self, loss: float, on_snapshot=None) -> None:
        """After each update: the loss goes into the curve; at a snapshot step the model is validated and kept."""
        self._pending.append(loss)
        self._recent.append(loss)
        if self.step % self.curve_every == 0:
            self.flush_curve()
        if self.step in self.snapshot_steps and not any(s["step"] == self.step for s in self.snapshots):
            self.take_snapshot(on_snapshot)

    def take_snapshot(self, on_snapshot=None, local: bool = False) -> dict:
        """Validate (on every rank, or on this one alone when `local`), note the snapshot, let `on_snapshot` keep
        the model (the driver saves it, on rank 0)."""
        if local:
            valid_loss, valid_acc = self.validate(self.data.valid, local=True)
        else:
            valid_loss, valid_acc = self.validated()
        self._curve_add(self.step, valid_loss=valid_loss, valid_token_accuracy=valid_acc)
        recent = list(self._recent)
        entry = {"step": self.step, "path": f"{SNAPSHOTS}/{snapshot_name(self.step)}",
                 "train_loss": sum(recent) / len(recent) if recent else None, "valid_loss": valid_loss,
                 "valid_token_accuracy": valid_acc}
        self.snapshots.append(entry)
        if on_snapshot is not None:
            try:
                on_snapshot(self, entry)
            except BaseException:  # not kept (Ctrl-C while saving): not listed, and the final save tries again
                self.snapshots.remove(entry)
                raise
        return entry

    def lr(self) -> float:
        return noam_lr(self.step + 1, self.model.config.d_model, self.opts.warmup, self.opts.lr_scale)

    def train_step(self, batch: Batch, totals: tuple[int, int] | None = None, share: float = 1.0) -> float:
        """One Adam update on one batch (teacher forcing: the decoder reads the gold prefix); returns its loss.

        Under DDP `batch` is this rank's share of the global batch and `totals` counts the global batch's target
        tokens and aligned positions (default: this batch's own). The loss is summed over this rank's tokens and
        divided by the global counts, so the ranks' losses add up to the global batch's mean loss and their
        gradients to its gradient. A rank with no sentence in a batch runs one with share 0: it must still take
        part in the gradient all-reduce.
        """
        self.net.train()
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr()
        tokens, aligned = totals or (batch.n_tokens, _aligned(batch))
        captured: dict = {}
        hook = None
        if self.opts.align_weight > 0 and batch.alignment is not None and aligned:
            layer = self.model.decoder[self.opts.align_layer].cross_attn
            hook = layer.register_forward_hook(lambda m, args, out: captured.update(x=args[0], memory=args[1]))
        # bf16 autocast (CUDA only, --precision bf16): matrix products in bfloat16, weights and Adam in float32.
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.opts.precision == "bf16"):
            try:
                logits = self.net(batch.src, batch.tgt_in, batch.src_pad, batch.tgt_pad)  # (B, T, V)
            finally:
                if hook is not None:
                    hook.remove()
            loss = label_smoothed_loss(logits, batch.labels, self.opts.label_smoothing, "sum") / tokens
            if captured:
                align = self.alignment_loss(captured["x"], captured["memory"], batch, "sum") / aligned
                loss = loss + self.opts.align_weight * align
        loss = loss * share
        self.optimizer.zero_grad(set_to_none=True)
        # DDP averages gradients over the ranks; times world_size makes that their sum: the global batch's gradient.
        (loss * self.dist.world_size if self.dist.active else loss).backward()
        self.optimizer.step()
        self.step += 1
        return self.dist.sum([loss.item()])[0]

    def alignment_loss(self, x: torch.Tensor, memory: torch.Tensor, batch: Batch,
                       reduction: str = "mean") -> torch.Tensor:
        """−log a_j[gold_j] for the guided head: its attention row j should sit on target word j's source word."""
        attn = self.model.decoder[self.opts.align_layer].cross_attn
        h, d = self.opts.align_head, attn.d_model
        q = attn.split_heads(attn.q_proj(x))[:, h]  # (B, T, d_k)
        k = attn.split_heads(attn.kv_proj(memory)[..., :d])[:, h]  # (B, S, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(attn.d_head)  # (B, T, S)
        if batch.src_pad is not None:
            scores = scores.masked_fill(batch.src_pad[:, None, :], float("-inf"))
        logp = scores.log_softmax(-1)  # (B, T, S)
        return F.nll_loss(logp.reshape(-1, logp.shape[-1]), batch.alignment.reshape(-1), ignore_index=IGNORE,
                          reduction=reduction)

    def global_step(self, indices: list[int]) -> float:
        """One update on the global batch `indices`: this rank's share of it, or all of it in a single process."""
        examples = [self.data.train[i] for i in indices]
        mine = self.dist.shard(examples)
        if not self.dist.active:
            return self.train_step(collate(mine, self.device))
        totals = (sum(len(e.labels) for e in examples),
                  sum(a != IGNORE for e in examples for a in e.alignment))
        self.dist.seed_step(self.opts.seed, self.step)
        return self.train_step(collate(mine or examples[:1], self.device), totals, share=1.0 if mine else 0.0)

    @torch.no_grad()
    def validate(self, examples: list[Example], local: bool = False) -> tuple[float, float]:
        """(cross-entropy without smoothing, token accuracy) under teacher forcing; each rank validates its
        share of the batches and the sums are added up over the ranks (`local`: this rank validates all alone,
        as rank 0 does after the others have stopped)."""
        self.model.eval()
        dist = Distributed() if local else self.dist
        total, correct, count = 0.0, 0, 0
        for idx in dist.shard(token_batches(examples, self.opts.batch_tokens * 2, random.Random(0))):
            batch = collate([examples[i] for i in idx], self.device)
            logits = self.model(batch.src, batch.tgt_in, batch.src_pad, batch.tgt_pad)  # (B, T, V)
            total += float(label_smoothed_loss(logits, batch.labels, 0.0, "sum"))
            mask = batch.labels != IGNORE
            correct += int(((logits.argmax(-1) == batch.labels) & mask).sum())
            count += batch.n_tokens
        total, correct, count = dist.sum([total, correct, count])
        return total / max(count, 1), correct / max(count, 1)

    def exact_match(self, examples: list[Example]) -> float | None:
        """Greedy exact match: the decoder's translation, or a decoder-only model's continuation of each prompt
        (sequences.py); None for plain next-token windows, which have no answer to check."""
        if not examples or (self.data.decoder_only and not prompt_length(examples[0])):
            return None
        mine = self.dist.shard(examples)
        count = completion_hits if self.data.decoder_only else functools.partial(_exact_hits, device=self.device)
        hits, n = self.dist.sum([count(self.model, mine) if mine else 0, len(mine)])
        return hits / n

    def out_of_time(self, start_time: float) -> bool:
        """--max-minutes: every rank must stop at the same step, so in a process group they agree (any rank's
        clock past the limit stops all); a collective only when the limit is set."""
        if self.opts.max_minutes is None:
            return False
        late = (time.perf_counter() - start_time) / 60 >= self.opts.max_minutes
        return self.dist.sum([float(late)])[0] > 0

    def run(self, progress: bool = True, on_epoch_end=None, on_snapshot=None, on_step=None,
            should_stop=None) -> str:
        """Train until the epochs are done or a limit is reached; returns why it stopped.

        on_epoch_end(trainer, EpochResult) after each epoch's validation; on_snapshot(trainer, entry) at each step
        of snapshot_steps, after validation (every rank calls both; the driver's callbacks write on rank 0 only).
        on_step(trainer, loss, tokens_per_second) after every update. should_stop() is asked before every update:
        True stops the run there as "cancelled" (a single process only: the ranks of a group would not agree).
        """
        opts = self.opts
        from tqdm import tqdm

        progress = progress and self.dist.is_main
        start_time = time.perf_counter()
        start_elapsed = self.elapsed
        stop = "finished"
        while self.epoch < opts.epochs:
            batches = self.epoch_batches(self.epoch)
            epoch_start, tokens, losses = time.perf_counter(), 0, []
            bar = tqdm(total=len(batches), initial=self.batch_in_epoch, desc=f"epoch {self.epoch + 1}/{opts.epochs}",
                       disable=not progress, mininterval=0.5 if sys.stderr.isatty() else 15, file=sys.stderr,
                       dynamic_ncols=True)
            while self.batch_in_epoch < len(batches):
                if opts.max_steps is not None and self.step >= opts.max_steps:
                    stop = "max_steps"
                    break
                if should_stop is not None and should_stop():
                    stop = "cancelled"
                    break
                if self.out_of_time(start_time):
                    stop = "max_minutes"
                    break
                losses.append(self.global_step(batches[self.batch_in_epoch]))
                tokens += sum(len(self.data.train[i].labels) for i in batches[self.batch_in_epoch])
                self.batch_in_epoch += 1
                self.record(losses[-1], on_snapshot)
                rate = tokens / max(time.perf_counter() - epoch_start, 1e-9)
                if on_step is not None:
                    on_step(self, losses[-1], rate)
                bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{rate:,.0f}", lr=f"{self.lr():.2e}", refresh=False)
                bar.update(1)
            bar.close()
            self.elapsed = start_elapsed + time.perf_counter() - start_time
            if stop != "finished":
                break
            seconds = time.perf_counter() - epoch_start
            valid_loss, valid_acc = self.validated()
            self._curve_add(self.step, valid_loss=valid_loss, valid_token_accuracy=valid_acc)
            em = self.exact_match(self.data.valid[: opts.valid_greedy]) if opts.valid_greedy else None
            result = EpochResult(self.epoch + 1, self.step, sum(losses) / max(len(losses), 1), valid_loss,
                                 valid_acc, em, tokens / max(seconds, 1e-9), seconds)
            self.history.append(dataclasses.asdict(result))
            self.epoch += 1
            self.batch_in_epoch = 0
            self.elapsed = start_elapsed + time.perf_counter() - start_time
            if progress:
                em_text = f", exact match {em:.1%}" if em is not None else ""
                print(f"epoch {result.epoch}: train loss {result.train_loss:.3f}, valid loss {valid_loss:.3f}, "
                      f"token accuracy {valid_acc:.1%}{em_text}, {result.tokens_per_second:,.0f} tokens/s, "
                      f"{seconds:.0f} s", file=sys.stderr, flush=True)
            if on_epoch_end is not None:
                on_epoch_end(self, result)
        self.flush_curve()
        return stop

    # ----- resume state: everything in safetensors + JSON, no pickle

    def state_dict_json(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best_valid": self.best_valid if math.isfinite(self.best_valid) else None,
                "history": self.history, "elapsed_seconds": self.elapsed, "options": self.opts.to_dict(),
                "param_groups": self.optimizer.state_dict()["param_groups"], "curve": self.curve,
                "snapshots": self.snapshots, "pending_losses": self._pending, "recent_losses": list(self._recent)}

    def save_state(self, directory: str | Path) -> Path:
        """model + tokenizers (a loadable checkpoint) + Adam moments and RNG states + where training stands."""
        directory = Path(directory)
        save_checkpoint(directory, self.model, self.data.src_tokenizer, self.data.tgt_tokenizer,
                        extra_files={STATE_FILE: json.dumps(self.state_dict_json(), indent=1) + "\n"})
        tensors = {}
        for idx, state in self.optimizer.state_dict()["state"].items():
            for key, value in state.items():
                tensors[f"state.{idx}.{key}"] = torch.as_tensor(value).detach().reshape(-1).cpu().contiguous()
        tensors["rng.cpu"] = torch.get_rng_state()
        if self.device.type == "cuda":
            tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        tmp = directory / f".{OPTIMIZER_FILE}.tmp"
        save_file(tensors, str(tmp), metadata={"step": str(self.step)})
        os.replace(tmp, directory / OPTIMIZER_FILE)
        return directory

    def load_state(self, directory: str | Path) -> None:
        """Restore the Adam moments, the RNG states and the counters written by save_state."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
            tensors = load_file(str(directory / OPTIMIZER_FILE))
        except (OSError, ValueError) as exc:
            raise UserError(f"The training state in {directory} cannot be read: {exc}.") from None
        state: dict[int, dict] = {}
        for name, value in tensors.items():
            if not name.startswith("state."):
                continue
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = value.reshape(()) if key == "step" else value
        params = list(self.model.parameters())
        for idx, entry in state.items():
            for key in ("exp_avg", "exp_avg_sq"):
                if key in entry:
                    entry[key] = entry[key].reshape(params[idx].shape).to(self.device)
        self.optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
        torch.set_rng_state(tensors["rng.cpu"])
        if "rng.cuda" in tensors and self.device.type == "cuda":
            torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)
        self.step, self.epoch = int(meta["step"]), int(meta["epoch"])
        self.batch_in_epoch = int(meta["batch_in_epoch"])
        self.best_valid = meta["best_valid"] if meta["best_valid"] is not None else math.inf
        self.history = list(meta["history"])
        self.elapsed = float(meta.get("elapsed_seconds", 0.0))
        self.curve = list(meta.get("curve", []))
        self.snapshots = list(meta.get("snapshots", []))
        self._pending = [float(x) for x in meta.get("pending_losses", [])]
        self._recent.clear()
        self._recent.extend(float(x) for x in meta.get("recent_losses", []))


def _aligned(batch: Batch) -> int:
    """Positions with a gold alignment in the batch: what the alignment loss is averaged over."""
    return 0 if batch.alignment is None else int((batch.alignment != IGNORE).sum())


def exact_match(model: Transformer, examples: list[Example], device: torch.device, batch_size: int = 256) -> float:
    """Share of examples whose greedy decode equals the gold target exactly."""
    return _exact_hits(model, examples, device, batch_size) / len(examples)


def _exact_hits(model: Transformer, examples: list[Example], device: torch.device, batch_size: int = 256) -> int:
    hits = 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = collate(chunk, device)
        longest = max(len(e.labels) for e in chunk) + 5
        rows = greedy_batch(model, batch.src, batch.src_pad, longest)
        hits += sum(row == e.labels[:-1] for row, e in zip(rows, chunk))
    return hits


# ---------------------------------------------------------------------------------------------- driver


def _finish(out: Path, valid_pairs, device: torch.device) -> dict:
    """Score the best checkpoint on the validation split; store its best-aligning layer in its config."""
    from ..loading.bundle import ModelBundle
    from .evaluation import evaluate

    model, src_tok, tgt_tok = load_checkpoint(out, device)
    bundle = ModelBundle(model, src_tok, tgt_tok, model.config.name, str(out))
    result = evaluate(bundle, valid_pairs, "valid")
    if result.layer_accuracy:
        model.config.extra["alignment_layer"] = int(max(range(len(result.layer_accuracy)),
                                                        key=result.layer_accuracy.__getitem__))
        tmp = out / ".config.json.tmp"
        model.config.save(tmp)
        os.replace(tmp, out / "config.json")
    return {"exact_match": result.exact_match, "alignment_by_layer": result.layer_accuracy,
            "alignment_by_head": result.head_accuracy, "alignment_layer": model.config.extra.get("alignment_layer")}


def resume_dir(path: str | Path) -> Path:
    """`--resume DIR` takes the output folder of a run (its resume/ inside) or the resume folder itself."""
    path = Path(path)
    for candidate in (path / RESUME_DIR, path):
        if (candidate / STATE_FILE).is_file() and (candidate / OPTIMIZER_FILE).is_file():
            return candidate
    if not path.exists():
        raise UserError(f"{path} does not exist, so there is nothing to resume from.")
    raise UserError(f"{path} holds no training state to resume from (it needs {RESUME_DIR}/{STATE_FILE}); "
                    "train with the resume state kept (the default).")


def prepare(opts: TrainOptions, resume: str | Path | None = None, dist: Distributed | None = None) -> Trainer:
    """Data, model and trainer for `opts` — or, with `resume`, exactly where a saved run stopped.

    Every rank of a distributed run calls this alike: same seed, same weights, same data (a resumed run reads
    the same saved state on every rank, whatever the number of ranks that wrote it).
    """
    dist = dist or Distributed()
    device = dist.device(opts.device)
    if opts.precision not in ("fp32", "bf16"):
        raise UserError(f"Unknown precision {opts.precision!r}; use fp32 or bf16.")
    if opts.snapshot_dtype not in SNAPSHOT_DTYPES:
        raise UserError(f"Unknown snapshot dtype {opts.snapshot_dtype!r}; use float32, float16 or int8.")
    if opts.weights_dtype not in WEIGHTS_DTYPES:
        raise UserError(f"Unknown weights dtype {opts.weights_dtype!r}; use float32 or float16.")
    if opts.precision == "bf16" and device.type != "cuda":
        # CPU bf16 autocast exists, but on most CPUs it is slower than float32 and saves nothing that matters
        # at the sizes trained on a CPU; the option is for GPUs' bf16 tensor cores.
        raise UserError("--precision bf16 needs CUDA (--device cuda); on the CPU train in fp32.")
    if opts.precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise UserError("This GPU has no bfloat16 support; train with --precision fp32.")
    _check_numbers(opts)
    torch.set_num_threads(max(1, opts.threads))
    if resume is not None:
        state_dir = resume_dir(resume)
        model, src_tok, tgt_tok = load_checkpoint(state_dir, device)
        data = load_data(opts)
        if data.decoder_only and not data.pairs:  # --text: GPT-2's tokens
            src_tok = tgt_tok = data.src_tokenizer
        else:  # the saved vocabularies, so ids mean what they meant
            data = _retokenize(opts, src_tok, tgt_tok)
        trainer = Trainer(model, data, opts, device, dist)
        trainer.load_state(state_dir)
        return trainer
    torch.manual_seed(opts.seed)
    random.seed(opts.seed)
    data = load_data(opts)
    config = build_config(opts, data)
    model = Transformer(config).to(device)
    return Trainer(model, data, opts, device, dist)


def _check_numbers(opts: TrainOptions) -> None:
    """Values PyTorch would refuse with a traceback mid-run, or that would quietly train nothing: one sentence."""
    if opts.max_minutes is not None and not opts.max_minutes > 0:  # 0 would stop before the first step
        raise UserError(f"--max-minutes must be more than 0, not {opts.max_minutes:g}.")
    if not 0 <= opts.label_smoothing <= 1:
        raise UserError(f"--label-smoothing must be between 0 and 1, not {opts.label_smoothing:g}.")
    if not opts.lr_scale > 0:
        raise UserError(f"--lr-scale must be more than 0, not {opts.lr_scale:g}.")
    if opts.align_weight < 0:
        raise UserError(f"--align-weight must be 0 (off) or more, not {opts.align_weight:g}.")
    if opts.align_weight > 0 and preset_decoder_only(opts):
        raise UserError(f"--align-weight guides a cross-attention head, and --preset {opts.preset} has none.")
    if opts.align_weight > 0 and not -opts.layers <= opts.align_layer < opts.layers:
        raise UserError(f"--align-layer {opts.align_layer} does not exist; this model has decoder layers 0 to "
                        f"{opts.layers - 1} (or -1 for the last).")
    if opts.align_weight > 0 and not 0 <= opts.align_head < opts.heads:
        raise UserError(f"--align-head {opts.align_head} does not exist; this model has heads 0 to {opts.heads - 1}.")


def resumed_options(resume: str | Path, overrides: dict) -> TrainOptions:
    """The saved run's options, with the ones given again on the command line (epochs, limits, device, out)."""
    meta = json.loads((resume_dir(resume) / STATE_FILE).read_text(encoding="utf-8"))
    data = dict(meta["options"])
    data.update({k: v for k, v in overrides.items() if v is not None})
    return TrainOptions.from_dict(data)


def train(opts: TrainOptions, resume: str | Path | None = None, progress: bool = True,
          dist: Distributed | None = None, on_event=None, should_stop=None) -> dict:
    """Run training and write the best checkpoint (by validation loss) to opts.out; returns the summary.

    In a process group (`dist` from distributed.session) every rank trains; only rank 0 checks and writes --out
    (on several machines, the folder is rank 0's). `on_event(dict)` (rank 0) hears how the run goes: "start"
    (planned steps, parameters), "step" (loss, tokens/s), "epoch" (validation) and "snapshot" (after it is
    saved). `should_stop()`: see Trainer.run; a cancelled run saves like one stopped by --max-steps.
    PyTorch's thread count (opts.threads while it trains) is what it was before once it returns: a run started
    from the window or a notebook leaves the process as it found it.
    """
    before = torch.get_num_threads()
    try:
        return _train(opts, resume, progress, dist, on_event, should_stop)
    finally:
        torch.set_num_threads(before)


def _train(opts: TrainOptions, resume: str | Path | None, progress: bool, dist: Distributed | None, on_event,
           should_stop) -> dict:  # fmt: skip
    dist = dist or Distributed()
    out = Path(opts.out)
    problem = None
    if dist.is_main and out.exists() and not out.is_dir():
        problem = f"--out {out} is a file, not a folder."
    elif dist.is_main and out.is_dir() and any(out.iterdir()) and not is_checkpoint(out) and resume is None:
        problem = f"--out {out} is a folder with other files in it; choose an empty or new folder."
    if dist.sum([problem is not None])[0]:  # every rank stops together, none waits for rank 0
        raise UserError(problem or "rank 0 cannot write --out.")
    trainer = prepare(opts, resume, dist)
    tell = on_event if (on_event is not None and dist.is_main) else (lambda event: None)
    tell({"event": "start", "planned_steps": trainer.planned_steps, "epochs": opts.epochs, "step": trainer.step,
          "snapshot_steps": trainer.snapshot_steps, "out": str(out),
          "parameters": sum(p.numel() for p in trainer.model.parameters())})
    command = " ".join(["scratchformer"] + sys.argv[1:]) if sys.argv and "scratchformer" in sys.argv[0] else ""

    def summary(stop: str) -> dict:
        return {"command": command, "options": opts.to_dict(), "seed": opts.seed, "stopped": stop,
                "steps": trainer.step, "epochs_done": trainer.epoch, "wall_seconds": round(trainer.elapsed, 1),
                "best_valid_loss": trainer.best_valid if math.isfinite(trainer.best_valid) else None,
                "history": trainer.history, "data": trainer.data.description,
                "parameters": sum(p.numel() for p in trainer.model.parameters()),
                "torch_threads": torch.get_num_threads(), "device": str(trainer.device),
                "processes": dist.world_size, "precision": opts.precision, "curve": trainer.curve,
                "snapshots": trainer.snapshots}

    def on_epoch_end(t: Trainer, result: EpochResult) -> None:
        best = result.valid_loss < t.best_valid
        if best:
            t.best_valid = result.valid_loss  # on every rank: all hold the same state
        if not dist.is_main:
            return
        if best:
            save_checkpoint(out, t.model, t.data.src_tokenizer, t.data.tgt_tokenizer,
                            extra_files={TRAINING_FILE: _json_text(summary("running"))}, keep=KEEP,
                            dtype=WEIGHTS_DTYPES[opts.weights_dtype])
        if opts.resume_state:
            t.save_state(out / RESUME_DIR)
        tell({"event": "epoch", **dataclasses.asdict(result)})

    def on_snapshot(t: Trainer, entry: dict) -> None:
        if dist.is_main:
            _save_snapshot(t, out, entry, summary("running"))
            tell({"event": "snapshot", **entry})

    def on_step(t: Trainer, loss: float, rate: float) -> None:
        tell({"event": "step", "step": t.step, "epoch": t.epoch + 1, "loss": loss, "tokens_per_second": rate})

    try:
        stop = trainer.run(progress, on_epoch_end, on_snapshot, on_step if on_event is not None else None,
                           should_stop)
    except KeyboardInterrupt:
        stop = "interrupted"
    if not dist.is_main:  # rank 0 writes; the weights and the state are the same on every rank
        if stop == "interrupted":
            raise KeyboardInterrupt
        return summary(stop)
    with dist.shielded() if stop == "interrupted" else contextlib.nullcontext():
        result = _write_final(trainer, out, opts, stop, summary)
    if stop == "interrupted":
        raise KeyboardInterrupt
    return result


def _json_text(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _write_json(path: Path, data: dict) -> None:
    """Write through a temporary file and rename: a reader never sees half a training.json."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(_json_text(data), encoding="utf-8")
    os.replace(tmp, path)


def _save_snapshot(trainer: Trainer, out: Path, entry: dict, record: dict) -> None:
    """Rank 0: the model as it stands, in <out>/snapshots/step-NNNNNN/ (config + weights; the tokenizers are the
    run's), then training.json with the snapshot listed."""
    save_checkpoint(out / entry["path"], trainer.model, None, None, dtype=SNAPSHOT_DTYPES[trainer.opts.snapshot_dtype],
                    config_extra={"training_step": entry["step"]})
    _write_json(out / TRAINING_FILE, record)


def _write_final(trainer: Trainer, out: Path, opts: TrainOptions, stop: str, summary) -> dict:
    """Rank 0 after training: the last snapshot (if it is not kept yet), the resume state (unless finished), a
    checkpoint if none yet, the summary."""
    trainer.flush_curve()
    last_planned = max(trainer.snapshot_steps, default=0)
    if trainer.step and trainer.step < last_planned and not any(s["step"] == trainer.step for s in trainer.snapshots):
        # stopped before the last planned snapshot (--max-minutes, Ctrl-C): keep where it stands, validated here alone
        trainer.take_snapshot(lambda t, entry: _save_snapshot(t, out, entry, summary(stop)), local=True)
    if stop != "finished" and opts.resume_state:
        trainer.save_state(out / RESUME_DIR)
    if not is_checkpoint(out):  # stopped before the first validation: keep what there is
        save_checkpoint(out, trainer.model, trainer.data.src_tokenizer, trainer.data.tgt_tokenizer, keep=KEEP,
                        dtype=WEIGHTS_DTYPES[opts.weights_dtype])
        if opts.resume_state:
            trainer.save_state(out / RESUME_DIR)
    result = summary(stop)
    if trainer.data.pairs.get("valid"):  # pairs: an encoder-decoder, or a decoder-only model's sequences
        result["final_valid"] = _finish(out, trainer.data.pairs["valid"], trainer.device)
    _write_json(out / TRAINING_FILE, result)
    return result
