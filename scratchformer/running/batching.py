"""Batching: the walkthrough's windows of a text file (S tokens with stride 1, shifted behind the start token), and
examples of pairs padded into one batch (`collate`, which training and evaluation both use)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import UserError

MAX_TEXT_BYTES = 50 * 1024 * 1024
IGNORE = -100  # label value for padding: F.cross_entropy skips it


def read_text_file(path: str | Path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """A UTF-8 text file's contents, or UserError naming the problem (missing, binary, not UTF-8, too big)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"The file {path} does not exist.")
    if not path.is_file():
        raise UserError(f"{path} is not a file.")
    size = path.stat().st_size
    if size > max_bytes:
        raise UserError(f"{path} is {size / 2**20:.0f} MB; text files up to {max_bytes // 2**20} MB can be opened.")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise UserError(f"{path} looks like a binary file, not text.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (invalid byte at position {exc.start}).") from None
    if not text.strip():
        raise UserError(f"{path} is empty.")
    return text


def sliding_windows(ids: list[int], seq_len: int, batch: int, start_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder batch (B, S): windows ids[b : b+S]; decoder batch (B, S): the same windows shifted right
    behind `start_id` ([start, ids[b], …, ids[b+S-2]]) — teacher forcing on next-token prediction."""
    if seq_len < 1 or batch < 1:
        raise UserError("--seq-len and --batch must be at least 1.")
    needed = seq_len + batch - 1
    if len(ids) < needed:
        raise UserError(
            f"The text has {len(ids)} tokens; {batch} windows of {seq_len} tokens with stride 1 need {needed}."
        )
    src = torch.tensor([ids[b : b + seq_len] for b in range(batch)], dtype=torch.long)  # (B, S)
    start = torch.full((batch, 1), start_id, dtype=torch.long)
    tgt = torch.cat([start, src[:, :-1]], dim=1)  # (B, S)
    return src, tgt


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


def collate(examples: list[Example], device: torch.device, pad_id: int = 0) -> Batch:
    """Pad to the longest example; padding masks from the lengths (True at padding)."""
    b = len(examples)
    t = max(len(e.tgt_in) for e in examples)
    tgt_in = torch.full((b, t), pad_id, dtype=torch.long)
    labels = torch.full((b, t), IGNORE, dtype=torch.long)
    for i, e in enumerate(examples):
        tgt_in[i, : len(e.tgt_in)] = torch.tensor(e.tgt_in)
        labels[i, : len(e.labels)] = torch.tensor(e.labels)
    lengths = torch.tensor([len(e.tgt_in) for e in examples])  # (B,)
    tgt_pad = torch.arange(t)[None, :] >= lengths[:, None]  # (B, T): True past each decoder input's end
    src = src_pad = None
    if examples[0].src:
        s = max(len(e.src) for e in examples)
        src = torch.full((b, s), pad_id, dtype=torch.long)
        src_pad = torch.ones(b, s, dtype=torch.bool)
        for i, e in enumerate(examples):
            src[i, : len(e.src)] = torch.tensor(e.src)
            src_pad[i, : len(e.src)] = False
        src, src_pad = src.to(device), (src_pad.to(device) if bool(src_pad.any()) else None)
    n_tokens = int((labels != IGNORE).sum())  # a prompt without labels (training.sequences) is not counted
    alignment = None
    if any(e.alignment for e in examples):
        alignment = torch.full((b, t), IGNORE, dtype=torch.long)
        for i, e in enumerate(examples):
            if e.alignment:
                alignment[i, : len(e.alignment)] = torch.tensor(e.alignment)
        alignment = alignment.to(device)
    return Batch(src, src_pad, tgt_in.to(device), tgt_pad.to(device) if bool(tgt_pad.any()) else None,
                 labels.to(device), n_tokens, alignment)
