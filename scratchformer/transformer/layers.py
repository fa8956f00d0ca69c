"""Encoder and decoder layers: attention and feed-forward sublayers, each wrapped in Add & Norm (§3.1)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..recording.intervention_context import patched
from ..recording.trace import active_tracer, add_dropout
from .attention import MultiHeadAttention, RelativePositionBias
from .config import TransformerConfig
from .feed_forward import ACTIVATIONS as ACTIVATIONS  # re-exported: its old home
from .feed_forward import PositionwiseFeedForward
from .moe import MixtureOfExperts
from .norms import RMSNorm


def make_norm(config: TransformerConfig) -> nn.Module:
    """The model's norm: the paper's LayerNorm, or RMSNorm (config.norm; Gemma's (1 + γ) form with
    config.rmsnorm_plus_one)."""
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, config.layer_norm_eps, config.rmsnorm_plus_one)
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)


# What a norm is called in titles, and its formula applied to an expression ("rmsnorm+1": Gemma's (1 + γ)).
NORM_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "rmsnorm+1": "RMSNorm"}
NORM_FORMULAS = {"layernorm": "γ·({z} − μ)/√(σ² + ε) + β", "rmsnorm": "γ·{z}/√(mean({z}²) + ε)",
                 "rmsnorm+1": "(1 + γ)·{z}/√(mean({z}²) + ε)"}  # fmt: skip


def norm_kind(config: TransformerConfig) -> str:
    """The key of NORM_NAMES and NORM_FORMULAS for the model's norm: config.norm, or "rmsnorm+1" for Gemma's."""
    return "rmsnorm+1" if config.rmsnorm_plus_one else config.norm


def norm_formula(norm: str, z: str) -> str:
    """'LayerNorm(x) = γ·(x − μ)/√(σ² + ε) + β' or 'RMSNorm(x) = γ·x/√(mean(x²) + ε)' for the expression z;
    `norm` is norm_kind(config)."""
    return f"{NORM_NAMES[norm]}({z}) = {NORM_FORMULAS[norm].format(z=z)}"


class AddNorm(nn.Module):
    """The residual connection around a sublayer, with its LayerNorm.

    Post-LN, the paper's (§3.1, §5.4):  LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (config.norm_first, GPT-2, T5):   x + Dropout(Sublayer(LayerNorm(x))) — the residual stream itself is
    never normalised inside the layers, so such models end each stack with a final LayerNorm.
    Sandwich (config.post_norm, Gemma 2 and 3): x + Dropout(PostNorm(Sublayer(Norm(x)))) — a second norm of its
    own (`post_norm`) on what the sublayer adds, traced as `<name>.post_norm`.
    Post-norm only (config.post_norm_only, OLMo 2): x + Dropout(PostNorm(Sublayer(x))) — the sandwich without its
    first slice: the sublayer reads x itself, and the module has no `norm`.
    The sublayer is passed in as a function of its input, so the norm can run before it when it must.
    The norm is RMSNorm instead of LayerNorm when config.norm says so (T5); titles and formulas name it.
    """

    def __init__(self, config: TransformerConfig, pos_dim: str, trace_name: str) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.norm = None if config.post_norm_only else make_norm(config)
        self.post_norm = make_norm(config) if config.post_norm else None
        self.norm_first = config.norm_first
        self.norm_kind, self.norm_name = norm_kind(config), NORM_NAMES[config.norm]
        self.pos_dim, self.trace_name = pos_dim, trace_name

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return self._pre_norm(x, sublayer)
        dropped = self.dropout(sublayer(x))
        residual = x + dropped  # (B, T, d_model)
        out = patched(f"{self.trace_name}.out", self.norm(residual))  # (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            n, dims = self.trace_name, ("batch", self.pos_dim, "d_model")
            add_dropout(tracer, self.dropout, n, dropped, dims)
            if self.training:
                tracer.add(f"{n}.residual", "residual", residual, dims, "Residual add", "x + Sublayer(x)", n)
            else:  # the sum is cheap to redo from x and the sublayer's output, both kept
                xs, ds = x.detach().cpu(), dropped.detach().cpu()
                rerun = lambda: {f"{n}.residual": xs + ds}  # noqa: E731
                with tracer.recompute_from(f"{n}.residual", rerun, (xs, ds)):
                    tracer.add(f"{n}.residual", "residual", residual, dims, "Residual add", "x + Sublayer(x)", n)
            formula = f"{self.norm_name}(x + Sublayer(x)) = {NORM_FORMULAS[self.norm_kind].format(z='z')}"
            tracer.add(f"{n}.out", "layer_norm", out, dims, self.norm_name, formula, n, major=True)
        return out

    def normed(self, x: torch.Tensor) -> torch.Tensor:
        """The pre-norm's output, traced as its own diagram block `<name>.norm`."""
        normed = patched(f"{self.trace_name}.norm", self.norm(x))  # (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            tracer.add(f"{self.trace_name}.norm", "layer_norm", normed, ("batch", self.pos_dim, "d_model"),
                       f"{self.norm_name} (pre-norm, before the sublayer)", norm_formula(self.norm_kind, "x"),
                       f"{self.trace_name}.norm", major=True)  # fmt: skip
        return normed

    def post_normed(self, added: torch.Tensor) -> torch.Tensor:
        """The sublayer's output through the norm after it (Gemma 2's sandwich, OLMo 2), traced as its own diagram
        block `<name>.post_norm`; unchanged when the model has no such norm."""
        if self.post_norm is None:
            return added
        out = self.post_norm(added)  # (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            inner = "Sublayer(x)" if self.norm is None else "Sublayer(x')"  # x': the pre-norm's output, if any
            tracer.add(f"{self.trace_name}.post_norm", "layer_norm", out, ("batch", self.pos_dim, "d_model"),
                       f"{self.norm_name} (post-norm, after the sublayer)", norm_formula(self.norm_kind, inner),
                       f"{self.trace_name}.post_norm", major=True)  # fmt: skip
        return out

    def _pre_norm(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """x + Dropout(Sublayer(LayerNorm(x))): the norm is traced first, as its own diagram block `<name>.norm`."""
        n, dims = self.trace_name, ("batch", self.pos_dim, "d_model")
        only = self.norm is None  # OLMo 2: no norm before the sublayer, which reads x itself
        normed = x if only else self.normed(x)  # (B, T, d_model)
        tracer = active_tracer()
        added = self.post_normed(sublayer(normed))  # (B, T, d_model)
        dropped = self.dropout(added)
        out = patched(f"{n}.residual", x + dropped)  # (B, T, d_model)
        if tracer is not None:
            add_dropout(tracer, self.dropout, n, dropped, dims)
            inner = "Sublayer(x)" if only else f"Sublayer({self.norm_name}(x))"
            sandwich = self.post_norm is not None
            title = ("Residual add (post-norm only: the sublayer's output normalised, its input not)" if only
                     else "Residual add (sandwich: the sublayer's output normalised before it)" if sandwich
                     else f"Residual add (pre-norm: no {self.norm_name} after it)")
            tracer.add(f"{n}.residual", "residual", out, dims, title,
                       f"x + {self.norm_name}({inner})" if sandwich else f"x + {inner}", n, major=True)
        return out


def _attention(config: TransformerConfig, cross: bool, q_dim: str, k_dim: str, trace_name: str,
               relative: str | None = None) -> MultiHeadAttention:
    """A multi-head attention sublayer with the config's departures; `relative` ("bidirectional" or "causal")
    gives it T5's relative position bias table (the first layer of a stack, when config.relative_buckets)."""
    table = None
    if relative is not None and config.relative_buckets:
        table = RelativePositionBias(config.n_heads, config.relative_buckets, config.relative_max_distance,
                                     bidirectional=relative == "bidirectional")  # fmt: skip
    modern = {} if cross else dict(n_kv_heads=config.n_kv_heads, qk_norm=config.qk_norm,
                                   norm_eps=config.layer_norm_eps, rotary=config.positional == "rotary",
                                   norm_plus_one=config.rmsnorm_plus_one, softcap=float(config.attn_softcap))
    # scale: True divides the scores by √d_k, a number s by √s (Gemma's query_pre_attn_scalar), False not at all
    scale = float(config.attn_scale_dim) if config.attn_scale_dim is not None else config.scale_attention
    return MultiHeadAttention(config.d_model, config.n_heads, cross, q_dim, k_dim, trace_name, d_head=config.d_head,
                              bias=config.linear_bias, scale=scale, relative_bias=table,
                              qkv_bias=config.qkv_bias, **modern)  # fmt: skip


class EncoderLayer(nn.Module):
    """Self-attention → Add & Norm → feed-forward → Add & Norm."""

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        n = f"encoder.{index}"
        self.self_attn = _attention(config, False, "src_pos", "src_pos", f"{n}.self_attn",
                                    "bidirectional" if index == 0 else None)  # fmt: skip
        self.add_norm1 = AddNorm(config, "src_pos", f"{n}.add_norm1")
        self.ffn = PositionwiseFeedForward(config, "src_pos", f"{n}.ffn")
        self.add_norm2 = AddNorm(config, "src_pos", f"{n}.add_norm2")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, position_bias: torch.Tensor | None = None
                ) -> torch.Tensor:  # fmt: skip
        """position_bias: (h, S, S), T5's relative position bias shared by the stack's layers (else None)."""
        x = self.add_norm1(x, lambda h: self.self_attn(h, mask=mask, position_bias=position_bias))  # (B, S, d_model)
        return self.add_norm2(x, self.ffn)  # (B, S, d_model)


class DecoderLayer(nn.Module):
    """Masked self-attention → Add & Norm → cross-attention → Add & Norm → feed-forward → Add & Norm.

    A decoder-only model (no encoder) has no cross-attention sublayer.
    """

    def __init__(self, config: TransformerConfig, index: int) -> None:
        super().__init__()
        n = f"decoder.{index}"
        self.self_attn = _attention(config, False, "tgt_pos", "tgt_pos", f"{n}.self_attn",
                                    "causal" if index == 0 else None)  # fmt: skip
        self.add_norm1 = AddNorm(config, "tgt_pos", f"{n}.add_norm1")
        if config.has_encoder:
            self.cross_attn = _attention(config, True, "tgt_pos", "src_pos", f"{n}.cross_attn")
            self.add_norm2 = AddNorm(config, "tgt_pos", f"{n}.add_norm2")
        else:
            self.cross_attn = self.add_norm2 = None
        if config.has_experts(index):  # a mixture of experts in place of the feed-forward (Mixtral, Qwen3-MoE)
            self.ffn, self.moe = None, MixtureOfExperts(config, "tgt_pos", f"{n}.moe")
        else:
            self.ffn, self.moe = PositionwiseFeedForward(config, "tgt_pos", f"{n}.ffn"), None
        self.add_norm3 = AddNorm(config, "tgt_pos", f"{n}.add_norm3")
        self.parallel = config.parallel_residual

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None,
        self_mask: torch.Tensor | None,
        cross_mask: torch.Tensor | None,
        cache: dict | None = None,
        is_causal: bool = False,
        position_bias: torch.Tensor | None = None,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """position_bias: (h, T, T_past + T), T5's relative position bias for the self-attention (else None);
        rope: (cos, sin), each (T, d_rot), the rotary angles of these positions (else None)."""
        self_cache = cache.setdefault("self", {}) if cache is not None else None
        attend = lambda h: self.self_attn(h, mask=self_mask, cache=self_cache, is_causal=is_causal,  # noqa: E731
                                          position_bias=position_bias, rope=rope)  # fmt: skip
        if self.parallel:
            return self._parallel(x, attend)
        x = self.add_norm1(x, attend)
        if self.cross_attn is not None:
            cross_cache = cache.setdefault("cross", {}) if cache is not None else None
            x = self.add_norm2(x, lambda h: self.cross_attn(h, memory, mask=cross_mask, cache=cross_cache))
        return self.add_norm3(x, self.ffn if self.ffn is not None else self.moe)  # (B, T, d_model)

    def _parallel(self, x: torch.Tensor, attend: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """GPT-NeoX's parallel layer, x + Attention(LN₁(x)) + FFN(LN₂(x)): both sublayers read the same x, each
        through its own norm (add_norm1.norm, add_norm3.norm), and one residual add joins them
        (add_norm3.residual). The feed-forward may be a mixture of experts, and with post_norm each sublayer's
        output goes through its own norm after it (add_norm1.post_norm, add_norm3.post_norm) before the add, as in
        a sequential sandwich layer: the folder's post-norm weights are used, not dropped."""
        ffn = self.ffn if self.ffn is not None else self.moe
        a = self.add_norm1.dropout(self.add_norm1.post_normed(attend(self.add_norm1.normed(x))))  # (B, T, d_model)
        f = self.add_norm3.dropout(self.add_norm3.post_normed(ffn(self.add_norm3.normed(x))))  # (B, T, d_model)
        out = patched(f"{self.add_norm3.trace_name}.residual", x + a + f)  # (B, T, d_model)
        tracer = active_tracer()
        if tracer is not None:
            what = "feed-forward" if self.ffn is not None else "mixture of experts"
            tracer.add(f"{self.add_norm3.trace_name}.residual", "residual", out, ("batch", "tgt_pos", "d_model"),
                       f"Residual add of both sublayers (parallel attention and {what})", self._parallel_formula(),
                       self.add_norm3.trace_name, major=True)  # fmt: skip
        return out

    def _parallel_formula(self) -> str:
        """'x + Attention(LN₁(x)) + FFN(LN₂(x))' in this model's norm and parts (parallel_terms)."""
        attn, ffn = parallel_terms(NORM_NAMES[self.add_norm3.norm_kind], self.ffn is None,
                                   self.add_norm3.post_norm is not None)  # fmt: skip
        return f"x + {attn} + {ffn}"


def parallel_terms(norm: str, experts: bool, sandwich: bool) -> tuple[str, str]:
    """The two terms a parallel layer adds to x, with `norm` the norm's name: ('Attention(LN₁(x))', 'FFN(LN₂(x))'),
    MoE for a mixture of experts, each inside PostNorm₁(…), PostNorm₂(…) in a sandwich layer."""
    attn, ffn = f"Attention({norm}₁(x))", f"{'MoE' if experts else 'FFN'}({norm}₂(x))"
    if sandwich:
        attn, ffn = f"PostNorm₁({attn})", f"PostNorm₂({ffn})"
    return attn, ffn
