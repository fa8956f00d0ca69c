"""Token embeddings and positional encodings (paper §3.4 and §3.5)."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..recording.intervention_context import patched
from ..recording.trace import active_tracer, add_dropout
from .config import TransformerConfig


def sinusoidal_encoding(max_len: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """(max_len, d_model) table of the paper's sinusoids.

    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
    layout "interleaved" is the paper's (sin at even, cos at odd dimensions; odd d_model ends on a sin);
    "halves" is Marian's (all sines first, then all cosines).
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (L, ceil(d/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    n_cos = d_model // 2
    if layout == "interleaved":
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, :n_cos])
    elif layout == "halves":
        n_sin = d_model - n_cos
        pe[:, :n_sin] = torch.sin(angle)
        pe[:, n_sin:] = torch.cos(angle[:, :n_cos])
    else:
        raise ValueError(f"unknown layout {layout!r}")
    return pe.float()  # (L, d_model)


class Embeddings(nn.Module):
    """ids → E[ids]·√d_model + PE, then dropout (paper §3.4, §3.5, §5.4 "we apply dropout to the sums")."""

    def __init__(self, config: TransformerConfig, vocab_size: int, pos_dim: str, trace_name: str) -> None:
        super().__init__()
        self.config = config
        self.pos_dim = pos_dim  # "src_pos" or "tgt_pos": which token labels the position axis takes
        self.trace_name = trace_name
        d = config.d_model
        self.tokens = nn.Embedding(vocab_size, d)
        self.scale = math.sqrt(d) if config.scale_embedding else 1.0
        # Position ids start at position_offset (RoBERTa: padding_idx + 1), so the table has that many more rows.
        self.position_offset = config.position_offset
        n_positions = config.max_len + config.position_offset
        self.positions = None
        self.register_buffer("pe", None, persistent=False)  # the sinusoid table (max_len, d_model), if any
        if config.positional == "learned":
            self.positions = nn.Embedding(n_positions, d)
        elif config.positional in ("sinusoidal", "sinusoidal_halves"):
            self.register_buffer("pe", self.table(), persistent=False)  # (L, d_model)
        # none, rotary: nothing is added (rotary positions turn q and k inside attention); no table is kept, as a
        # long-context model's would be large and all zeros
        self.token_types = nn.Embedding(config.type_vocab_size, d) if config.type_vocab_size else None
        self.layer_norm = nn.LayerNorm(d, eps=config.layer_norm_eps) if config.embed_layer_norm else None
        self.dropout = nn.Dropout(config.dropout)

    def table(self) -> torch.Tensor:
        """(max_len + position_offset, d_model): the sinusoid table of a sinusoidal model."""
        layout = "halves" if self.config.positional == "sinusoidal_halves" else "interleaved"
        return sinusoidal_encoding(self.config.max_len + self.position_offset, self.config.d_model, layout)

    def scale_factor(self, dtype: torch.dtype) -> float | torch.Tensor:
        """√d_model as the embeddings are multiplied by it: a Python number, or (config.round_embed_scale, Gemma)
        rounded to the weights' precision first (bfloat16: √3072 = 55.43 → 55.5; float32: the same product)."""
        if self.config.round_embed_scale:
            return torch.tensor(self.scale, dtype=dtype, device=self.tokens.weight.device)
        return self.scale

    def encoding(self, length: int, offset: int = 0) -> torch.Tensor:
        """(length, d_model) positional vectors for positions offset … offset+length-1 (plus position_offset)."""
        start = offset + self.position_offset
        if self.positions is not None:
            return self.positions.weight[start : start + length]
        if self.pe is None:  # no positional encoding: zeros
            return self.tokens.weight.new_zeros(length, self.config.d_model)  # (T, d_model)
        return self.pe[start : start + length]

    def sum_formula(self) -> str:
        """The paper's "E[x]·√d_model + PE", or what an imported model adds instead."""
        scaled = "E[x]·√d_model" if self.scale != 1.0 else "E[x]"
        added = self.config.positional not in ("none", "rotary")
        positions = " + P[pos]" if self.positions is not None else (" + PE" if added else "")
        types = " + T[type]" if self.token_types is not None else ""
        return scaled + positions + types

    def _no_positions(self) -> str:
        """The formula of the all-zero table of positional = none, saying where positions come in instead."""
        if self.config.relative_buckets:
            return "PE = 0: positions enter each attention as a relative position bias instead"
        if self.config.positional == "rotary":
            return "PE = 0: positions enter each attention by rotating its queries and keys (RoPE) instead"
        return "PE = 0: no positional encoding"

    def forward(self, ids: torch.Tensor, offset: int = 0, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        # ids: (B, T) → (B, T, d_model)
        tracer = active_tracer()
        name, pos = self.trace_name, self.pos_dim
        looked_up = self.tokens(ids)  # (B, T, d)
        x = looked_up * self.scale_factor(looked_up.dtype) if self.scale != 1.0 else looked_up
        pe = self.encoding(ids.shape[1], offset)  # (T, d)
        summed = x + pe  # (B, T, d)
        if self.token_types is not None:
            types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
            summed = summed + self.token_types(types)
        # the embeddings' output point (the sum, or its LayerNorm) is where a patch replaces them (interventions)
        if self.layer_norm is None:
            summed = normed = patched(f"{name}.sum", summed)
        else:
            normed = patched(f"{name}.layer_norm", self.layer_norm(summed))
        out = self.dropout(normed)  # training only; the identity in eval mode
        if tracer is not None:
            dims = ("batch", pos, "d_model")
            side = "source" if pos == "src_pos" else "target"
            tracer.add(f"{name}.tokens", "tokens", ids, ("batch", pos), f"Token ids of the {side}",
                       "x = tokenizer(text)", name)
            tracer.add(f"{name}.lookup", "embedding", looked_up, dims, "Embedding lookup", "E[x]", name)
            if self.scale != 1.0:
                tracer.add(f"{name}.scaled", "embedding", x, dims, "Embedding × √d_model",
                           f"E[x] · √d_model  (√{self.config.d_model} = {self.scale:.3f})", name)
            shifted = f"pos + {self.position_offset}" if self.position_offset else "pos"
            pe_formula = (
                f"learned position embedding P[{shifted}]" if self.positions is not None
                else "PE(pos,i) = sin(pos/10000^(2i/d_model)), PE(pos,⌈d/2⌉+i) = cos(pos/10000^(2i/d_model))"
                if self.config.positional == "sinusoidal_halves"
                else self._no_positions()
                if self.config.positional in ("none", "rotary")
                else "PE(pos,2i) = sin(pos/10000^(2i/d_model)), PE(pos,2i+1) = cos(pos/10000^(2i/d_model))"
            )
            none = self.config.positional in ("none", "rotary")
            tracer.add(f"{name}.positional_encoding", "positional_encoding", pe, (pos, "d_model"),
                       "Positional encoding (none: all zeros)" if none else "Positional encoding", pe_formula, name,
                       major=True)  # fmt: skip
            tracer.add(f"{name}.sum", "input", summed, dims,
                       "Embedding (no positional encoding added)" if none else "Embedding + positional encoding",
                       self.sum_formula(), name, major=self.layer_norm is None)
            if self.layer_norm is not None:
                tracer.add(f"{name}.layer_norm", "layer_norm", normed, dims, "LayerNorm of the embeddings",
                           f"LayerNorm({self.sum_formula()})", name, major=True)
            add_dropout(tracer, self.dropout, name, out, dims)
        return out
