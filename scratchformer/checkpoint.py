"""Checkpoints: one directory with config.json, model.safetensors and the tokenizers — no pickle, no code."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from .config import TransformerConfig
from .errors import UserError
from .model import Transformer
from .tokenizers import TextTokenizer, gpt2_tokenizer

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
SRC_TOK, TGT_TOK = "src_tokenizer", "tgt_tokenizer"


def is_checkpoint(path: str | Path) -> bool:
    path = Path(path)
    return (path / CONFIG).is_file() and (path / WEIGHTS).is_file() and not is_hf_config(path / CONFIG)


def is_hf_config(config_path: Path) -> bool:
    """A Hugging Face config.json names its architecture in "model_type"; ours never does."""
    try:
        return "model_type" in json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def save_checkpoint(
    directory: str | Path,
    model: Transformer,
    src_tokenizer: TextTokenizer | None,
    tgt_tokenizer: TextTokenizer | None,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write the checkpoint to a temporary sibling, then rename it into place (never half a checkpoint)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        model.config.save(tmp / CONFIG)
        save_model(model, str(tmp / WEIGHTS))
        for sub, tok in ((SRC_TOK, src_tokenizer), (TGT_TOK, tgt_tokenizer)):
            if tok is not None and tok.kind != "gpt2-bpe":  # GPT-2's vocabulary ships with the package
                tok.save(tmp / sub)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(directory, old)
            os.replace(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def load_checkpoint(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[Transformer, TextTokenizer, TextTokenizer]:
    """(model in eval mode, source tokenizer, target tokenizer); UserError with one sentence if anything is off."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory} is not a folder.")
    for required in (CONFIG, WEIGHTS):
        if not (directory / required).is_file():
            raise UserError(f"{directory} is not a scratchformer checkpoint: {required} is missing.")
    config = TransformerConfig.load(directory / CONFIG)
    model = Transformer(config)
    try:
        missing, unexpected = load_model(model, str(directory / WEIGHTS), strict=False, device=str(device))
    except (SafetensorError, OSError, ValueError) as exc:
        raise UserError(f"The weights in {directory / WEIGHTS} cannot be read (the file is damaged): {exc}.") from exc
    except RuntimeError as exc:  # shape mismatch
        first = str(exc).strip().splitlines()[-1].strip()
        raise UserError(f"The weights in {directory} do not fit its config.json: {first}") from exc
    if missing or unexpected:
        names = sorted(missing)[:3] if missing else sorted(unexpected)[:3]
        what = f"{'missing' if missing else 'unexpected'} {', '.join(names)}"
        raise UserError(f"The weights in {directory} do not match its config.json ({what}).")
    model.to(device).eval()
    src = _load_tokenizer(directory / SRC_TOK)
    tgt = _load_tokenizer(directory / TGT_TOK) if (directory / TGT_TOK).is_dir() else src
    return model, src, tgt


def _load_tokenizer(path: Path) -> TextTokenizer:
    return TextTokenizer.load(path) if path.is_dir() else gpt2_tokenizer()
