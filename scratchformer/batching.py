"""The walkthrough's batching of a text file: windows of S tokens with stride 1, shifted behind the start token."""

from __future__ import annotations

from pathlib import Path

import torch

from .errors import UserError

MAX_TEXT_BYTES = 50 * 1024 * 1024


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
