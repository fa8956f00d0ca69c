"""A corpus's activations at named steps, read in micro-batches through the same points a trace records.

Each input is tokenized as the window reads it (an encoder-decoder's decoder reads the corpus's target by teacher
forcing, or the model's own greedy translation where the corpus has none), padded into batches that fit the memory
budget, and run through the model with recording edits at the asked steps (scratchformer.patching.pair.recorders:
the forward pass is unchanged). Only real tokens' rows are kept: padding never enters a dictionary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from ..errors import UserError
from ..loading.memory import estimate_run
from ..patching.interventions import StepEdit, intervene
from ..patching.pair import recorders
from ..running.batching import IGNORE
from ..running.decoding import greedy_batch
from .points import position_dim

MAX_ITEMS = 128  # items per micro-batch, whatever the budget allows


@dataclass
class Text:
    source: str
    target: str | None = None
    ids: list[int] | None = None  # the decoder's tokens, when the model made them (its greedy translation)


@dataclass
class Batch:
    """Padded ids of a micro-batch: src (B, S) or None, tgt (B, T) or None, and what sits where."""

    src: torch.Tensor | None
    src_pad: torch.Tensor | None  # (B, S) True at padding
    tgt: torch.Tensor | None
    tgt_pad: torch.Tensor | None  # (B, T)
    labels: torch.Tensor | None  # (B, T) the next token at each decoder position, IGNORE at padding
    texts: list[Text]

    def real(self, dim: str) -> torch.Tensor:
        """(B, P) True at the real tokens of the side `dim` names ('src_pos' or 'tgt_pos')."""
        ids, pad = (self.src, self.src_pad) if dim == "src_pos" else (self.tgt, self.tgt_pad)
        return torch.ones_like(ids, dtype=torch.bool) if pad is None else ~pad


def default_corpus(model: str) -> str | None:
    """The corpus a model's dictionaries and cards read when none is named: a bundled task's model reads its own
    task ("task:en-hi"); other models have none."""
    from ..tasks import TASKS

    return f"task:{model}" if model in TASKS else None


def corpus_texts(spec: str, limit: int | None = None) -> list[Text]:
    """The corpus `spec` names (scratchformer.datasets.corpus.read_corpus; `task:NAME` gives a bundled task's
    training pairs, targets included)."""
    if spec.startswith("task:"):
        from ..tasks import TASKS, load_task_splits

        name = spec.removeprefix("task:")
        if name not in TASKS:
            raise UserError(f"--corpus {spec}: there is no bundled task {name!r}; the tasks are "
                            f"{', '.join('task:' + t for t in TASKS)}.")  # fmt: skip
        pairs = load_task_splits(name)["train"][:limit]
        return [Text(p.source, p.target) for p in pairs]
    from ..datasets.corpus import read_corpus

    return [Text(s) for s in read_corpus(spec, limit)]


def _pad(rows: list[list[int]], pad_id: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    n = max(len(r) for r in rows)
    # a model without a padding token (GPT-2) gets 0 there: the mask hides those positions and their rows are dropped
    ids = torch.full((len(rows), n), 0 if pad_id is None else pad_id, dtype=torch.long)
    pad = torch.ones(len(rows), n, dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        pad[i, : len(r)] = False
    return ids, (pad if bool(pad.any()) else None)


def encode_batch(bundle, texts: list[Text]) -> Batch:
    """Token ids of `texts` as the window reads them, padded. The decoder reads [start] + target (or the model's
    greedy output when there is no target), and each position's label is the token after it."""
    c = bundle.config
    src = src_pad = tgt = tgt_pad = labels = None
    limit = c.max_len
    if c.has_encoder:
        rows = [bundle.encode_source(t.source, truncate=True) or [c.pad_id] for t in texts]
        src, src_pad = _pad(rows, c.pad_id)
    if not c.has_decoder:
        return Batch(src, src_pad, None, None, None, texts)
    start, end, prefix = bundle.start_id(), bundle.end_id(), bundle.target_prefix()
    tok = bundle.tgt_tokenizer
    if c.has_encoder:
        missing = [i for i, t in enumerate(texts) if not t.target]
        if missing:  # the model's own translation, greedily, for the inputs without a target
            sub = src[missing].to(bundle.device)
            sub_pad = src_pad[missing].to(bundle.device) if src_pad is not None else None
            made = greedy_batch(bundle, sub, sub_pad, max_len=min(bundle.generation_limit(sub.shape[1]), limit - 2))
            for i, ids in zip(missing, made):
                texts[i] = Text(texts[i].source, None, ids)
        bodies = [t.ids if t.ids is not None else tok.encode(t.target or "") for t in texts]
    else:
        bodies = [tok.encode(t.source) for t in texts]
    bodies = [b[: max(limit - 1 - len(prefix), 1)] for b in bodies]
    tgt, tgt_pad = _pad([[start, *prefix, *b] for b in bodies], c.pad_id)
    label_rows = [[*prefix, *b] + ([end] if end is not None else []) for b in bodies]  # the token after each
    labels = torch.full(tgt.shape, IGNORE, dtype=torch.long)
    for i, r in enumerate(label_rows):
        labels[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return Batch(src, src_pad, tgt, tgt_pad, labels, texts)


def items_per_batch(bundle, texts: list[Text], budget: int) -> int:
    """How many inputs one micro-batch takes within `budget` bytes (a trace's estimate, which over-counts an
    untraced pass), at most MAX_ITEMS."""
    c = bundle.config
    longest = max(len(t.source.split()) + len((t.target or "").split()) for t in texts[:512]) + 4
    one = estimate_run(c, 1, longest, longest, 0, cache_bytes=0)
    per_item = one.held + one.working  # what grows with the batch (the runtime itself does not)
    return int(max(1, min(MAX_ITEMS, budget // max(per_item, 1))))


def forward(bundle, batch: Batch) -> torch.Tensor | None:
    """The model's logits (B, T, vocab) for a batch (None for a model without a decoder); interventions that are
    active apply."""
    dev = bundle.device
    to = (lambda t: None if t is None else t.to(dev))  # noqa: E731
    model = bundle.model
    if not bundle.config.has_decoder:
        model.encode(to(batch.src), to(batch.src_pad))
        return None
    return model(to(batch.src), to(batch.tgt), to(batch.src_pad), to(batch.tgt_pad))


def batches(bundle, texts: list[Text], budget: int) -> Iterator[Batch]:
    n = items_per_batch(bundle, texts, budget)
    for a in range(0, len(texts), n):
        yield encode_batch(bundle, texts[a : a + n])


def collect(bundle, batch: Batch, steps: list[str], edits: list[StepEdit] = ()) -> dict[str, torch.Tensor]:
    """Step → (real tokens, d) rows of this batch's activations at each of `steps` (padding dropped), recorded as the
    pass goes through them; `edits` apply too (a spliced-in reconstruction)."""
    kept, recs = recorders(steps)
    with torch.inference_mode(), intervene(bundle.model, [*recs, *edits]):
        forward(bundle, batch)
    out = {}
    for s in steps:
        if s not in kept:
            raise UserError(f"The forward pass never reached {s}: a dictionary reads a step every input goes through.")
        t = kept[s]
        if t.dim() != 3:
            raise UserError(f"{s} has dims of shape {tuple(t.shape)}; a dictionary reads a step with one vector per "
                            "token (batch × position × width), such as a sublayer's output.")  # fmt: skip
        real = batch.real(position_dim(s)).to(t.device)
        out[s] = t[real].float().cpu()  # (real tokens, d)
    return out


def gather(bundle, texts: list[Text], steps: list[str], budget: int, max_tokens: int | None = None,
           progress: Callable[[int, int], None] | None = None, cancelled: Callable[[], bool] | None = None
           ) -> dict[str, torch.Tensor] | None:  # fmt: skip
    """Every step's activations over the corpus, (tokens, d) each, stopping after `max_tokens` rows; None when
    cancelled. progress(done inputs, total inputs) after each micro-batch."""
    parts: dict[str, list[torch.Tensor]] = {s: [] for s in steps}
    done = rows = 0
    for batch in batches(bundle, texts, budget):
        if cancelled is not None and cancelled():
            return None
        got = collect(bundle, batch, steps)
        for s in steps:
            parts[s].append(got[s])
        rows += len(got[steps[0]])
        done += len(batch.texts)
        if progress is not None:
            progress(done, len(texts))
        if max_tokens is not None and rows >= max_tokens:
            break
    if not rows:
        raise UserError("The corpus gave no tokens to learn from.")
    return {s: torch.cat(p)[:max_tokens] for s, p in parts.items()}
