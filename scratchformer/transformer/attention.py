"""Scaled dot-product attention and multi-head attention (paper §3.2), written out step by step; and T5's
relative position bias, a learned number per head and distance bucket added to the scores.

A traced attention writes out its four maps (scores, scaled, masked, weights) for showing, and takes its context
from PyTorch's fused kernel, as the untraced forward pass does (traced_context): the same numbers as weights @ V
up to float rounding, and a traced pass whose maps a lazy trace will not keep need not build them at all."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..recording.intervention_context import active_interventions, applying, patched
from ..recording.nonfinite import step_flag
from ..recording.trace import Tracer, active_tracer
from .masks import additive, causal_mask
from .norms import RMSNorm
from .rotary import rotate


def score_divisor(scale: bool | float, d_k: int) -> float:
    """What the scores are divided by: √d_k (scale True, the paper's), √s for a number s (Gemma 2 and 3's
    query_pre_attn_scalar), 1 (False: T5)."""
    if isinstance(scale, bool):
        return math.sqrt(d_k) if scale else 1.0
    return math.sqrt(scale)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: bool | float = True,
    bias: torch.Tensor | None = None, softcap: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Attention(Q, K, V) = softmax(QKᵀ / √d_k + M) V, returning every intermediate.

    q: (B, h, Tq, d_k), k and v: (B, h, Tk, d_k), mask: (B, Tq, Tk) bool, True = may attend.
    A query row whose keys are all masked gets weights 0 (not NaN) and a zero context.
    T5 departs twice: no division by √d_k (`scale` False) and a relative position bias (h, Tq, Tk) added to the
    scores before the mask: softmax(QKᵀ + B + M). Under grouped-query attention k and v have fewer heads
    (B, h_kv, Tk, d_k), and each serves h / h_kv query heads in turn (expand_kv). Gemma 2 divides by √s, a number
    of its own (`scale` a float), and soft-caps the scaled scores before the mask (`softcap` c > 0):
    softmax(c·tanh(QKᵀ/(√s·c)) + M), returned as the map "capped_scores".
    """
    d_k = q.shape[-1]
    k_heads, v_heads = k, v  # as projected: h_kv heads each under grouped-query attention
    k, v = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])  # (B, h, Tk, d_k)
    scores = q @ k.transpose(-2, -1)  # (B, h, Tq, Tk)
    scaled = scores / score_divisor(scale, d_k) if scale else scores  # (B, h, Tq, Tk)
    capped = torch.tanh(scaled / softcap) * softcap if softcap else scaled  # (B, h, Tq, Tk), each in (−c, c)
    biased = capped + bias if bias is not None else capped  # (B, h, Tq, Tk)
    if mask is not None:
        masked = biased.masked_fill(~mask[:, None], float("-inf"))  # (B, h, Tq, Tk)
        weights = masked.softmax(dim=-1)
        open_rows = mask.any(-1)  # (B, Tq): a query with at least one key it may see
        if not bool(open_rows.all()):  # fully masked rows → 0 (softmax over only −∞ gives NaN); else skip a pass
            weights = weights.masked_fill(~open_rows[:, None, :, None], 0.0)
    else:
        masked = biased
        weights = biased.softmax(dim=-1)
    if softcap:  # the fused kernel cannot soft-cap: the written-out weights @ V
        context = weights @ v  # (B, h, Tq, d_v)
    else:  # weights @ V, as the fused kernel has it (traced_context): the bits an unkept lazy pass gives too
        context = traced_context(q, k_heads, v_heads, mask, scale, bias)  # (B, h, Tq, d_v)
    maps = {"scores": scores, "scaled_scores": scaled, "masked_scores": masked, "weights": weights}
    if softcap:
        maps["capped_scores"] = capped
    return context, maps


def expand_kv(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, h_kv, T, d_k) → (B, h, T, d_k): under grouped-query attention query head i reads key/value head
    i // (h / h_kv), so each key/value head is repeated for its group of consecutive query heads. A view when
    nothing is shared."""
    b, h_kv, t_len, d = t.shape
    if h_kv == n_heads:
        return t
    group = n_heads // h_kv
    return t[:, :, None].expand(b, h_kv, group, t_len, d).reshape(b, n_heads, t_len, d)


MAPS = ("scores", "scaled_scores", "masked_scores", "weights")  # attention()'s (B, h, Tq, Tk) intermediates


def attention_unkept(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                     scale: bool | float = True) -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:  # fmt: skip
    """attention() for a traced pass that keeps none of its maps (a lazy trace reruns attention() when one is
    shown): the same context, bit for bit (traced_context), and each map's non-finite flag
    (scratchformer.recording.nonfinite.step_flag). No position bias.

    The maps are not built when the scores are sure to be finite (finite_scores), as in any working model: then
    every map is. Dividing by √d_k ≥ 1 keeps a number finite, masking adds only the −∞ it is meant to, and the
    softmax of rows holding finite numbers (or only −∞, which become 0 here) is finite. Otherwise (and on
    devices where asking would wait) the maps are made one after another in one buffer and checked."""
    context = traced_context(q, k, v, mask, scale)  # (B, h, Tq, d_v)
    if q.device.type == "cpu" and finite_scores(q, k):
        return context, {m: torch.tensor(False) for m in MAPS}
    return context, _map_flags(q, k, mask, scale)


def _map_flags(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, scale: bool
               ) -> dict[str, torch.Tensor | None]:  # fmt: skip
    """Each of attention()'s maps' non-finite flags, the maps made as attention() makes them but in place on one
    buffer; a map that comes from a finite one is finite (see attention_unkept), only the first is read in full."""
    d_k = q.shape[-1]
    k = expand_kv(k, q.shape[1])  # (B, h, Tk, d_k)
    s = q @ k.transpose(-2, -1)  # (B, h, Tq, Tk): the scores
    flags: dict[str, torch.Tensor | None] = {"scores": step_flag(s, "scores")}
    if scale:
        s.div_(score_divisor(scale, d_k))  # (B, h, Tq, Tk): the scaled scores, as attention()'s s / √d_k
    flags["scaled_scores"] = _unless_finite(flags["scores"], s, "scaled_scores")
    if mask is not None:
        s.masked_fill_(~mask[:, None], float("-inf"))  # (B, h, Tq, Tk): the masked scores
        blocks = (~mask).any()
        flags["masked_scores"] = _unless_finite(flags["scaled_scores"], s, "masked_scores", blocks)
        weights = s.softmax(dim=-1)  # (B, h, Tq, Tk)
        open_rows = mask.any(-1)  # (B, Tq)
        if not bool(open_rows.all()):
            weights.masked_fill_(~open_rows[:, None, :, None], 0.0)  # fully masked rows → 0, not NaN
    else:
        flags["masked_scores"] = flags["scaled_scores"]
        weights = s.softmax(dim=-1)
    flags["weights"] = _unless_finite(flags["masked_scores"], weights, "attention_weights")
    return flags


def _unless_finite(before: torch.Tensor | None, t: torch.Tensor, kind: str, blocks: torch.Tensor | None = None
                   ) -> torch.Tensor | None:  # fmt: skip
    """The flag of a map made from a map whose flag is `before`: not finite only if that one was not (see
    attention_unkept); checked in full otherwise, and on devices where reading the flag back would wait."""
    if before is not None and t.device.type == "cpu" and not bool(before):
        return before
    return step_flag(t, kind, blocks)


def traced_context(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: bool = True,
                   bias: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """The context (B, h, Tq, d_v) of a traced attention, through fast_attention as the untraced pass takes it:
    one function for the pass, its rerun and an eager trace, so a recomputed context is the traced one bit for
    bit; a traced pass then need not build the maps at all (attention_unkept).

    The mask is handed over in the plainest form that means the same (plainest_mask): the fused kernel runs a few
    times faster without one, and gives the same bits (tests/scratchformer/test_attention_unkept.py checks)."""
    mask, is_causal = plainest_mask(mask, q.shape[2], k.shape[2])
    context = fast_attention(q, k, v, mask, is_causal, scale, bias)  # (B, h, Tq, d_v), may be laid out (B, Tq, h, d_v)
    return context.contiguous()  # laid out as weights @ V is: the concat of the heads is a tensor of its own


def plainest_mask(mask: torch.Tensor | None, n_q: int, n_k: int) -> tuple[torch.Tensor | None, bool]:
    """(mask, is_causal) for fast_attention: no mask when it blocks no cell (a batch with nothing padded), only
    is_causal when it is exactly the causal triangle (the decoder's self-attention, nothing padded); else itself."""
    if mask is None or bool(mask.all()):
        return None, False
    causal = causal_mask(n_q, n_k, device=mask.device)  # (Tq, Tk)
    if n_q == n_k and torch.equal(mask, causal.expand_as(mask)):
        return None, True
    return mask, False


def finite_scores(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether every score q_i · k_j is sure to be finite, from the largest query and key entries alone.

    |q_i · k_j| ≤ d_k · max|q| · max|k|, and rounding the d_k products and their sum adds at most a factor
    1 + d_k·ε/(1 − d_k·ε) ≤ 2 when d_k·ε ≤ 1/2: when that stays far below the largest number of the dtype, no
    score can overflow. NaN or ±∞ in Q or K makes the bound NaN or ∞, and the answer no (the maps are then checked);
    so does a bound too large for the dtype it is taken in."""
    info = torch.finfo(q.dtype)
    d = q.shape[-1]
    if d * info.eps > 0.5:
        return False
    largest = [torch.linalg.vector_norm(t, float("inf")) for t in (q, k)]  # max |q|, max |k|: one pass each
    return bool(d * largest[0] * largest[1] <= info.max / 4)


def fast_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool = False,
    scale: bool | float = True, bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention's context through PyTorch's fused kernel: what the untraced pass computes, and (through
    traced_context) a traced one too.

    `is_causal` says the mask is exactly the causal one (no padding, no cache offset), which lets the kernel
    skip the blocked upper triangle instead of reading a mask. T5's position bias becomes the kernel's additive
    mask (with −∞ where `mask` blocks), and `scale` False asks the kernel for no 1/√d_k.
    """
    kw = {} if scale is True else {"scale": 1.0 / score_divisor(scale, q.shape[-1])}
    if k.shape[1] != q.shape[1]:  # grouped-query attention: the kernel shares each key/value head itself
        kw["enable_gqa"] = True
    if bias is not None:
        extra = bias[None]  # (1, h, Tq, Tk)
        if mask is None and is_causal:
            mask = causal_mask(q.shape[2], k.shape[2], k.shape[2] - q.shape[2], q.device)[None]  # (1, Tq, Tk)
        if mask is not None:
            extra = extra.masked_fill(~mask[:, None], float("-inf"))  # (B, h, Tq, Tk)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=extra, **kw)  # (B, h, Tq, d_v)
        return context if mask is None else context.masked_fill(~mask.any(-1)[:, None, :, None], 0.0)
    if is_causal:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)  # (B, h, Tq, d_v)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, **kw)  # (B, h, Tq, d_v)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None], **kw)  # (B, h, Tq, d_v)
    return context.masked_fill(~mask.any(-1)[:, None, :, None], 0.0)


def relative_position_bucket(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """T5's bucket (0 … num_buckets − 1) of each distance key − query (Raffel et al. 2020, §2.1; Mesh TensorFlow).

    Bidirectional (encoder): half the buckets for keys after the query, half for keys at or before it. Causal
    (decoder): keys after the query are never seen, so every bucket goes to looking back. Within a direction the
    first half of the buckets hold the distances 0, 1, 2, … one each; the rest cover longer distances in
    logarithmically wider ranges, and every distance of max_distance or more shares the last bucket.
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets  # keys to the right
        distance = relative_position.abs()
    else:
        distance = -torch.clamp(relative_position, max=0)  # only looking back; keys to the right → distance 0
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log(0) = −∞ on the short distances is harmless: torch.where takes the exact bucket there
    large = max_exact + (
        torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """T5's relative position bias: a learned number per head for each distance bucket, B[h, i, j] = b_h[bucket(j − i)].

    It lives in the first layer's self-attention of each stack; the stack computes it once per forward pass
    and every layer of the stack adds the same map to its scores.
    """

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(num_buckets, n_heads))  # (buckets, h)
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional

    def buckets(self, n_q: int, n_k: int, offset: int = 0) -> torch.Tensor:
        """(n_q, n_k) bucket of each query/key pair; the queries sit at positions offset … offset + n_q − 1."""
        device = self.weight.device
        query = torch.arange(n_q, dtype=torch.long, device=device)[:, None] + offset  # (Tq, 1)
        key = torch.arange(n_k, dtype=torch.long, device=device)[None, :]  # (1, Tk)
        return relative_position_bucket(key - query, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, n_q: int, n_k: int, offset: int = 0) -> torch.Tensor:
        values = F.embedding(self.buckets(n_q, n_k, offset), self.weight)  # (Tq, Tk, h)
        return values.permute(2, 0, 1)  # (h, Tq, Tk)

    def describe(self) -> str:
        kind = "bidirectional" if self.bidirectional else "causal"
        return f"{self.num_buckets} {kind} buckets, distances ≥ {self.max_distance} share the last"


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Self-attention projects Q, K and V with one fused matrix [W^Q W^K W^V] (d_model → 3·d_model), laid out
    like torch.nn.MultiheadAttention's in_proj_weight. Cross-attention takes queries from the decoder
    (q_proj) and keys/values from the encoder output (fused kv_proj, d_model → 2·d_model).
    T5's departures are keyword options: heads of d_head with h·d_head ≠ d_model, no biases, no 1/√d_k, and
    (in the first layer of a stack) the relative position bias table, `relative_bias`.
    """

    def __init__(self, d_model: int, n_heads: int, cross: bool, q_dim: str, k_dim: str, trace_name: str,
                 d_head: int | None = None, bias: bool = True, scale: bool = True,
                 relative_bias: RelativePositionBias | None = None, n_kv_heads: int | None = None,
                 qkv_bias: bool | None = None, qk_norm: str = "none", norm_eps: float = 1e-6,
                 rotary: bool = False, norm_plus_one: bool = False, softcap: float = 0.0) -> None:  # fmt: skip
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.n_kv_heads = n_kv_heads if n_kv_heads is not None and not cross else n_heads
        self.d_head = d_head if d_head is not None else d_model // n_heads
        self.d_attn = n_heads * self.d_head  # d_model in the paper
        self.d_kv_attn = self.n_kv_heads * self.d_head  # width of K (and of V): d_attn unless heads are shared
        self.cross, self.scale, self.rotary = cross, scale, rotary  # scale: True (√d_k), a number s (√s) or False
        self.softcap = softcap  # Gemma 2: c·tanh(s / c) on the scaled scores before the mask; 0: none
        self.q_dim, self.k_dim = q_dim, k_dim  # position-axis names: which token labels each axis takes
        self.trace_name = trace_name
        d, inner = d_model, self.d_attn
        in_bias = bias if qkv_bias is None else qkv_bias
        if cross:
            self.q_proj = nn.Linear(d, inner, bias=in_bias)
            self.kv_proj = nn.Linear(d, 2 * inner, bias=in_bias)
        else:
            self.qkv = nn.Linear(d, inner + 2 * self.d_kv_attn, bias=in_bias)
        self.out_proj = nn.Linear(inner, d, bias=bias)
        self.relative_bias = relative_bias  # only in the first layer's self-attention of a T5 stack
        self.qk_norm = qk_norm  # "head": RMSNorm of each head's q and k (Qwen3); "full": of all heads' (OLMo 2)
        if qk_norm != "none":
            q_width, k_width = (self.d_head, self.d_head) if qk_norm == "head" else (inner, self.d_kv_attn)
            self.q_norm = RMSNorm(q_width, norm_eps, norm_plus_one)  # Gemma 3's (1 + γ) with norm_plus_one
            self.k_norm = RMSNorm(k_width, norm_eps, norm_plus_one)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, width = x.shape
        return x.view(b, t, width // self.d_head, self.d_head).transpose(1, 2)  # (B, T, h·d_k) → (B, h, T, d_k)

    def project(self, x: torch.Tensor, memory: torch.Tensor | None, cache: dict | None = None,
                rope: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict:  # fmt: skip
        """Q, K, V for every head: {"q_heads", "k_heads", "v_heads"} (B, h, T, d_k; K and V have h_kv heads under
        grouped-query attention), plus what a trace shows on the way: the projections ("qkv" (B, T, (h + 2h_kv)·d_k)
        for self-attention; "q_proj" (B, Tq, d) and "kv_proj" (B, Tk, 2d) for cross), the heads as projected
        ("q_split", "k_split"), after QK-norm ("q_normed", "k_normed") and after the rotation ("q_rotated",
        "k_rotated"), when the model has them.

        `cache` (a dict per layer, used when decoding one token at a time) keeps K and V of earlier positions
        for self-attention (rotated, as the scores read them), and the encoder's K and V for cross-attention, so
        each is computed once. `rope`: (cos, sin), each (T, d_rot), the angles of this call's positions."""
        d = self.d_attn
        if self.cross:
            q = self.q_proj(x)  # (B, Tq, d)
            parts = {"q_proj": q}
            if cache is not None and "k" in cache:
                k_heads, v_heads = cache["k"], cache["v"]
            else:
                kv = self.kv_proj(memory)  # (B, Tk, 2d)
                k, v = kv.split(d, dim=-1)  # (B, Tk, d) each
                k_heads, v_heads = self.split_heads(k), self.split_heads(v)  # (B, h, Tk, d_k)
                parts["kv_proj"] = kv
            if cache is not None:
                cache["k"], cache["v"] = k_heads, v_heads
            parts.update(q_heads=self.split_heads(q), k_heads=k_heads, v_heads=v_heads)  # q: (B, h, Tq, d_k)
            return parts
        qkv = self.qkv(x)  # (B, T, (h + 2 h_kv)·d_k)
        q, k, v = qkv.split([d, self.d_kv_attn, self.d_kv_attn], dim=-1)  # (B, T, h·d_k), (B, T, h_kv·d_k) × 2
        parts = {"qkv": qkv}
        q_heads, k_heads, v_heads = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, h(_kv), T, d_k)
        if self.qk_norm != "none" or self.rotary:
            parts.update(q_split=q_heads, k_split=k_heads)
        if self.qk_norm == "full":  # over the whole projection, then split
            q_heads, k_heads = self.split_heads(self.q_norm(q)), self.split_heads(self.k_norm(k))
        elif self.qk_norm == "head":  # over each head's d_k
            q_heads, k_heads = self.q_norm(q_heads), self.k_norm(k_heads)  # (B, h(_kv), T, d_k)
        if self.qk_norm != "none":
            parts.update(q_normed=q_heads, k_normed=k_heads)
        if rope is not None:
            q_heads, k_heads = rotate(q_heads, *rope), rotate(k_heads, *rope)  # (B, h(_kv), T, d_k)
            parts.update(q_rotated=q_heads, k_rotated=k_heads)
        if cache is not None:
            if "k" in cache:
                k_heads = torch.cat([cache["k"], k_heads], dim=2)  # (B, h_kv, T_past + T, d_k)
                v_heads = torch.cat([cache["v"], v_heads], dim=2)
            cache["k"], cache["v"] = k_heads, v_heads
        parts.update(q_heads=q_heads, k_heads=k_heads, v_heads=v_heads)
        return parts

    def combine(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, h, Tq, d_k) heads → (concat (B, Tq, h·d_k), output projection (B, Tq, d_model))."""
        b, _, tq, _ = context.shape
        concat = context.transpose(1, 2).reshape(b, tq, self.d_attn)  # (B, h, Tq, d_k) → (B, Tq, d)
        return concat, self.out_proj(concat)  # (B, Tq, d_model)

    def interior(self, x: torch.Tensor, memory: torch.Tensor | None, mask: torch.Tensor | None,
                 position_bias: torch.Tensor | None, cache: dict | None = None, unkept: bool = False,
                 rope: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict:  # fmt: skip
        """Every intermediate of the written-out attention, keyed by the last part of its step name: what a
        traced forward pass records, and what a lazy trace reruns on the same inputs to get them back.
        `unkept`: the four maps will not be kept (see attention_unkept), so they are left unbuilt ("meta"
        tensors of their shape) and "flags" holds their non-finite flags."""
        parts = self.project(x, memory, cache, rope)
        changes = active_interventions()
        flags = None
        if changes is not None and changes.touches(self.trace_name):  # ablated heads, knocked-out keys, patches
            context, maps, mask = changes.attend(self, parts, mask, position_bias, cache)
        elif unkept:
            context, flags = attention_unkept(parts["q_heads"], parts["k_heads"], parts["v_heads"], mask, self.scale)
            shape = (*parts["q_heads"].shape[:3], parts["k_heads"].shape[2])  # (B, h, Tq, Tk)
            maps = {m: torch.empty(shape, device="meta") for m in MAPS}
        else:
            context, maps = attention(parts["q_heads"], parts["k_heads"], parts["v_heads"], mask, self.scale,
                                      position_bias, self.softcap)  # fmt: skip
        q_heads, k_heads = parts["q_heads"], parts["k_heads"]
        concat, out = self.combine(context)
        out = patched(f"{self.trace_name}.out", out)  # (B, Tq, d_model)
        b, tq, tk = q_heads.shape[0], q_heads.shape[2], k_heads.shape[2]
        shown = ("qkv", "q_proj", "kv_proj", "q_normed", "k_normed", "q_rotated", "k_rotated")
        named = {k: parts[k] for k in shown if k in parts}
        if "k_rotated" in named:
            named["k_rotated"] = k_heads  # with a cache: the earlier positions' rotated keys too, as the scores read
        additive_mask = additive(mask, (b, tq, tk), q_heads.device).expand(b, tq, tk)  # (B, Tq, Tk)
        named.update(q=parts.get("q_split", q_heads), k=parts.get("k_split", k_heads), v=parts["v_heads"],
                     scores=maps["scores"],
                     scaled_scores=maps["scaled_scores"], mask=additive_mask,
                     **({"capped_scores": maps["capped_scores"]} if "capped_scores" in maps else {}),
                     masked_scores=maps["masked_scores"], weights=maps["weights"], context=context, concat=concat,
                     out=out)  # fmt: skip
        if position_bias is not None:
            named["position_bias"] = position_bias
        if flags is not None:
            named["flags"] = flags
        return named

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        cache: dict | None = None,
        is_causal: bool = False,
        position_bias: torch.Tensor | None = None,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """x: (B, Tq, d_model); memory: (B, Tk, d_model) for cross-attention; mask: (B, Tq, Tk) bool;
        position_bias: (h, Tq, Tk), T5's relative position bias, added to the scores before the mask;
        rope: (cos, sin) of the queries' positions for rotary models (see project()). `cache`: see project()."""
        tracer, changes = active_tracer(), active_interventions()
        if tracer is None and (changes is None or not changes.touches(self.trace_name)) and self.softcap:
            parts = self.project(x, memory, cache, rope)  # the fused kernel cannot soft-cap: written out
            if mask is None and is_causal:
                n_q, n_k = parts["q_heads"].shape[2], parts["k_heads"].shape[2]
                mask = causal_mask(n_q, n_k, n_k - n_q, x.device)[None]  # (1, Tq, Tk)
            context, _ = attention(parts["q_heads"], parts["k_heads"], parts["v_heads"], mask, self.scale,
                                   position_bias, self.softcap)  # (B, h, Tq, d_k)
            return self.combine(context)[1]  # (B, Tq, d_model)
        if tracer is None and (changes is None or not changes.touches(self.trace_name)):
            parts = self.project(x, memory, cache, rope)
            context = fast_attention(parts["q_heads"], parts["k_heads"], parts["v_heads"], mask, is_causal,
                                     self.scale, position_bias)  # (B, h, Tq, d_k)
            return self.combine(context)[1]  # (B, Tq, d_model)
        # a lazy trace that will rerun the maps when they are shown need not build them now (attention_unkept)
        b, tq, tk = x.shape[0], x.shape[1], (memory if self.cross else x).shape[1]
        unkept = (tracer is not None and tracer.lazy and cache is None and position_bias is None and not self.softcap
                  and (changes is None or not changes.touches(self.trace_name))
                  and b * self.n_heads * tq * tk * x.element_size() > tracer.keep_bytes)  # fmt: skip
        named = self.interior(x, memory, mask, position_bias, cache, unkept, rope)
        if tracer is None:  # changed by an intervention, not traced
            return named["out"]
        if cache is None:  # the interior can be rerun from x, memory and the mask alone
            n = self.trace_name

            kept = [None if t is None else t.detach().cpu() for t in (x, memory, mask)]

            def rerun() -> dict[str, torch.Tensor]:
                with torch.inference_mode(), applying(changes):  # the same interventions as the pass itself
                    dev = self.out_proj.weight.device
                    again = self.interior(*(None if t is None else t.to(dev) for t in kept), position_bias,
                                          rope=None if rope is None else tuple(r.to(dev) for r in rope))
                return {f"{n}.{k}": v.detach().cpu() for k, v in again.items()}

            inputs = tuple(t for t in kept if t is not None)
            with tracer.recompute_from(n, rerun, inputs):
                self._record(tracer, named, position_bias)
        else:
            self._record(tracer, named, position_bias)
        return named["out"]

    def _record_turns(self, tracer: Tracer, named: dict, which: str, dims: tuple[str, ...]) -> None:
        """QK-norm and the rotation of the queries (which = "q") or keys ("k"), when the model has them."""
        n, big = self.trace_name, which.upper()
        if f"{which}_normed" in named:
            over = "each head's" if self.qk_norm == "head" else "all heads'"
            tracer.add(f"{n}.{which}_normed", "qk_norm", named[f"{which}_normed"], dims,
                       f"QK-norm: RMSNorm of {over} {'queries' if which == 'q' else 'keys'}",
                       f"{big}' = γ·{big}/√(mean({big}²) + ε)  over {over} d_k", n)  # fmt: skip
        if f"{which}_rotated" in named:
            what = "Queries" if which == "q" else "Keys"
            tracer.add(f"{n}.{which}_rotated", "rotary", named[f"{which}_rotated"], dims,
                       f"{what} rotated by position (RoPE)",
                       f"RoPE({big})[i] = {big}[i]·cos(pos·θ_i) − {big}[i + d/2]·sin(pos·θ_i)", n)  # fmt: skip

    def _record(self, tracer: Tracer, named: dict, position_bias: torch.Tensor | None) -> None:
        n, sub, qd, kd = self.trace_name, self.trace_name, self.q_dim, self.k_dim
        h = self.n_heads
        b_term = " + b" if self.out_proj.bias is not None else ""
        width = "d_model" if self.d_attn == self.d_model else "d_attn"  # h·d_k: T5 may differ from d_model
        if self.cross:
            tracer.add(f"{n}.q_proj", "qkv", named["q_proj"], ("batch", qd, width), "Queries from the decoder",
                       "Q = X_dec W^Q", sub)
            if "kv_proj" in named:
                tracer.add(f"{n}.kv_proj", "qkv", named["kv_proj"], ("batch", kd, "d_kv"),
                           "Keys and values from the encoder output", "[K V] = X_enc [W^K W^V]", sub)
        else:
            tracer.add(f"{n}.qkv", "qkv", named["qkv"], ("batch", qd, "d_qkv"), "Fused Q, K, V projection",
                       f"[Q K V] = X [W^Q W^K W^V]{b_term}", sub)
        heads = ("batch", "head", qd, "d_head")
        h_kv = self.n_kv_heads
        kheads = ("batch", "kv_head" if h_kv != h else "head", kd, "d_head")
        shared = f" (each read by {h // h_kv} query heads)" if h_kv != h else ""
        tracer.add(f"{n}.q", "heads", named["q"], heads, f"Queries split into {h} heads",
                   f"Q → h={h} heads of d_k={self.d_head}", sub)
        self._record_turns(tracer, named, "q", heads)
        tracer.add(f"{n}.k", "heads", named["k"], kheads, f"Keys split into {h_kv} heads{shared}",
                   f"K → {'h_kv' if h_kv != h else 'h'}={h_kv} heads of d_k={self.d_head}", sub)
        self._record_turns(tracer, named, "k", kheads)
        tracer.add(f"{n}.v", "heads", named["v"], kheads, f"Values split into {h_kv} heads{shared}",
                   f"V → {'h_kv' if h_kv != h else 'h'}={h_kv} heads of d_v={self.d_head}", sub)
        att = ("batch", "head", qd, kd)
        flags = named.get("flags", {})  # the unbuilt maps' flags (attention_unkept); else each map is checked
        tracer.add(f"{n}.scores", "scores", named["scores"], att, "Dot products QKᵀ", "S = Q Kᵀ", sub,
                   nonfinite=flags.get("scores"))
        if self.scale is not True and self.scale:  # Gemma 2 and 3: a number of the model's own instead of d_k
            root = score_divisor(self.scale, self.d_head)
            tracer.add(f"{n}.scaled_scores", "scaled_scores", named["scaled_scores"], att, "Scaled by √s (not √d_k)",
                       f"S / √s  (s = {self.scale:g}, the model's query_pre_attn_scalar: √s = {root:.3f})", sub,
                       nonfinite=flags.get("scaled_scores"))
            s_term, qk_term = "S / √s", "QKᵀ/√s"
        elif self.scale:
            tracer.add(f"{n}.scaled_scores", "scaled_scores", named["scaled_scores"], att, "Scaled by √d_k",
                       f"S / √d_k  (√{self.d_head} = {math.sqrt(self.d_head):.3f})", sub,
                       nonfinite=flags.get("scaled_scores"))
            s_term, qk_term = "S / √d_k", "QKᵀ/√d_k"
        else:
            tracer.add(f"{n}.scaled_scores", "scaled_scores", named["scaled_scores"], att,
                       "Not scaled (no ÷√d_k)", "S  — no scaling (T5 folds it into the initialisation)", sub,
                       nonfinite=flags.get("scaled_scores"))
            s_term, qk_term = "S", "QKᵀ"
        if position_bias is not None:
            if self.relative_bias is not None:
                title = "Relative position bias (computed here for the whole stack)"
                how = self.relative_bias.describe()
            else:
                title = "Relative position bias (shared, from layer 1)"
                how = "the first layer's map, reused"
            with tracer.stored():  # rerun() reads this very tensor: keeping it costs nothing more
                tracer.add(f"{n}.position_bias", "position_bias", position_bias, ("head", qd, kd), title,
                           f"B[h, i, j] = b_h[bucket(j − i)]  ({how})", sub)
            s_term, qk_term = f"{s_term} + B", f"{qk_term} + B"
        if "capped_scores" in named:  # Gemma 2: soft-capped before the mask
            c = self.softcap
            tracer.add(f"{n}.capped_scores", "softcap", named["capped_scores"], att, f"Soft-capped at ±{c:g}",
                       f"{c:g}·tanh(({s_term}) / {c:g})", sub)
            s_term, qk_term = f"{c:g}·tanh(({s_term})/{c:g})", f"{c:g}·tanh(({qk_term})/{c:g})"
        tracer.add(f"{n}.mask", "mask", named["mask"], ("batch", qd, kd), "Mask (0 = allowed, −∞ = blocked)", "M",
                   sub)
        masked_title = "Relative position bias and mask added" if position_bias is not None else "Mask added"
        tracer.add(f"{n}.masked_scores", "masked_scores", named["masked_scores"], att, masked_title,
                   f"{s_term} + M", sub, nonfinite=flags.get("masked_scores"))
        tracer.add(f"{n}.weights", "attention_weights", named["weights"], att, "Attention weights (softmax)",
                   f"A = softmax({qk_term} + M)", sub, major=True, nonfinite=flags.get("weights"))
        tracer.add(f"{n}.context", "context", named["context"], heads, "Weighted sum of values", "head_i = A_i V_i",
                   sub)
        tracer.add(f"{n}.concat", "concat", named["concat"], ("batch", qd, width), "Heads concatenated",
                   "Concat(head_1, …, head_h)", sub)
        with tracer.stored():
            tracer.add(f"{n}.out", "projection", named["out"], ("batch", qd, "d_model"), "Output projection",
                       "MultiHead = Concat(head_1, …, head_h) W^O", sub, major=True)
