"""Scaled dot-product attention and multi-head attention (paper §3.2), written out step by step."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masks import additive
from .trace import Tracer, active_tracer


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Attention(Q, K, V) = softmax(QKᵀ / √d_k + M) V, returning every intermediate.

    q: (B, h, Tq, d_k), k and v: (B, h, Tk, d_k), mask: (B, Tq, Tk) bool, True = may attend.
    A query row whose keys are all masked gets weights 0 (not NaN) and a zero context.
    """
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1)  # (B, h, Tq, Tk)
    scaled = scores / math.sqrt(d_k)  # (B, h, Tq, Tk)
    if mask is not None:
        masked = scaled.masked_fill(~mask[:, None], float("-inf"))  # (B, h, Tq, Tk)
        weights = masked.softmax(dim=-1)
        weights = weights.masked_fill(~mask.any(-1)[:, None, :, None], 0.0)  # fully masked rows → 0
    else:
        masked = scaled
        weights = scaled.softmax(dim=-1)
    context = weights @ v  # (B, h, Tq, d_v)
    return context, {"scores": scores, "scaled_scores": scaled, "masked_scores": masked, "weights": weights}


def fast_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool = False
) -> torch.Tensor:
    """The same numbers as `attention` through PyTorch's fused kernel: used only when nothing is traced.

    `is_causal` says the mask is exactly the causal one (no padding, no cache offset), which lets the kernel
    skip the blocked upper triangle instead of reading a mask.
    """
    if is_causal:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, Tq, d_v)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v)  # (B, h, Tq, d_v)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])  # (B, h, Tq, d_v)
    return context.masked_fill(~mask.any(-1)[:, None, :, None], 0.0)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Self-attention projects Q, K and V with one fused matrix [W^Q W^K W^V] (d_model → 3·d_model), laid out
    like torch.nn.MultiheadAttention's in_proj_weight. Cross-attention takes queries from the decoder
    (q_proj) and keys/values from the encoder output (fused kv_proj, d_model → 2·d_model).
    """

    def __init__(self, d_model: int, n_heads: int, cross: bool, q_dim: str, k_dim: str, trace_name: str) -> None:
        super().__init__()
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.cross = cross
        self.q_dim, self.k_dim = q_dim, k_dim  # position-axis names: which token labels each axis takes
        self.trace_name = trace_name
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)  # (B, T, d) → (B, h, T, d_k)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        cache: dict | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """x: (B, Tq, d_model); memory: (B, Tk, d_model) for cross-attention; mask: (B, Tq, Tk) bool.

        `cache` (a dict per layer, used when decoding one token at a time) keeps K and V of earlier positions
        for self-attention, and the encoder's K and V for cross-attention, so each is computed once.
        """
        tracer = active_tracer()
        d = self.d_model
        qkv = kv = None
        if self.cross:
            q = self.q_proj(x)  # (B, Tq, d)
            if cache is not None and "k" in cache:
                k_heads, v_heads, kv = cache["k"], cache["v"], None
            else:
                kv = self.kv_proj(memory)  # (B, Tk, 2d)
                k, v = kv.split(d, dim=-1)  # (B, Tk, d) each
                k_heads, v_heads = self.split_heads(k), self.split_heads(v)  # (B, h, Tk, d_k)
            if cache is not None:
                cache["k"], cache["v"] = k_heads, v_heads
        else:
            qkv = self.qkv(x)  # (B, T, 3d)
            q, k, v = qkv.split(d, dim=-1)  # (B, T, d) each
            k_heads, v_heads = self.split_heads(k), self.split_heads(v)  # (B, h, T, d_k)
            if cache is not None:
                if "k" in cache:
                    k_heads = torch.cat([cache["k"], k_heads], dim=2)  # (B, h, T_past + T, d_k)
                    v_heads = torch.cat([cache["v"], v_heads], dim=2)
                cache["k"], cache["v"] = k_heads, v_heads
        q_heads = self.split_heads(q)  # (B, h, Tq, d_k)

        if tracer is None:
            context = fast_attention(q_heads, k_heads, v_heads, mask, is_causal)  # (B, h, Tq, d_k)
            parts = None
        else:
            context, parts = attention(q_heads, k_heads, v_heads, mask)

        b, _, tq, _ = context.shape
        concat = context.transpose(1, 2).reshape(b, tq, d)  # (B, h, Tq, d_k) → (B, Tq, d)
        out = self.out_proj(concat)  # (B, Tq, d)
        if tracer is not None:
            self._record(tracer, x, memory, q, qkv, kv, q_heads, k_heads, v_heads, mask, parts, context, concat, out)
        return out

    def _record(self, tracer: Tracer, x, memory, q, qkv, kv, q_heads, k_heads, v_heads, mask, parts,
                context, concat, out) -> None:
        n, sub, qd, kd = self.trace_name, self.trace_name, self.q_dim, self.k_dim
        h = self.n_heads
        if self.cross:
            tracer.add(f"{n}.q_proj", "qkv", q, ("batch", qd, "d_model"), "Queries from the decoder",
                       "Q = X_dec W^Q", sub)
            if kv is not None:
                tracer.add(f"{n}.kv_proj", "qkv", kv, ("batch", kd, "d_kv"),
                           "Keys and values from the encoder output", "[K V] = X_enc [W^K W^V]", sub)
        else:
            tracer.add(f"{n}.qkv", "qkv", qkv, ("batch", qd, "d_qkv"), "Fused Q, K, V projection",
                       "[Q K V] = X [W^Q W^K W^V] + b", sub)
        heads = ("batch", "head", qd, "d_head")
        kheads = ("batch", "head", kd, "d_head")
        tracer.add(f"{n}.q", "heads", q_heads, heads, f"Queries split into {h} heads",
                   f"Q → h={h} heads of d_k={self.d_head}", sub)
        tracer.add(f"{n}.k", "heads", k_heads, kheads, f"Keys split into {h} heads",
                   f"K → h={h} heads of d_k={self.d_head}", sub)
        tracer.add(f"{n}.v", "heads", v_heads, kheads, f"Values split into {h} heads",
                   f"V → h={h} heads of d_v={self.d_head}", sub)
        att = ("batch", "head", qd, kd)
        tracer.add(f"{n}.scores", "scores", parts["scores"], att, "Dot products QKᵀ", "S = Q Kᵀ", sub)
        tracer.add(f"{n}.scaled_scores", "scaled_scores", parts["scaled_scores"], att, "Scaled by √d_k",
                   f"S / √d_k  (√{self.d_head} = {math.sqrt(self.d_head):.3f})", sub)
        b, tq, tk = q_heads.shape[0], q_heads.shape[2], k_heads.shape[2]
        tracer.add(f"{n}.mask", "mask", additive(mask, (b, tq, tk)).expand(b, tq, tk), ("batch", qd, kd),
                   "Mask (0 = allowed, −∞ = blocked)", "M", sub)
        tracer.add(f"{n}.masked_scores", "masked_scores", parts["masked_scores"], att, "Mask added",
                   "S / √d_k + M", sub)
        tracer.add(f"{n}.weights", "attention_weights", parts["weights"], att, "Attention weights (softmax)",
                   "A = softmax(QKᵀ/√d_k + M)", sub, major=True)
        tracer.add(f"{n}.context", "context", context, heads, "Weighted sum of values", "head_i = A_i V_i", sub)
        tracer.add(f"{n}.concat", "concat", concat, ("batch", qd, "d_model"), "Heads concatenated",
                   "Concat(head_1, …, head_h)", sub)
        tracer.add(f"{n}.out", "projection", out, ("batch", qd, "d_model"), "Output projection",
                   "MultiHead = Concat(head_1, …, head_h) W^O", sub, major=True)
