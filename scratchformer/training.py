"""Training (paper §5): teacher forcing under the causal mask, label-smoothed cross-entropy, Adam with warm-up.

Data comes from a built-in task (en-hi, copy, reverse, sort), a user's TSV of source/target pairs, or a plain
text file (next-token prediction). The best model by validation loss is saved as a checkpoint directory;
the full training state (model, Adam moments, step, random-number states) goes to `<out>/resume/`, all in
safetensors + JSON, so a run can be resumed and a fixed seed reproduces it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from .batching import read_text_file, sliding_windows
from .checkpoint import is_checkpoint, load_checkpoint, save_checkpoint
from .config import GPT2_VOCAB_SIZE, TransformerConfig
from .decoding import greedy_batch
from .device import resolve_device
from .errors import UserError
from .model import Transformer
from .tokenizers import GPT2_EOT, TextTokenizer, gpt2_tokenizer, word_level_tokenizer

IGNORE = -100  # label value for padding: F.cross_entropy skips it
RESUME_DIR = "resume"
STATE_FILE, OPTIMIZER_FILE = "trainer_state.json", "optimizer.safetensors"


# ------------------------------------------------------------------------------------------- the formulas


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Paper §5.3: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5), times `scale`."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float = 0.1) -> torch.Tensor:
    """Mean cross-entropy against (1 − ε)·one-hot + ε/V (paper §5.4, ε_ls = 0.1) over non-padding labels.

    logits: (B, T, V); labels: (B, T) with IGNORE at padding.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                           ignore_index=IGNORE, label_smoothing=smoothing)


# ------------------------------------------------------------------------------------------------- data


@dataclass
class Example:
    """One training example as ids: encoder input, decoder input (starts with the start token), labels."""

    src: list[int]
    tgt_in: list[int]
    labels: list[int]
    alignment: tuple[int, ...] = ()  # gold: source word of each target word (when the task knows it)


@dataclass
class Batch:
    src: torch.Tensor | None  # (B, S)
    src_pad: torch.Tensor | None  # (B, S) True at padding
    tgt_in: torch.Tensor  # (B, T)
    tgt_pad: torch.Tensor | None  # (B, T)
    labels: torch.Tensor  # (B, T), IGNORE at padding
    n_tokens: int  # real (non-padding) target tokens
    alignment: torch.Tensor | None = None  # (B, T) gold source index of the word each position emits, or IGNORE


@dataclass
class TrainData:
    train: list[Example]
    valid: list[Example]
    src_tokenizer: TextTokenizer
    tgt_tokenizer: TextTokenizer
    decoder_only: bool = False
    test: list[Example] = field(default_factory=list)
    description: str = ""
    pairs: dict = field(default_factory=dict)  # the splits as Pairs (source, target, gold alignment)


def _pair_examples(pairs, src_tok: TextTokenizer, tgt_tok: TextTokenizer) -> list[Example]:
    bos, eos = tgt_tok.bos_id, tgt_tok.eos_id
    out = []
    for p in pairs:
        src = src_tok.encode(p.source) + [src_tok.eos_id]  # </s> closes the source (a place to look when done)
        tgt = tgt_tok.encode(p.target)
        out.append(Example(src, [bos] + tgt, tgt + [eos], tuple(p.alignment)))
    return out


def pair_data(splits: dict, description: str) -> TrainData:
    """Word-level tokenizers built on the training split; ids for every split."""
    train = splits["train"]
    src_tok = word_level_tokenizer((p.source for p in train), "words-src")
    tgt_tok = word_level_tokenizer((p.target for p in train), "words-tgt")
    return TrainData(_pair_examples(train, src_tok, tgt_tok), _pair_examples(splits["valid"], src_tok, tgt_tok),
                     src_tok, tgt_tok, test=_pair_examples(splits.get("test", []), src_tok, tgt_tok),
                     description=description, pairs=splits)


def task_splits(task: str, seed: int) -> dict:
    from .tasks import load_task_splits

    try:
        return load_task_splits(task, seed)
    except ValueError as exc:
        raise UserError(f"{str(exc).rstrip('.')}.") from None


def tsv_splits(path: str | Path, seed: int, valid_fraction: float = 0.1) -> dict:
    """A user's TSV: a seeded 90/10 train/valid split (no test split)."""
    from .tasks import read_pairs_tsv

    try:
        pairs = read_pairs_tsv(path)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if len(pairs) < 2:
        raise UserError(f"{path} has only {len(pairs)} pair; training needs at least 2 (one to validate on).")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_valid = max(1, round(len(pairs) * valid_fraction))
    return {"train": [pairs[i] for i in order[n_valid:]], "valid": [pairs[i] for i in order[:n_valid]]}


def text_data(path: str | Path, seq_len: int, valid_fraction: float = 0.1) -> TrainData:
    """A plain text file for next-token prediction with GPT-2's tokenizer.

    The token stream is cut into windows of seq_len tokens (the walkthrough's batching.sliding_windows, kept
    every seq_len // 2 windows); the decoder input is each window shifted right behind <|endoftext|> and the
    labels are the window itself. The model is decoder-only: an encoder reading the same window would let
    the decoder copy the answer through cross-attention instead of predicting it.
    """
    text = read_text_file(path)
    tok = gpt2_tokenizer()
    ids = tok.encode(text)
    eot = tok.token_id(GPT2_EOT)
    if len(ids) < seq_len + 1:
        raise UserError(f"{path} has {len(ids)} tokens; training on windows of {seq_len} needs at least "
                        f"{seq_len + 1} (or a smaller --seq-len).")
    n_windows = len(ids) - seq_len + 1
    windows, shifted = sliding_windows(ids, seq_len, n_windows, eot)  # (N, S) each
    keep = range(0, n_windows, max(1, seq_len // 2))
    examples = [Example([], shifted[i].tolist(), windows[i].tolist()) for i in keep]
    n_valid = max(1, round(len(examples) * valid_fraction))
    if len(examples) < 2:
        raise UserError(f"{path} is too short: it gives {len(examples)} window of {seq_len} tokens; "
                        "use a longer text or a smaller --seq-len.")
    return TrainData(examples[:-n_valid], examples[-n_valid:], tok, tok, decoder_only=True,
                     description=f"text {path}: {len(ids)} GPT-2 tokens, windows of {seq_len}")


def token_batches(examples: list[Example], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Indices grouped into batches of similar length with at most ~batch_tokens (padded) tokens each."""
    order = sorted(range(len(examples)),
                   key=lambda i: (max(len(examples[i].src), len(examples[i].tgt_in)), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        n = max(len(examples[i].src), len(examples[i].tgt_in))
        if current and max(longest, n) * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(examples: list[Example], device: torch.device, pad_id: int = 0) -> Batch:
    """Pad to the longest example; padding masks from the lengths (True at padding)."""
    b = len(examples)
    t = max(len(e.tgt_in) for e in examples)
    tgt_in = torch.full((b, t), pad_id, dtype=torch.long)
    labels = torch.full((b, t), IGNORE, dtype=torch.long)
    for i, e in enumerate(examples):
        tgt_in[i, : len(e.tgt_in)] = torch.tensor(e.tgt_in)
        labels[i, : len(e.labels)] = torch.tensor(e.labels)
    tgt_pad = labels == IGNORE  # (B, T)
    src = src_pad = None
    if examples[0].src:
        s = max(len(e.src) for e in examples)
        src = torch.full((b, s), pad_id, dtype=torch.long)
        src_pad = torch.ones(b, s, dtype=torch.bool)
        for i, e in enumerate(examples):
            src[i, : len(e.src)] = torch.tensor(e.src)
            src_pad[i, : len(e.src)] = False
        src, src_pad = src.to(device), (src_pad.to(device) if bool(src_pad.any()) else None)
    n_tokens = int((~tgt_pad).sum())
    alignment = None
    if any(e.alignment for e in examples):
        alignment = torch.full((b, t), IGNORE, dtype=torch.long)
        for i, e in enumerate(examples):
            if e.alignment:
                alignment[i, : len(e.alignment)] = torch.tensor(e.alignment)
        alignment = alignment.to(device)
    return Batch(src, src_pad, tgt_in.to(device), tgt_pad.to(device) if bool(tgt_pad.any()) else None,
                 labels.to(device), n_tokens, alignment)


# -------------------------------------------------------------------------------------------- options


@dataclass
class TrainOptions:
    task: str | None = "en-hi"  # en-hi | copy | reverse | sort, or None with data/text
    data: str | None = None  # a TSV of source<TAB>target pairs
    text: str | None = None  # a plain UTF-8 text file (next-token prediction)
    out: str = "runs/model"
    epochs: int = 10
    batch_tokens: int = 1500
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1
    warmup: int = 400
    lr_scale: float = 1.0
    label_smoothing: float = 0.1
    seq_len: int = 32  # --text windows
    seed: int = 0
    device: str = "cpu"
    max_minutes: float | None = None
    max_steps: int | None = None
    threads: int = 2
    resume_state: bool = True  # write <out>/resume/ (model + Adam moments) to resume from
    valid_greedy: int = 200  # validation sentences decoded greedily each epoch for exact match (0 = none)
    # Guided alignment (Garg et al. 2019, "Jointly Learning to Align and Translate"): a departure from the
    # paper, off by default. Adds align_weight × cross-entropy between one cross-attention head's row and
    # the gold source word, for tasks that know their alignment.
    align_weight: float = 0.0
    align_layer: int = -1
    align_head: int = 0
    name: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def load_data(opts: TrainOptions) -> TrainData:
    given = [x for x in (opts.data, opts.text) if x]
    if len(given) > 1:
        raise UserError("Give either --data or --text, not both.")
    if opts.text:
        return text_data(opts.text, opts.seq_len)
    if opts.data:
        return pair_data(tsv_splits(opts.data, opts.seed), f"pairs from {opts.data}")
    if not opts.task:
        raise UserError("Choose what to train on: --task, --data FILE.tsv or --text FILE.txt.")
    return pair_data(task_splits(opts.task, opts.seed), f"task {opts.task} (seed {opts.seed})")


def build_config(opts: TrainOptions, data: TrainData) -> TransformerConfig:
    longest = max(max(len(e.src), len(e.tgt_in)) for e in data.train + data.valid + data.test)
    if data.decoder_only:
        return TransformerConfig(
            d_model=opts.d_model, n_heads=opts.heads, d_ff=opts.d_ff, n_encoder_layers=0,
            n_decoder_layers=opts.layers, dropout=opts.dropout, src_vocab_size=GPT2_VOCAB_SIZE,
            tgt_vocab_size=GPT2_VOCAB_SIZE, max_len=opts.seq_len, share_embeddings=True, tie_output=True,
            bos_id=GPT2_VOCAB_SIZE - 1, eos_id=GPT2_VOCAB_SIZE - 1, name=opts.name or "text-lm",
            extra={"task": "next-token", "tokenizer": "gpt2"},
        )  # fmt: skip
    return TransformerConfig(
        d_model=opts.d_model, n_heads=opts.heads, d_ff=opts.d_ff, n_encoder_layers=opts.layers,
        n_decoder_layers=opts.layers, dropout=opts.dropout, src_vocab_size=data.src_tokenizer.vocab_size,
        tgt_vocab_size=data.tgt_tokenizer.vocab_size, max_len=max(32, 2 * longest), share_embeddings=False,
        tie_output=True, pad_id=0, bos_id=1, eos_id=2, name=opts.name or opts.task or Path(opts.data or "").stem,
        extra={"src_suffix": ["</s>"], "task": opts.task if not opts.data else "pairs", "seed": opts.seed,
               "tokenizer": "word-level (Hugging Face WordLevel), built on the training split",
               **({"guided_alignment": {"layer": opts.align_layer % opts.layers, "head": opts.align_head,
                                        "weight": opts.align_weight}} if opts.align_weight > 0 else {})},
    )  # fmt: skip


# -------------------------------------------------------------------------------------------- trainer


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
    """Owns the model, the optimizer and where training stands (epoch, batch within it, step)."""

    def __init__(self, model: Transformer, data: TrainData, opts: TrainOptions, device: torch.device) -> None:
        self.model, self.data, self.opts, self.device = model, data, opts, device
        # Paper §5.3: Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9; the learning rate is set every step.
        self.optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
        self.step = 0  # optimizer updates done
        self.epoch = 0  # the epoch in progress (0-based)
        self.batch_in_epoch = 0  # batches of that epoch already done
        self.best_valid = math.inf
        self.history: list[dict] = []
        self.elapsed = 0.0  # seconds of training, summed over resumed runs

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return token_batches(self.data.train, self.opts.batch_tokens, random.Random(f"{self.opts.seed}:{epoch}"))

    def lr(self) -> float:
        return noam_lr(self.step + 1, self.model.config.d_model, self.opts.warmup, self.opts.lr_scale)

    def train_step(self, batch: Batch) -> float:
        """One Adam update on one batch (teacher forcing: the decoder reads the gold prefix)."""
        self.model.train()
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr()
        captured: dict = {}
        hook = None
        if self.opts.align_weight > 0 and batch.alignment is not None:
            layer = self.model.decoder[self.opts.align_layer].cross_attn
            hook = layer.register_forward_hook(lambda m, args, out: captured.update(x=args[0], memory=args[1]))
        try:
            logits = self.model(batch.src, batch.tgt_in, batch.src_pad, batch.tgt_pad)  # (B, T, V)
        finally:
            if hook is not None:
                hook.remove()
        loss = label_smoothed_loss(logits, batch.labels, self.opts.label_smoothing)
        if captured:
            loss = loss + self.opts.align_weight * self.alignment_loss(captured["x"], captured["memory"], batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return loss.item()

    def alignment_loss(self, x: torch.Tensor, memory: torch.Tensor, batch: Batch) -> torch.Tensor:
        """−log a_j[gold_j] for the guided head: its attention row j should sit on target word j's source word."""
        attn = self.model.decoder[self.opts.align_layer].cross_attn
        h, d = self.opts.align_head, attn.d_model
        q = attn.split_heads(attn.q_proj(x))[:, h]  # (B, T, d_k)
        k = attn.split_heads(attn.kv_proj(memory)[..., :d])[:, h]  # (B, S, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(attn.d_head)  # (B, T, S)
        if batch.src_pad is not None:
            scores = scores.masked_fill(batch.src_pad[:, None, :], float("-inf"))
        logp = scores.log_softmax(-1)  # (B, T, S)
        return F.nll_loss(logp.reshape(-1, logp.shape[-1]), batch.alignment.reshape(-1), ignore_index=IGNORE)

    @torch.no_grad()
    def validate(self, examples: list[Example]) -> tuple[float, float]:
        """(cross-entropy without smoothing, token accuracy) under teacher forcing."""
        self.model.eval()
        total, correct, count = 0.0, 0, 0
        for idx in token_batches(examples, self.opts.batch_tokens * 2, random.Random(0)):
            batch = collate([examples[i] for i in idx], self.device)
            logits = self.model(batch.src, batch.tgt_in, batch.src_pad, batch.tgt_pad)  # (B, T, V)
            total += float(label_smoothed_loss(logits, batch.labels, 0.0)) * batch.n_tokens
            mask = batch.labels != IGNORE
            correct += int(((logits.argmax(-1) == batch.labels) & mask).sum())
            count += batch.n_tokens
        return total / max(count, 1), correct / max(count, 1)

    def exact_match(self, examples: list[Example]) -> float | None:
        if self.data.decoder_only or not examples:
            return None
        return exact_match(self.model, examples, self.device)

    def run(self, progress: bool = True, on_epoch_end=None) -> str:
        """Train until the epochs are done or a limit is reached; returns why it stopped."""
        opts = self.opts
        from tqdm import tqdm

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
                if opts.max_minutes is not None and (time.perf_counter() - start_time) / 60 >= opts.max_minutes:
                    stop = "max_minutes"
                    break
                batch = collate([self.data.train[i] for i in batches[self.batch_in_epoch]], self.device)
                losses.append(self.train_step(batch))
                tokens += batch.n_tokens
                self.batch_in_epoch += 1
                rate = tokens / max(time.perf_counter() - epoch_start, 1e-9)
                bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{rate:,.0f}", lr=f"{self.lr():.2e}", refresh=False)
                bar.update(1)
            bar.close()
            self.elapsed = start_elapsed + time.perf_counter() - start_time
            if stop != "finished":
                break
            seconds = time.perf_counter() - epoch_start
            valid_loss, valid_acc = self.validate(self.data.valid)
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
        return stop

    # ----- resume state: everything in safetensors + JSON, no pickle

    def state_dict_json(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best_valid": self.best_valid if math.isfinite(self.best_valid) else None,
                "history": self.history, "elapsed_seconds": self.elapsed, "options": self.opts.to_dict(),
                "param_groups": self.optimizer.state_dict()["param_groups"]}

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


def exact_match(model: Transformer, examples: list[Example], device: torch.device, batch_size: int = 256) -> float:
    """Share of examples whose greedy decode equals the gold target exactly."""
    hits = 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        batch = collate(chunk, device)
        longest = max(len(e.labels) for e in chunk) + 5
        rows = greedy_batch(model, batch.src, batch.src_pad, longest)
        hits += sum(row == e.labels[:-1] for row, e in zip(rows, chunk))
    return hits / len(examples)


# ---------------------------------------------------------------------------------------------- driver


def _finish(out: Path, valid_pairs, device: torch.device) -> dict:
    """Score the best checkpoint on the validation split; store its best-aligning layer in its config."""
    from .bundle import ModelBundle
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


def prepare(opts: TrainOptions, resume: str | Path | None = None) -> Trainer:
    """Data, model and trainer for `opts` — or, with `resume`, exactly where a saved run stopped."""
    device = resolve_device(opts.device)
    torch.set_num_threads(max(1, opts.threads))
    if resume is not None:
        state_dir = resume_dir(resume)
        model, src_tok, tgt_tok = load_checkpoint(state_dir, device)
        data = load_data(opts)
        if data.decoder_only:
            src_tok = tgt_tok = data.src_tokenizer
        else:  # the saved vocabularies, so ids mean what they meant
            data = _retokenize(opts, src_tok, tgt_tok)
        trainer = Trainer(model, data, opts, device)
        trainer.load_state(state_dir)
        return trainer
    torch.manual_seed(opts.seed)
    random.seed(opts.seed)
    data = load_data(opts)
    config = build_config(opts, data)
    model = Transformer(config).to(device)
    return Trainer(model, data, opts, device)


def _retokenize(opts: TrainOptions, src_tok: TextTokenizer, tgt_tok: TextTokenizer) -> TrainData:
    splits = tsv_splits(opts.data, opts.seed) if opts.data else task_splits(opts.task, opts.seed)
    return TrainData(_pair_examples(splits["train"], src_tok, tgt_tok), _pair_examples(splits["valid"], src_tok,
                     tgt_tok), src_tok, tgt_tok, test=_pair_examples(splits.get("test", []), src_tok, tgt_tok),
                     pairs=splits)


def resumed_options(resume: str | Path, overrides: dict) -> TrainOptions:
    """The saved run's options, with the ones given again on the command line (epochs, limits, device, out)."""
    meta = json.loads((resume_dir(resume) / STATE_FILE).read_text(encoding="utf-8"))
    data = dict(meta["options"])
    data.update({k: v for k, v in overrides.items() if v is not None})
    return TrainOptions.from_dict(data)


def train(opts: TrainOptions, resume: str | Path | None = None, progress: bool = True) -> dict:
    """Run training and write the best checkpoint (by validation loss) to opts.out; returns the summary."""
    trainer = prepare(opts, resume)
    out = Path(opts.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder.")
    if out.is_dir() and any(out.iterdir()) and not is_checkpoint(out) and resume is None:
        raise UserError(f"--out {out} is a folder with other files in it; choose an empty or new folder.")
    command = " ".join(["scratchformer"] + sys.argv[1:]) if sys.argv and "scratchformer" in sys.argv[0] else ""

    def summary(stop: str) -> dict:
        return {"command": command, "options": opts.to_dict(), "seed": opts.seed, "stopped": stop,
                "steps": trainer.step, "epochs_done": trainer.epoch, "wall_seconds": round(trainer.elapsed, 1),
                "best_valid_loss": trainer.best_valid if math.isfinite(trainer.best_valid) else None,
                "history": trainer.history, "data": trainer.data.description,
                "parameters": sum(p.numel() for p in trainer.model.parameters()),
                "torch_threads": torch.get_num_threads(), "device": str(trainer.device)}

    def on_epoch_end(t: Trainer, result: EpochResult) -> None:
        if result.valid_loss < t.best_valid:
            t.best_valid = result.valid_loss
            save_checkpoint(out, t.model, t.data.src_tokenizer, t.data.tgt_tokenizer,
                            extra_files={"training.json": json.dumps(summary("running"), indent=1,
                                                                     ensure_ascii=False) + "\n"})
        if opts.resume_state:
            t.save_state(out / RESUME_DIR)

    try:
        stop = trainer.run(progress, on_epoch_end)
    except KeyboardInterrupt:
        stop = "interrupted"
    if stop != "finished" and opts.resume_state:
        trainer.save_state(out / RESUME_DIR)
    if not is_checkpoint(out):  # stopped before the first validation: keep what there is
        save_checkpoint(out, trainer.model, trainer.data.src_tokenizer, trainer.data.tgt_tokenizer)
        if opts.resume_state:
            trainer.save_state(out / RESUME_DIR)
    result = summary(stop)
    if not trainer.data.decoder_only and trainer.data.pairs.get("valid"):
        result["final_valid"] = _finish(out, trainer.data.pairs["valid"], trainer.device)
    (out / "training.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if stop == "interrupted":
        raise KeyboardInterrupt
    return result
