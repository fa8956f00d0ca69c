"""The memory a traced run will need, checked against a budget before the run starts.

A lazy trace (scratchformer.recording.trace) holds, per batch item, the tensors that flow between sublayers — each of
them T × d_model floats — and reruns a sublayer when its interior is asked for. So a run needs about:

    held     the residual-stream tensors of every step the trace keeps      ≈ items × steps × T × d_model × 4 B,
             plus the interiors small enough to keep (each ≤ 256 KiB)
    working  one item's largest interior while it is computed              ≈ 5 maps × h × T × T × 4 B, or
                                                                             3 × T × vocab × 4 B (logits, softmax)
    output   the logits handed back (only when the caller keeps them)      = items × T × vocab × 4 B
    cache    recomputed interiors kept for revisits (their own limit)
    model    the weights

The estimate is deliberately a little high (every step counted at the stream's size). A run that would pass the
budget is refused with one sentence that says what to shorten, instead of swapping the machine to a halt.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import UserError
from ..transformer.config import TransformerConfig

FLOAT = 4  # bytes per float32
RUNTIME_BYTES = 400 * 2**20  # Python, torch and (in the window) Qt themselves


def physical_memory() -> int | None:
    """This machine's RAM in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def available_memory() -> int | None:
    """Bytes this machine can give a new model now (Linux: MemAvailable), else its RAM, or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_memory()


def default_budget() -> int:
    """Half the machine's memory (the rest stays for the desktop), or 4 GiB where that is unknown."""
    ram = physical_memory()
    return ram // 2 if ram else 4 * 2**30


def held_steps_per_item(config: TransformerConfig) -> int:
    """How many stream-sized tensors a lazy trace keeps per batch item (an upper bound)."""
    pre = config.norm_first
    per_encoder = 6 if pre else 4  # [norm] attention out [residual] | Add & Norm out … for both sublayers
    per_decoder = 9 if pre else 6
    if not config.has_encoder:
        per_decoder = 6 if pre else 4
    embed = 6  # ids, lookup, ×√d_model, PE, sum, LayerNorm
    sides = int(config.has_encoder) + int(config.has_decoder)
    finals = 2 if config.final_layer_norm else 0
    return (config.n_encoder_layers * per_encoder + config.n_decoder_layers * per_decoder + embed * sides
            + finals + 1)  # fmt: skip


def small_interiors_per_item(config: TransformerConfig, n_source: int, n_target: int,
                             keep_bytes: int = 256 * 1024) -> int:  # fmt: skip
    """Bytes of sublayer interiors a lazy trace keeps because each is at most keep_bytes (short inputs)."""
    cap = lambda n: n * FLOAT if n * FLOAT <= keep_bytes else 0  # noqa: E731 (a larger tensor is recomputed)
    d, h, width = config.d_model, config.n_heads, config.n_heads * config.d_head  # h·d_k

    def attention(tq: int, tk: int) -> int:
        maps = 4 * cap(h * tq * tk)  # scores, scaled, masked, weights
        heads = 2 * cap(tq * width) + 2 * cap(tk * width) + cap(tq * width)  # q, context, k, v, concat
        return maps + heads + cap(tq * 3 * width) + cap(tq * tk)  # projection, additive mask

    def ffn(t: int) -> int:
        return (3 if config.ffn_gated else 1) * cap(t * config.d_ff) + 2 * cap(t * d)  # hidden, residuals

    total = config.n_encoder_layers * (attention(n_source, n_source) + ffn(n_source)) if config.has_encoder else 0
    if config.has_decoder:
        cross = attention(n_target, n_source) if config.has_encoder else 0
        total += config.n_decoder_layers * (attention(n_target, n_target) + cross + ffn(n_target) + cap(n_target * d))
        total += 2 * cap(n_target * config.tgt_vocab_size)  # logits, probabilities
    return total


@dataclass
class MemoryEstimate:
    held: int
    working: int
    output: int
    cache: int
    model: int

    @property
    def total(self) -> int:
        return self.held + self.working + self.output + self.cache + self.model + RUNTIME_BYTES


def estimate_run(config: TransformerConfig, n_items: int, n_source: int, n_target: int, model_bytes: int,
                 cache_bytes: int = 256 * 2**20, keep_output: bool = False) -> MemoryEstimate:  # fmt: skip
    """What a traced run of n_items sequences (n_source / n_target tokens each) will need; see the module doc."""
    n = max(n_source if config.has_encoder else 0, n_target if config.has_decoder else 0, 1)
    held = n_items * (held_steps_per_item(config) * n * config.d_model * FLOAT
                      + small_interiors_per_item(config, n_source, n_target))
    longest = max(n_source, n_target, 1)
    attention = 5 * config.n_heads * longest * longest * FLOAT
    logits = 3 * n_target * config.tgt_vocab_size * FLOAT if config.has_decoder else 0
    ffn = 3 * n * config.d_ff * FLOAT
    output = n_items * n_target * config.tgt_vocab_size * FLOAT if keep_output and config.has_decoder else 0
    return MemoryEstimate(held, max(attention, logits, ffn), output, cache_bytes, model_bytes)


def size_text(n_bytes: float) -> str:
    """'84 KB', '3.2 MB', '812 MB', '2.4 GB' (powers of 1024, as system monitors show them)."""
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.1f} GB"
    if n_bytes >= 10 * 2**20:
        return f"{n_bytes / 2**20:.0f} MB"
    if n_bytes >= 2**20:
        return f"{n_bytes / 2**20:.1f} MB"
    return f"{n_bytes / 2**10:.0f} KB"


def check_budget(estimate: MemoryEstimate, budget: int | None, n_items: int, length: int) -> None:
    """UserError, with what to change, when the run would need more than `budget` bytes (None: no limit)."""
    if budget is None or estimate.total <= budget:
        return
    hint = (f"use fewer windows (this run has {n_items})" if n_items > 1
            else f"use a shorter text (this one has {length} tokens)")  # fmt: skip
    raise UserError(f"This run would need about {size_text(estimate.total)} of memory, more than the "
                    f"{size_text(budget)} budget: {hint}, or raise the memory budget.")  # fmt: skip
