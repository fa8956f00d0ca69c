"""Encoder and decoder layers: attention and feed-forward sublayers, each wrapped in Add & Norm (§3.1)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .config import TransformerConfig
from .trace import active_tracer

# Applied in place to the fresh output of W_1 (nothing else holds it): no second d_ff-wide tensor is allocated.
_ACTIVATIONS = {
    "relu": lambda x: F.relu(x, inplace=True),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": lambda x: F.silu(x, inplace=True),
}


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2  (paper §3.3), applied to each position separately."""

    def __init__(self, config: TransformerConfig, pos_dim: str, trace_name: str) -> None:
        super().__init__()
        self.w_1 = nn.Linear(config.d_model, config.d_ff)
        self.w_2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)  # on the hidden layer, as torch.nn.Transformer does
        self.activation = _ACTIVATIONS[config.activation]
        self.activation_name = config.activation
        self.pos_dim, self.trace_name = pos_dim, trace_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.activation(self.w_1(x))  # (B, T, d_model) → (B, T, d_ff)
        out = self.w_2(self.dropout(hidden))  # (B, T, d_ff) → (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            n, p = self.trace_name, self.pos_dim
            act = "max(0, ·)" if self.activation_name == "relu" else self.activation_name.upper()
            tracer.add(f"{n}.hidden", "ffn_hidden", hidden, ("batch", p, "d_ff"), "Feed-forward hidden layer",
                       f"{act}(x W_1 + b_1)", n)
            tracer.add(f"{n}.out", "ffn_out", out, ("batch", p, "d_model"), "Feed-forward output",
                       f"FFN(x) = {act}(x W_1 + b_1) W_2 + b_2", n, major=True)
        return out


class AddNorm(nn.Module):
    """The residual connection around a sublayer, with its LayerNorm.

    Post-LN, the paper's (§3.1, §5.4):  LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (config.norm_first, GPT-2):   x + Dropout(Sublayer(LayerNorm(x))) — the residual stream itself is
    never normalised inside the layers, so such models end each stack with a final LayerNorm.
    The sublayer is passed in as a function of its input, so the norm can run before it when it must.
    """

    def __init__(self, config: TransformerConfig, pos_dim: str, trace_name: str) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.norm_first = config.norm_first
        self.pos_dim, self.trace_name = pos_dim, trace_name

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return self._pre_norm(x, sublayer)
        dropped = self.dropout(sublayer(x))
        residual = x + dropped  # (B, T, d_model)
        out = self.norm(residual)  # (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            n, dims = self.trace_name, ("batch", self.pos_dim, "d_model")
            if self.training and self.dropout.p > 0:
                tracer.add(f"{n}.dropout", "dropout", dropped, dims, "Dropout", f"Dropout(p={self.dropout.p})", n)
            tracer.add(f"{n}.residual", "residual", residual, dims, "Residual add", "x + Sublayer(x)", n)
            tracer.add(f"{n}.out", "layer_norm", out, dims, "LayerNorm",
                       "LayerNorm(x + Sublayer(x)) = γ·(z − μ)/√(σ² + ε) + β", n, major=True)
        return out

    def _pre_norm(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """x + Dropout(Sublayer(LayerNorm(x))): the norm is traced first, as its own diagram block `<name>.norm`."""
        n, dims = self.trace_name, ("batch", self.pos_dim, "d_model")
        normed = self.norm(x)  # (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            tracer.add(f"{n}.norm", "layer_norm", normed, dims, "LayerNorm (pre-norm, before the sublayer)",
                       "LayerNorm(x) = γ·(x − μ)/√(σ² + ε) + β", f"{n}.norm", major=True)
        dropped = self.dropout(sublayer(normed))
        out = x + dropped  # (B, T, d_model)
        if tracer is not None:
            if self.training and self.dropout.p > 0:
                tracer.add(f"{n}.dropout", "dropout", dropped, dims, "Dropout", f"Dropout(p={self.dropout.p})", n)
            tracer.add(f"{n}.residual", "residual", out, dims, "Residual add (pre-norm: no LayerNorm after it)",
                       "x + Sublayer(LayerNorm(x))", n, major=True)
        return out


class EncoderLayer(nn.Module):
    """Self-attention → Add & Norm → feed-forward → Add & Norm."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        n = f"encoder.{index}"
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, False, "src_pos", "src_pos",
                                            f"{n}.self_attn")
        self.add_norm1 = AddNorm(config, "src_pos", f"{n}.add_norm1")
        self.ffn = PositionwiseFeedForward(config, "src_pos", f"{n}.ffn")
        self.add_norm2 = AddNorm(config, "src_pos", f"{n}.add_norm2")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.add_norm1(x, lambda h: self.self_attn(h, mask=mask))  # (B, S, d_model)
        return self.add_norm2(x, self.ffn)  # (B, S, d_model)


class DecoderLayer(nn.Module):
    """Masked self-attention → Add & Norm → cross-attention → Add & Norm → feed-forward → Add & Norm.

    A decoder-only model (no encoder) has no cross-attention sublayer.
    """

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        n = f"decoder.{index}"
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, False, "tgt_pos", "tgt_pos",
                                            f"{n}.self_attn")
        self.add_norm1 = AddNorm(config, "tgt_pos", f"{n}.add_norm1")
        if config.has_encoder:
            self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, True, "tgt_pos", "src_pos",
                                                 f"{n}.cross_attn")
            self.add_norm2 = AddNorm(config, "tgt_pos", f"{n}.add_norm2")
        else:
            self.cross_attn = self.add_norm2 = None
        self.ffn = PositionwiseFeedForward(config, "tgt_pos", f"{n}.ffn")
        self.add_norm3 = AddNorm(config, "tgt_pos", f"{n}.add_norm3")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None,
        self_mask: torch.Tensor | None,
        cross_mask: torch.Tensor | None,
        cache: dict | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        self_cache = cache.setdefault("self", {}) if cache is not None else None
        x = self.add_norm1(x, lambda h: self.self_attn(h, mask=self_mask, cache=self_cache, is_causal=is_causal))
        if self.cross_attn is not None:
            cross_cache = cache.setdefault("cross", {}) if cache is not None else None
            x = self.add_norm2(x, lambda h: self.cross_attn(h, memory, mask=cross_mask, cache=cross_cache))
        return self.add_norm3(x, self.ffn)  # (B, T, d_model)
