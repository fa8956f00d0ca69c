"""A model with its tokenizers, found by name (preset, bundled model) or path; and text → model inputs.

A model spec may end in `@step-NNNNNN` to pick one of a trained model's snapshots (`train --snapshots N`):
`reverse@step-000120`, `runs/copy@step-000033`. Everything that takes a spec (load_model, examples_of) reads it.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import UserError
from ..running.examples import Example, examples_for
from ..transformer.config import PRESETS, preset
from ..transformer.model import Transformer
from . import hf_cache
from .checkpoint import SNAPSHOTS, is_checkpoint, is_hf_config, load_checkpoint, snapshot_dirs, snapshot_name
from .device import resolve_device

# the opened model and a run's inputs live in model_bundle.py (the importers build them); their names stay here too
from .model_bundle import GENERATION_CAP, Inputs, ModelBundle, lost_note, visible  # noqa: F401
from .tokenizers import gpt2_tokenizer

DEFAULT_MODEL = "en-hi"


def resources_dir() -> Path:
    return Path(str(importlib.resources.files("resources")))


def bundled_models() -> dict[str, Path]:
    """Trained models shipped in resources/models/<name>/ (name → directory)."""
    root = resources_dir() / "models"
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if is_checkpoint(p)}


def model_names() -> list[str]:
    """Bundled models first (the default among them first), then presets."""
    bundled = sorted(bundled_models(), key=lambda n: (n != DEFAULT_MODEL, n))
    return bundled + list(PRESETS)


def default_model_name() -> str:
    names = bundled_models()
    return DEFAULT_MODEL if DEFAULT_MODEL in names else (next(iter(names), "blog"))


_SNAPSHOT_SPEC = re.compile(r"(?P<base>.+)@step-(?P<step>\d+)")


def split_snapshot(spec: str) -> tuple[str, int | None]:
    """"reverse@step-000120" → ("reverse", 120); a spec without `@step-N` (or an existing folder whose own name
    ends so) → (spec, None)."""
    spec = (spec or "").strip()
    match = _SNAPSHOT_SPEC.fullmatch(spec)
    if match is None or spec in bundled_models() or Path(spec).expanduser().exists():
        return spec, None
    return match.group("base").strip(), int(match.group("step"))


@dataclass(frozen=True)
class Snapshot:
    """One training snapshot of a model, with what training.json says about that point of training."""

    step: int  # optimizer updates done when it was taken
    spec: str  # what --model and load_model take: "reverse@step-000120"
    path: Path
    train_loss: float | None = None  # mean training loss over the steps just before it
    valid_loss: float | None = None  # validation cross-entropy (no label smoothing), teacher forcing
    valid_token_accuracy: float | None = None


def _trained_dir(base: str) -> Path | None:
    """The checkpoint folder a spec names (bundled model or path), or None."""
    path = bundled_models().get(base) or Path(base).expanduser()
    return path if is_checkpoint(path) else None


def snapshots_of(spec: str) -> list[Snapshot]:
    """The training snapshots of a bundled model or checkpoint folder (a spec's `@step-N` is ignored), by step;
    [] for presets, imported models and checkpoints trained without --snapshots."""
    base, _ = split_snapshot(spec)
    directory = _trained_dir(base)
    if directory is None:
        return []
    try:
        record = json.loads((directory / "training.json").read_text(encoding="utf-8"))
        info = {int(s["step"]): s for s in record.get("snapshots", []) if isinstance(s, dict) and "step" in s}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        info = {}

    def number(entry: dict, key: str) -> float | None:
        value = entry.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    return [Snapshot(step, f"{base}@{snapshot_name(step)}", path, number(info.get(step, {}), "train_loss"),
                     number(info.get(step, {}), "valid_loss"), number(info.get(step, {}), "valid_token_accuracy"))
            for step, path in snapshot_dirs(directory).items()]


def _snapshot_dir(base: str, step: int) -> Path:
    """The folder of snapshot `step` of the model `base`; UserError with one sentence when there is none."""
    if base in PRESETS:
        raise UserError(f"The preset {base!r} has random weights and no training snapshots; @step-N picks a "
                        "snapshot of a trained model (a bundled one or a folder written by scratchformer train).")
    directory = _trained_dir(base)
    if directory is None:
        path = Path(base).expanduser()
        if path.is_dir() and is_hf_config(path / "config.json"):
            raise UserError(f"{base} is a Hugging Face model folder, which has no scratchformer training snapshots.")
        if path.exists():
            raise UserError(f"{base} is not a scratchformer checkpoint folder, so it has no training snapshots.")
        raise UserError(f"Unknown model {base!r} in {base}@{snapshot_name(step)}: not a bundled model or an existing "
                        f"folder ({', '.join(sorted(bundled_models()))}).")
    found = snapshot_dirs(directory)
    if step in found:
        return found[step]
    if not found:
        raise UserError(f"{base} has no training snapshots (a model trained with `scratchformer train --snapshots N` "
                        f"keeps them in {directory / 'snapshots'}).")
    steps = [str(s) for s in found]
    listed = ", ".join(steps[:-1]) + f" and {steps[-1]}" if len(steps) > 1 else steps[0]
    first = next(iter(found))
    raise UserError(f"{base} has no snapshot at step {step}; its snapshots are at step{'s' * (len(steps) > 1)} "
                    f"{listed} (for example --model {base}@{snapshot_name(first)}).")


def examples_of(spec: str) -> list[Example]:
    """A model's example inputs by name or path, without loading its weights (for menus before any run)."""
    from ..transformer.config import TransformerConfig

    spec, _ = split_snapshot(spec)  # a snapshot has its model's examples
    if spec in PRESETS:
        return examples_for(spec, "preset", preset(spec).extra)
    path = bundled_models().get(spec) or Path(spec).expanduser()
    config_path = path / "config.json"
    try:
        if config_path.is_file() and not is_hf_config(config_path):
            config = TransformerConfig.load(config_path)
            return examples_for(config.name, str(path), config.extra)
    except UserError:
        pass
    return examples_for(spec, str(path))  # an imported folder, or nothing readable: a neutral sentence


def load_model(spec: str, device: str | torch.device = "cpu", seed: int = 0, precision: str = "float32"
               ) -> ModelBundle:  # fmt: skip
    """A preset name (random weights from `seed`), a bundled model's name, a path to a model directory, or a
    Hugging Face id (org/name) found in the local cache (scratchformer.loading.hf_cache); any of the trained ones
    followed by `@step-NNNNNN` for one of its training snapshots. `precision`: a Hugging Face folder's weights
    in float32 (the default) or as stored ("stored": bfloat16 stays bfloat16)."""
    dev = resolve_device(device)
    spec = (spec or "").strip()
    if not spec:
        raise UserError("No model was named; give a preset, a bundled model or a folder.")
    bundled = bundled_models()
    base, step = split_snapshot(spec)
    if step is not None:
        directory = _snapshot_dir(base, step)
        model, src_tok, tgt_tok = load_checkpoint(directory, dev)
        name = base if base in bundled else (model.config.name or Path(base).expanduser().name)
        origin = "bundled" if base in bundled else str(directory)
        return ModelBundle(model, src_tok, tgt_tok, f"{name}@{snapshot_name(step)}", origin)
    if spec in bundled:
        model, src_tok, tgt_tok = load_checkpoint(bundled[spec], dev)
        return ModelBundle(model, src_tok, tgt_tok, spec, "bundled")
    if spec in PRESETS:
        config = preset(spec)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Transformer(config)
        tok = gpt2_tokenizer()
        return ModelBundle(model.to(dev).eval(), tok, tok, spec, "preset")
    path = Path(spec).expanduser()
    if hf_cache.looks_like_id(spec):  # 'org/name': the local Hugging Face cache's snapshot, never a download
        path = hf_cache.resolve(spec)
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{path} is a file; a model is a folder (config.json, model.safetensors, tokenizer).")
        if not (path / "config.json").is_file():
            raise UserError(f"{path} is not a model folder: it has no config.json.")
        if is_hf_config(path / "config.json"):
            from .importers import (
                load_hf_directory,  # Hugging Face directories (BERT, RoBERTa, DistilBERT, GPT-2, MarianMT, BART, mBART)
            )
            from .importers.weights import precision as opening_in

            with opening_in(precision):
                bundle = load_hf_directory(path, dev)
            if hf_cache.looks_like_id(spec):
                bundle.name = spec  # a cached model is called by its id, not its snapshot's hash
            return bundle
        model, src_tok, tgt_tok = load_checkpoint(path, dev)  # says precisely what is missing or damaged
        name = model.config.name or path.name
        if path.resolve().parent.name == SNAPSHOTS and "training_step" in model.config.extra:
            name = f"{name}@{snapshot_name(int(model.config.extra['training_step']))}"  # a snapshot's own folder
        return ModelBundle(model, src_tok, tgt_tok, name, str(path))
    choices = ", ".join(model_names())
    raise UserError(f"Unknown model {spec!r}: not a preset, a bundled model, an existing folder or a Hugging Face id "
                    f"(org/name) ({choices}).")
