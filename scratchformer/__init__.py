"""scratchformer: the 2017 encoder-decoder Transformer written from scratch, with a named trace of every step."""

from .config import PRESETS, TransformerConfig, preset
from .device import available_devices, resolve_device
from .errors import UserError
from .masks import causal_mask, cross_mask, decoder_self_mask, encoder_self_mask
from .model import Transformer
from .trace import KINDS, Step, Trace, tracing

__version__ = "0.1.0"

__all__ = [
    "KINDS", "PRESETS", "Step", "Trace", "Transformer", "TransformerConfig", "UserError", "available_devices",
    "causal_mask", "cross_mask", "decoder_self_mask", "encoder_self_mask", "preset", "resolve_device", "tracing",
]  # fmt: skip
