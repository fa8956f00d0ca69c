"""Checkpoints: one directory with config.json, model.safetensors and the tokenizers — no pickle, no code.

A training run's snapshots (`train --snapshots N`) are checkpoints too, in `<out>/snapshots/step-NNNNNN/`: config.json
and model.safetensors only (float32; float16 or 8-bit rows with `--snapshot-dtype float16|int8`, see quantize.py;
both loaded back as float32). They share the tokenizers of the run's folder, which load_checkpoint finds two levels up.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from ..errors import UserError
from ..transformer.config import TransformerConfig
from ..transformer.model import Transformer
from .quantize import is_int8, load_int8, save_int8
from .tokenizers import TextTokenizer, gpt2_tokenizer

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
SRC_TOK, TGT_TOK = "src_tokenizer", "tgt_tokenizer"
SNAPSHOTS = "snapshots"  # <out>/snapshots/step-NNNNNN/: a training run's snapshots
_SNAPSHOT_NAME = re.compile(r"step-(\d+)")


def snapshot_name(step: int) -> str:
    """The folder name of the snapshot taken after `step` optimizer updates: step-000120."""
    return f"step-{step:06d}"


def snapshot_dirs(directory: str | Path) -> dict[int, Path]:
    """The training snapshots kept in a checkpoint folder (step → folder), by step; {} when there are none."""
    root = Path(directory) / SNAPSHOTS
    if not root.is_dir():
        return {}
    found = {}
    for path in root.iterdir():
        match = _SNAPSHOT_NAME.fullmatch(path.name)
        if match and is_checkpoint(path):
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


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
    keep: tuple[str, ...] = (),
    dtype: torch.dtype | None = None,
    config_extra: dict | None = None,
) -> Path:
    """Write the checkpoint to a temporary sibling, then rename it into place (never half a checkpoint).

    `keep`: entries of an existing `directory` that move into the new one (a run's resume/ and snapshots/);
    everything else in it is replaced. `dtype`: store the floating-point weights in this type (float16 halves
    the file; torch.int8 quarters it, one scale per row, see quantize.py; load_checkpoint reads either back into
    the float32 model). `config_extra`: facts added to the saved config's `extra` (not to the model's own config).
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        config = model.config
        if config_extra:
            config = copy.copy(config)
            config.extra = {**model.config.extra, **config_extra}
        config.save(tmp / CONFIG)
        if dtype == torch.int8:
            save_int8(model, tmp / WEIGHTS)
        elif dtype is not None and any(p.dtype != dtype for p in model.parameters()):
            # deepcopy keeps tied weights tied
            save_model(copy.deepcopy(model).to(device="cpu", dtype=dtype), str(tmp / WEIGHTS))
        else:
            save_model(model, str(tmp / WEIGHTS))
        for sub, tok in ((SRC_TOK, src_tokenizer), (TGT_TOK, tgt_tokenizer)):
            if tok is not None and tok.kind != "gpt2-bpe":  # GPT-2's vocabulary ships with the package
                tok.save(tmp / sub)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        for name in keep:
            if (directory / name).exists() and not (tmp / name).exists():
                os.replace(directory / name, tmp / name)
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
        weights = str(directory / WEIGHTS)
        if is_int8(weights):
            missing, unexpected = load_int8(model, weights)
        else:
            missing, unexpected = load_model(model, weights, strict=False, device=str(device))
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
    tokenizers = _tokenizer_home(directory)
    src = _load_tokenizer(tokenizers / SRC_TOK)
    tgt = _load_tokenizer(tokenizers / TGT_TOK) if (tokenizers / TGT_TOK).is_dir() else src
    return model, src, tgt


def _tokenizer_home(directory: Path) -> Path:
    """Where a checkpoint's tokenizers are: its own folder, or — for a training snapshot without tokenizers of
    its own (<out>/snapshots/step-NNNNNN/) — the run's folder <out>."""
    if (directory / SRC_TOK).is_dir() or directory.parent.name != SNAPSHOTS:
        return directory
    run = directory.parent.parent
    return run if (run / SRC_TOK).is_dir() else directory


def _load_tokenizer(path: Path) -> TextTokenizer:
    return TextTokenizer.load(path) if path.is_dir() else gpt2_tokenizer()
