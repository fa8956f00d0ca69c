"""What the experiments read from the text: the ids a model takes, with the window's rule for the decoder input
(a typed target is teacher forcing; without one, the model's own greedy output behind the start token)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UserError


@dataclass
class TextInput:
    src: torch.Tensor | None  # (1, S) ids, or None for a decoder-only model
    tgt: torch.Tensor | None  # (1, T) decoder input ids starting with the start token, or None (encoder-only)
    source_tokens: list[str]
    target_tokens: list[str]
    decoder_input: str  # "typed", "generated", "start_only" or "none" (bundle.Inputs.decoder_input)


def read_text(bundle, source: str, target: str | None = None) -> TextInput:
    """One sentence as the model reads it (UserError for empty text or text past the model's positions)."""
    inputs = bundle.prepare_run(source, target or "")
    dev = bundle.device
    src = inputs.src.to(dev) if inputs.src is not None else None
    tgt = inputs.tgt.to(dev) if inputs.tgt is not None else None
    return TextInput(src, tgt, inputs.source_tokens[0] if inputs.source_tokens else [],
                     inputs.target_tokens[0] if inputs.target_tokens else [], inputs.decoder_input)


def read_source(bundle, source: str) -> tuple[torch.Tensor, list[str]]:
    """An encoder-decoder's or encoder's source alone, for experiments that read only the encoder: (1, S) ids on
    the model's device and their tokens. No translation is made and no target is read."""
    inputs = bundle.prepare(source)
    return inputs.src.to(bundle.device), inputs.source_tokens[0]


def encoded(model, src: torch.Tensor | None) -> torch.Tensor | None:
    """The encoder output (1, S, d_model) of a source, or None without an encoder (no padding in one sentence)."""
    if src is None or not model.config.has_encoder:
        return None
    with torch.inference_mode():
        return model.encode(src)


def need_two_tokens(tokens: list[str], what: str) -> None:
    if len(tokens) < 2:
        raise UserError(f"The {what} needs at least two tokens; this input has {len(tokens)}. Type a longer "
                        "sentence (or a target).")  # fmt: skip


def special_ids(bundle, side: str) -> set[int]:
    """The pad, start and end ids of one side ("src" or "tgt"), the config's and the tokenizer's (the decoder's
    start token, bundle.start_id(), is one of them): tokens an experiment neither replaces nor draws."""
    c = bundle.config
    tok = bundle.src_tokenizer if side == "src" else bundle.tgt_tokenizer
    return {c.pad_id, c.bos_id, c.eos_id, tok.pad_id, tok.bos_id, tok.eos_id} - {None}


def replacement(bundle, side: str, old: int, gen: torch.Generator) -> int:
    """A seeded random id of that side's vocabulary other than `old` and the special tokens."""
    c = bundle.config
    vocab = c.src_vocab_size if side == "src" else c.tgt_vocab_size
    skip = special_ids(bundle, side) | {old}
    while True:
        new = int(torch.randint(vocab, (1,), generator=gen))
        if new not in skip:
            return new
