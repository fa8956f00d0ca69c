"""scratchformer: the 2017 encoder-decoder Transformer written from scratch, with a named trace of every step.

The names below are loaded on first use (PEP 562), so `import scratchformer.cli` — which opens the window — does
not wait for PyTorch: the window shows itself first and loads the model library behind it (app/launch.py).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name → the module that defines it
_EXPORTS = {
    "PRESETS": "config", "TransformerConfig": "config", "preset": "config",
    "available_devices": "device", "resolve_device": "device",
    "UserError": "errors",
    "causal_mask": "masks", "cross_mask": "masks", "decoder_self_mask": "masks", "encoder_self_mask": "masks",
    "Transformer": "model",
    "Run": "api", "run": "api",
    "KINDS": "trace", "Step": "trace", "Trace": "trace", "tracing": "trace",
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
