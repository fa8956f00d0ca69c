"""Training data: examples and padded batches, from a built-in task, a TSV of pairs or a plain text file."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..loading.tokenizers import GPT2_EOT, TextTokenizer, gpt2_tokenizer, word_level_tokenizer
from ..running.batching import Batch as Batch  # Example, Batch and collate live with the batching; re-exported
from ..running.batching import Example, read_text_file, sliding_windows
from ..running.batching import collate as collate


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
    from ..tasks import load_task_splits

    try:
        return load_task_splits(task, seed)
    except ValueError as exc:
        raise UserError(f"{str(exc).rstrip('.')}.") from None


def tsv_splits(path: str | Path, seed: int, valid_fraction: float = 0.1) -> dict:
    """A user's TSV: a seeded 90/10 train/valid split (no test split)."""
    from ..tasks import read_pairs_tsv

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
