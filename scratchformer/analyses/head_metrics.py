"""Head metrics over training: when does each attention head learn its job?

For every checkpoint of a model — its training snapshots then the final model, or the step revisions of a
Hugging Face model kept in the local cache (Pythia's `step1000`, …) — and every head of every attention, three
numbers on the same input:

- entropy: the mean over query rows (padding left out) of H(row) = −Σ_k a_k ln a_k, in nats. A head that spreads
  its weight evenly over K keys has ln K; one that looks at a single key has 0.
- alignment (cross-attention, where the task has a gold alignment: en-hi, copy, reverse, sort): the share of
  target words whose row — the decoder position that emits the word — has its largest weight on the gold source
  word, as `scratchformer evaluate` scores it.
- importance: how much the mean probability of the chosen next tokens falls when the head is zeroed
  (scratchformer.patching.head_importance); only for models with a decoder.

The input: by default the first pairs of the model's task's validation split (gold targets, by teacher forcing,
with their gold alignments); or one sentence (--source), which every checkpoint reads with the same decoder
input: a typed target, else the final model's own translation, as the Training view does.

    compute(spec, pairs=None, source=None, …, progress, cancelled) → HeadMetrics (None when cancelled);
    `scratchformer head-metrics --model M [--source S] [--json]`
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

from ..errors import UserError
from ..patching.head_importance import head_importance
from ..recording.trace import tracing
from ..tasks import Pair

DEFAULT_PAIRS = 32
TYPES = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
CROSS = "decoder.cross_attn"


@dataclass
class Checkpoint:
    """One point of training: what load_model opens, and what the training record says about it."""

    label: str  # 'step 64', 'final', 'step1000'
    step: int | None  # optimizer updates done (None where unknown)
    spec: str  # 'en-hi@step-000064', 'en-hi', or a Hugging Face snapshot folder
    valid_loss: float | None = None
    train_loss: float | None = None
    final: bool = False


@dataclass
class HeadMetrics:
    model: str
    checkpoints: list[Checkpoint]
    entropy: dict[str, np.ndarray]  # attention type → (checkpoints, layers, heads), nats
    alignment: dict[str, np.ndarray]  # 'decoder.cross_attn' → (checkpoints, layers, heads) in [0, 1]; {} if none
    importance: dict[str, np.ndarray]  # attention type → (checkpoints, layers, heads); {} without a decoder
    input: str  # what every checkpoint read, for people
    n_pairs: int
    n_aligned_words: int = 0  # target words the alignment was scored on
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[int | None]:
        return [c.step for c in self.checkpoints]

    def to_dict(self) -> dict:
        lists = lambda d: {k: v.tolist() for k, v in d.items()}  # noqa: E731
        return {"model": self.model, "input": self.input, "n_pairs": self.n_pairs,
                "checkpoints": [{"label": c.label, "step": c.step, "spec": c.spec, "valid_loss": c.valid_loss,
                                 "train_loss": c.train_loss, "final": c.final} for c in self.checkpoints],
                "entropy": lists(self.entropy), "alignment": lists(self.alignment),
                "importance": lists(self.importance), "n_aligned_words": self.n_aligned_words,
                "notes": self.notes}  # fmt: skip


# --- which checkpoints -------------------------------------------------------------------------------------------

_REVISION_STEP = re.compile(r"step-?(\d+)")


def checkpoints_of(spec: str) -> list[Checkpoint]:
    """The checkpoints of a model spec in training order: a scratchformer model's snapshots then the final model,
    or the cached step revisions of a Hugging Face id. UserError (one sentence) when there are none to follow."""
    from ..loading.bundle import snapshots_of, split_snapshot
    from ..loading.hf_cache import looks_like_id, revisions
    from ..plotdata.training import training_record

    base, _ = split_snapshot(spec)
    snaps = snapshots_of(base)
    if snaps:
        record = training_record(base) or {}
        total = record.get("steps") if isinstance(record.get("steps"), int) else None
        final_valid = None
        curve = [e for e in record.get("curve") or [] if isinstance(e, dict) and "valid_loss" in e]
        if curve and curve[-1].get("step") == total:
            final_valid = curve[-1]["valid_loss"]
        points = [Checkpoint(f"step {s.step}", s.step, s.spec, s.valid_loss, s.train_loss) for s in snaps]
        if total is None or total != snaps[-1].step:  # the final model, unless the last snapshot is it
            points.append(Checkpoint("final", total, base, final_valid, final=True))
        return points
    if looks_like_id(base):
        found = []
        for name, folder in revisions(base).items():
            m = _REVISION_STEP.fullmatch(name)
            if m:
                found.append(Checkpoint(name, int(m.group(1)), str(folder)))
        if len(found) >= 2:
            return sorted(found, key=lambda c: c.step)
        raise UserError(f"{base} has {len(found)} step revision(s) in the Hugging Face cache, and head metrics over "
                        "training need at least two: download more with `hf download " + base + " --revision "
                        "step1000` (and so on).")  # fmt: skip
    raise UserError(f"{base} has no training snapshots, so there is nothing to follow over training; use a model "
                    "trained with `scratchformer train --snapshots N` (the bundled en-hi, copy and reverse keep "
                    "theirs) or a Hugging Face id with several step revisions in the cache.")  # fmt: skip


def _open(point: Checkpoint, model: str, device):
    from ..experiments.snapshots import load

    try:
        return load(point.spec, device)
    except UserError as exc:
        raise UserError(f"The {point.label} checkpoint of {model} cannot be opened ({str(exc).rstrip('.')}); "
                        "delete that snapshot folder or train again with --snapshots to measure the rest.") from None


# --- the input ---------------------------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _task_splits(task: str, seed: int) -> dict:
    from ..training.data import task_splits

    return task_splits(task, seed)


def gold_alignment(config, source: str, target: str) -> tuple[int, ...]:
    """The gold alignment of a pair of the model's task (copy/reverse/sort by their rule; en-hi when the pair is
    one of the task's), else ()."""
    task = config.extra.get("task")
    if task in ("copy", "reverse", "sort"):
        from ..tasks.algorithmic import DEFAULT_ALPHABET, _order

        tokens = source.split()
        if all(t in DEFAULT_ALPHABET for t in tokens):
            order = _order(task, tokens, DEFAULT_ALPHABET)
            if " ".join(tokens[i] for i in order) == " ".join(target.split()):
                return tuple(order)
        return ()
    if task == "en-hi":
        for split in _task_splits(task, int(config.extra.get("seed", 0))).values():
            for p in split:
                if p.source == " ".join(source.split()) and p.target == " ".join(target.split()):
                    return p.alignment
    return ()


def task_pairs(config, n: int = DEFAULT_PAIRS) -> list[Pair]:
    """The first n validation pairs of the model's task; [] for a model trained on none."""
    task, seed = config.extra.get("task"), int(config.extra.get("seed", 0))
    if task == "en-hi":  # the valid split is the first pairs the grammar writes: make only those (not all 22,000)
        from ..tasks.en_hi import FIXED_PAIRS, make_splits

        return make_splits(seed, n_train=len(FIXED_PAIRS), n_valid=n, n_test=0)["valid"]
    if task not in ("copy", "reverse", "sort"):
        return []
    return list(_task_splits(task, seed)["valid"][:n])


def _batch(bundle, pairs: list[Pair]):
    """(src, src_pad, tgt, tgt_pad, gold) on the model's device: gold[i] is pair i's alignment shifted to source
    token positions, or None where its words are not one token each."""
    c, dev = bundle.config, bundle.device
    src_rows, tgt_rows, gold = [], [], []
    shift = len(bundle._special("src_prefix", bundle.src_tokenizer))
    for p in pairs:
        if c.has_encoder:
            src_rows.append(bundle.encode_source(p.source, truncate=True))
        if c.has_decoder:
            text = p.target if c.has_encoder else p.source
            words = bundle.tgt_tokenizer.encode(text)[: c.max_len - 1]
            tgt_rows.append([bundle.start_id()] + words)
            one_to_one = (c.has_encoder and len(words) == len(p.target.split())
                          and len(bundle.src_tokenizer.encode(p.source)) == len(p.source.split()))  # fmt: skip
            gold.append([a + shift for a in p.alignment] if p.alignment and one_to_one else None)

    def padded(rows):
        if not rows:
            return None, None
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [c.pad_id or 0] * (width - len(r)) for r in rows], dtype=torch.long)  # (B, L)
        pad = torch.tensor([[False] * len(r) + [True] * (width - len(r)) for r in rows])  # (B, L)
        return ids.to(dev), (pad.to(dev) if bool(pad.any()) else None)

    src, src_pad = padded(src_rows)
    tgt, tgt_pad = padded(tgt_rows)
    return src, src_pad, tgt, tgt_pad, gold


def entropy_per_head(weights: torch.Tensor, query_pad: torch.Tensor | None) -> np.ndarray:
    """weights (B, H, Q, K) → (H,) the mean entropy (nats) of the rows of real (not padding) queries."""
    w = weights.double()
    h = -(w * torch.where(w > 0, w.log(), torch.zeros_like(w))).sum(-1)  # (B, H, Q); 0 · ln 0 = 0
    real = torch.ones(h.shape[0], h.shape[2], dtype=torch.bool) if query_pad is None else ~query_pad.cpu()  # (B, Q)
    mask = real[:, None, :].expand_as(h)  # (B, H, Q)
    return ((h * mask).sum((0, 2)) / mask.sum((0, 2)).clamp(min=1)).numpy()


def alignment_per_head(weights: torch.Tensor, gold: list[list[int] | None]) -> tuple[np.ndarray, int]:
    """Cross-attention weights (B, H, T, S) → ((H,) share of gold target words whose row's argmax is the gold
    source token, words scored). Row j of the decoder emits target word j (its input is word j − 1)."""
    hits = np.zeros(weights.shape[1])
    n = 0
    for i, g in enumerate(gold):
        if not g:
            continue
        rows = weights[i, :, : len(g)]  # (H, words, S)
        hits += (rows.argmax(-1) == torch.tensor(g)[None]).sum(-1).numpy()
        n += len(g)
    return (hits / n if n else hits), n


def measure(bundle, pairs: list[Pair], cancelled: Callable[[], bool] | None = None):
    """One model's (entropy, alignment, importance, words scored) on the pairs, each type → (layers, heads).
    None when cancelled."""
    model, c = bundle.model, bundle.config
    src, src_pad, tgt, tgt_pad, gold = _batch(bundle, pairs)
    with torch.inference_mode(), tracing() as tracer:
        model(src, tgt, src_pad, tgt_pad)
    maps = {s.name: s.tensor for s in tracer.steps if s.kind == "attention_weights"}
    entropy: dict[str, list] = {}
    alignment: dict[str, list] = {}
    n_words = 0
    for name, w in maps.items():  # 'decoder.1.cross_attn.weights': (B, H, Q, K)
        stack, _, kind = name.split(".")[:3]
        key = f"{stack}.{kind}"
        entropy.setdefault(key, []).append(entropy_per_head(w, src_pad if stack == "encoder" else tgt_pad))
        if key == CROSS and any(gold):
            share, n_words = alignment_per_head(w, gold)
            alignment.setdefault(key, []).append(share)
    stacked = lambda d: {k: np.stack(v) for k, v in d.items()}  # noqa: E731  (layers, heads)
    importance = {}
    if c.has_decoder and tgt is not None and tgt.shape[1] >= 2:
        result = head_importance(model, src, tgt, src_pad, tgt_pad, cancelled=cancelled)
        if result is None:
            return None
        importance = result.drops
    return stacked(entropy), stacked(alignment), importance, n_words


def compute(spec: str, pairs: list[Pair] | None = None, source: str | None = None, target: str = "",
            device: str = "cpu", n_pairs: int = DEFAULT_PAIRS,
            progress: Callable[[int, int], None] | None = None,
            cancelled: Callable[[], bool] | None = None) -> HeadMetrics | None:  # fmt: skip
    """Head metrics at every checkpoint of `spec`. The input: `pairs`; else `source` (with `target`, or the final
    model's translation); else the first n_pairs validation pairs of the model's task. progress(done, total) after
    each checkpoint; None as soon as cancelled() is true."""
    from ..loading.bundle import split_snapshot

    base, _ = split_snapshot(spec)
    points = checkpoints_of(base)
    final = _open(points[-1], base, device)
    notes: list[str] = []
    if pairs is None and source is not None:
        if not target.strip() and final.can_generate:
            target = final.prepare_run(source).translation
            notes.append(f"Every checkpoint reads the final model's translation “{target}” as decoder input.")
        pairs = [Pair(" ".join(source.split()), " ".join(target.split()),
                      gold_alignment(final.config, source, target) if final.can_generate and target else ())]
        described = f"“{source}”" + (f" → “{target}”" if target else "")
    elif pairs is None:
        pairs = task_pairs(final.config, n_pairs)
        if not pairs:
            raise UserError(f"{base} was not trained on a built-in task, so give the sentence to measure on with "
                            "--source.")
        described = f"the first {len(pairs)} validation pairs of the {final.config.extra['task']} task (gold targets)"
    else:
        described = f"{len(pairs)} pairs"
    if not pairs:
        raise UserError("There is no input to measure the heads on; give a sentence with --source.")
    per_point = []
    for done, point in enumerate(points):
        if cancelled is not None and cancelled():
            return None
        bundle = final if point is points[-1] else _open(point, base, device)
        measured = measure(bundle, pairs, cancelled)
        if measured is None:
            return None
        per_point.append(measured)
        if progress is not None:
            progress(done + 1, len(points))
    join = lambda i: {k: np.stack([m[i][k] for m in per_point]) for k in per_point[-1][i]}  # noqa: E731
    alignment = join(1) if all(m[1] for m in per_point) else {}
    if final.can_generate and not alignment:
        notes.append("No gold alignment is known for this input, so the heads' alignment is not measured (the "
                     "en-hi, copy, reverse and sort tasks have one).")
    return HeadMetrics(base, points, join(0), alignment, join(2) if all(m[2] for m in per_point) else {}, described,
                       len(pairs), per_point[-1][3], notes)  # fmt: skip


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    from ..commands.common import add_model_args

    p = sub.add_parser("head-metrics", help="each head's entropy, alignment and importance at every training snapshot",
                       description="For every training snapshot of a model (then the final model), or every cached "
                       "step revision of a Hugging Face model: each attention head's mean entropy, its alignment "
                       "with the gold alignment where the task has one, and its importance (the fall in the chosen "
                       "tokens' probability when it is zeroed).")  # fmt: skip
    add_model_args(p)
    p.add_argument("--source", help="one sentence to measure on (default: the first validation pairs of the "
                   "model's task)")
    p.add_argument("--target", default="", help="with --source: the decoder input (default: the final model's "
                   "translation)")
    p.add_argument("--pairs", type=int, default=DEFAULT_PAIRS,
                   help=f"without --source: how many validation pairs (default {DEFAULT_PAIRS})")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    from ..commands.common import print_result
    from ..loading.bundle import default_model_name

    if args.pairs < 1:
        raise UserError(f"--pairs must be at least 1, not {args.pairs}.")

    def tell(done: int, total: int) -> None:
        print(f"checkpoint {done} of {total} measured", file=sys.stderr)

    result = compute(args.model or default_model_name(), source=args.source, target=args.target,
                     device=args.device, n_pairs=args.pairs, progress=None if args.json else tell)  # fmt: skip
    return print_result(args.json, result.to_dict(), lambda: text_report(result))


def text_report(m: HeadMetrics) -> str:
    """Per attention type and metric: a row per checkpoint, a column per layer and head."""
    lines = [f"{m.model}: head metrics over training on {m.input}"]
    for metric, values, fmt in (("entropy (nats)", m.entropy, "{:6.3f}"), ("alignment", m.alignment, "{:6.1%}"),
                                ("importance", m.importance, "{:+6.1%}")):  # fmt: skip
        for kind, arr in values.items():
            _, layers, heads = arr.shape
            cols = "  ".join(f"L{li + 1}H{h + 1:<3}" for li in range(layers) for h in range(heads))
            lines.append(f"{kind} {metric}:")
            lines.append(f"  {'checkpoint':<12}  {cols}")
            for c, row in zip(m.checkpoints, arr):
                lines.append(f"  {c.label:<12}  " + "  ".join(fmt.format(v) for v in row.ravel()))
    lines += [f"note: {n}" for n in m.notes]
    return "\n".join(lines)
