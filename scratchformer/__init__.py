"""scratchformer: the 2017 encoder-decoder Transformer written from scratch, with a named trace of every step.

The names below are loaded on first use (PEP 562), so `import scratchformer.cli` — which opens the window — does
not wait for PyTorch: the window shows itself first and loads the model library behind it (app/startup/launch.py).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name → the module that defines it
_EXPORTS = {
    "PRESETS": "transformer.config", "TransformerConfig": "transformer.config", "preset": "transformer.config",
    "available_devices": "loading.device", "resolve_device": "loading.device",
    "UserError": "errors",
    "causal_mask": "transformer.masks", "cross_mask": "transformer.masks", "decoder_self_mask": "transformer.masks",
    "encoder_self_mask": "transformer.masks",
    "Transformer": "transformer.model",
    "Run": "api", "run": "api", "sweep_pairs": "api",
    "KINDS": "recording.trace", "Step": "recording.trace", "Trace": "recording.trace", "tracing": "recording.trace",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scratchformer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
