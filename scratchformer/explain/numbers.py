"""This run's numbers for each kind of step: pure functions of (trace, step, config, batch item).

Each function returns Facts: which TEXTS key fits the step (kind or "kind.variant"), the placeholder values it
could compute, links to earlier steps, and NOTES keys. A value that needs a missing sibling step is simply left
out; explanation.py then falls back to a plainer template, so nothing here has to raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..recording.trace import Step
from ..transformer.moe import ordinal
from .context import Ctx, counted, finite_std, row_std, sqrt, stats
from .format import Count, Num, pct, term
from .texts import PHRASES


@dataclass
class Facts:
    key: str
    values: dict = field(default_factory=dict)
    links: list[tuple[Step | None, str]] = field(default_factory=list)  # (earlier step, LINKS key)
    notes: list[str] = field(default_factory=list)  # NOTES keys


# ---------------------------------------------------------------- embeddings


def tokens(c: Ctx) -> Facts:
    ids = c.item().long().tolist()
    dim = c.pos_dims()[0]
    shown = [f"{c.label(dim, i)} → {tid}" for i, tid in enumerate(ids[:4])]
    more = PHRASES["ids_more"].format(n=len(ids)) if len(ids) > 4 else ""
    values = {"ids": ", ".join(shown) + more, "start": c.label(dim, 0)}
    return Facts("tokens.target" if dim == "tgt_pos" else "tokens", values)


def embedding(c: Ctx) -> Facts:
    cfg, dim = c.config, c.pos_dims()[0]
    if c.suffix == "scaled":
        before = c.sibling("lookup")
        values = {"sqrt_dm": sqrt(cfg.d_model)}
        if before is not None:
            values.update(std_before=finite_std(c.item(before)), std_after=finite_std(c.item()))
        return Facts("embedding.scaled", values, [(before, "lookup")])
    ids = c.sibling("tokens")
    vocab = cfg.src_vocab_size if dim == "src_pos" else cfg.tgt_vocab_size
    row = c.item()[0]
    values = {"table_size": Count(vocab * cfg.d_model), "tok": c.label(dim, 0),
              "row_head": ", ".join(str(Num(v)) for v in row[:3].tolist())}  # fmt: skip
    if ids is not None:
        values["tok_id"] = int(c.item(ids)[0].item())
    notes = [] if cfg.scale_embedding else ["no_scale"]
    if cfg.share_embeddings and cfg.has_encoder and cfg.has_decoder:
        notes.append("shared")
    if cfg.tie_output and cfg.has_decoder and (dim == "tgt_pos" or cfg.share_embeddings):
        notes.append("tied")
    return Facts("embedding", values, [(ids, "tokens")], notes)


def positional_encoding(c: Ctx) -> Facts:
    cfg = c.config
    kind = {"sinusoidal_halves": "halves", "learned": "learned", "none": "none", "rotary": "rotary"}.get(cfg.positional)
    key = f"positional_encoding.{kind}" if kind else "positional_encoding"
    if kind == "none" and cfg.relative_buckets:
        key = "positional_encoding.relative"
    pe, d = c.item(), cfg.d_model  # (T, d_model), no batch axis
    n_pos = pe.shape[0]
    values: dict = {"pos": Count(n_pos - 1)}
    if kind == "learned":
        if n_pos > 1:
            cos = torch.nn.functional.cosine_similarity(pe[:-1], pe[1:], dim=-1)
            values["neighbour_cos"] = Num(cos.mean().item())
        return Facts(key, values)
    if kind in ("none", "rotary") or n_pos == 0 or d < 2:
        return Facts(key, values)
    last = pe[-1]
    n_cos = d // 2
    n_sin = d - n_cos
    if kind == "halves":
        slow = n_sin - 1  # the last sine; its cosine sits at n_sin + slow when d is even
        cos_dim = n_sin
        last_dims = _dims(slow, n_sin + slow if n_sin + slow < d else None)
    else:
        slow = 2 * (n_sin - 1)
        cos_dim = 1
        last_dims = _dims(slow, slow + 1 if slow + 1 < d else None)
    values.update(
        n_sin=Count(n_sin), n_cos=Count(n_cos), slow_dim=Count(slow), slow=Num(last[slow].item()),
        sin0=Num(last[0].item()), cos0=Num(last[cos_dim].item()), last_dims=last_dims,
        max_wavelength=Num(2 * math.pi * 10000 ** ((2 * (n_sin - 1)) / d)),
    )  # fmt: skip
    return Facts(key, values)


def _dims(a: int, b: int | None) -> str:
    return PHRASES["dims_pair"].format(a=a, b=b) if b is not None else PHRASES["dim_one"].format(a=a)


def input_sum(c: Ctx) -> Facts:
    emb = c.sibling("scaled") or c.sibling("lookup")
    pe = c.sibling("positional_encoding")
    key = "input.types" if c.config.type_vocab_size else "input"
    if c.config.positional in ("none", "rotary") and not c.config.type_vocab_size:
        key = f"input.{c.config.positional}"
    links = [(emb, "embedded"), (pe, "positions")]
    if emb is None or pe is None:
        return Facts(key, {}, links)
    x = c.item()
    p = min(1, x.shape[0] - 1)
    e_v, pe_v, total = c.item(emb)[p, 0].item(), c.item(pe)[p, 0].item(), x[p, 0].item()
    values = {"tok": c.label(c.pos_dims()[0], p), "pos_no": Count(p + 1), "emb": Num(e_v), "pe": term(pe_v),
              "total": Num(total), "typ": term(total - e_v - pe_v)}  # fmt: skip
    return Facts(key, values, links)


# ---------------------------------------------------------------- attention


def _attention_values(c: Ctx) -> dict:
    """n_q, n_k, who asks and who answers, and the first/last query labels of an attention step."""
    att = c.step.attention_type or "other"
    pos = c.pos_dims()
    qd, kd = (pos + pos)[:2] if pos else ("tgt_pos", "tgt_pos")
    n_q, n_k = c.step.shape[-2], c.step.shape[-1]
    values = {"n_q": Count(n_q), "n_k": Count(n_k), "n_cells": Count(n_q * n_k),
              "q_positions": counted(c.noun(qd), n_q), "k_positions": counted(c.noun(kd), n_k),
              "q_first": c.label(qd, 0), "q_last": c.label(qd, n_q - 1), "k_first": c.label(kd, 0),
              "attention": PHRASES.get(f"attention.{att}", att),
              "no_mask_reason": PHRASES.get(f"no_mask.{att}", PHRASES["no_mask.other"])}  # fmt: skip
    source = f"from.{att}@text" if c.text_only and f"from.{att}@text" in PHRASES else f"from.{att}"
    if source in PHRASES:
        values["qk_from"] = PHRASES[source].format(**values)
    return values


def qkv(c: Ctx) -> Facts:
    d = c.config.d_attn  # h·d_k: d_model in the paper
    values = {"d_out": Count(c.step.shape[-1]), "d_model_1": Count(d + 1), "d_model_2": Count(2 * d)}
    if c.suffix == "q_proj":
        return Facts("qkv.cross_q", values, [(c.sublayer_input(c.step.sublayer), "x")])
    if c.suffix == "kv_proj":
        return Facts("qkv.cross_kv", values, [(c.memory(), "memory")])
    cfg = c.config
    if cfg.kv_heads != cfg.n_heads:  # narrower K and V
        kv = cfg.kv_heads * cfg.d_head
        values.update(d_kv_attn=Count(kv), k_from=Count(d + 1), k_to=Count(d + kv), h_kv=Count(cfg.kv_heads),
                      heads_word="head" if cfg.kv_heads == 1 else "heads")  # fmt: skip
        return Facts("qkv.grouped", values, [(c.sublayer_input(c.step.sublayer), "x")])
    return Facts("qkv", values, [(c.sublayer_input(c.step.sublayer), "x")])


def heads(c: Ctx) -> Facts:
    cfg = c.config
    which = c.suffix if c.suffix in ("q", "k", "v") else ""
    source = c.sibling("qkv") or c.sibling("q_proj" if which == "q" else "kv_proj")
    values = {"last_from": Count((cfg.n_heads - 1) * cfg.d_head + 1)}
    if which in ("k", "v") and c.step.dims[1] == "kv_head":  # grouped-query attention: fewer key/value heads
        h_kv, group = cfg.kv_heads, cfg.n_heads // cfg.kv_heads
        per_token = 2 * cfg.n_decoder_layers * cfg.d_head * 4  # K and V, every layer, float32
        values.update(h_kv=Count(h_kv), group=Count(group), d_kv_attn=Count(h_kv * cfg.d_head),
                      kv_last_from=Count((h_kv - 1) * cfg.d_head + 1), last_group_from=Count(cfg.n_heads - group + 1),
                      cache_token=_bytes(per_token * h_kv), cache_token_full=_bytes(per_token * cfg.n_heads),
                      n_layers=Count(cfg.n_decoder_layers), heads_word="head" if h_kv == 1 else "heads",
                      h=Count(cfg.n_heads), d_k=Count(cfg.d_head))  # fmt: skip
        one = "one" if h_kv == 1 else "groups"
        values["sharing"] = PHRASES[f"sharing.{one}"]
        for part, what in (("k", "key"), ("v", "value")):
            values[f"spread_{part}"] = PHRASES[f"spread.{one}"].format(what=what, **values)
        return Facts(f"heads.{which}.shared", values, [(source, "qkv")])
    return Facts(f"heads.{which}" if which else "heads", values, [(source, "qkv")])


def _bytes(n: int) -> str:
    """A size for people: 1,536 bytes, 48 KB, 3.1 MB."""
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{Count(n)} bytes"


def _lengths(c: Ctx, before: Step | None) -> dict:
    """The last position's head-1 vector's length before (`before`, if any) and after this step."""
    values: dict = {}
    after = c.item()  # (h, T, d_head)
    values["len_after"] = Num(after[0, -1].norm().item())
    values["tok"] = c.label(c.pos_dims()[0], after.shape[1] - 1)
    if before is not None:
        values["len_before"] = Num(c.item(before)[0, -1].norm().item())
    return values


def rotary(c: Ctx) -> Facts:
    """RoPE: q or k turned by position; how fast the pairs turn, and that lengths do not change."""
    cfg = c.config
    which = c.suffix.split("_")[0]  # "q" or "k"
    before = c.sibling(f"{which}_normed") or c.sibling(which)
    d_rot = cfg.d_rotary
    from ..transformer.rotary import inverse_frequencies  # the model's own frequencies, scaling included

    local = cfg.local_rope(c.step.layer)  # Gemma 3's sliding-window layers turn by a base of their own
    omega = inverse_frequencies(cfg, local).double()  # (d_rot/2,)
    theta = cfg.rope_local_theta if local else cfg.rope_theta
    values = {"which": PHRASES[f"rotary.{which}"], "theta": Num(theta), "d_rot": Count(d_rot),
              "half": Count(d_rot // 2), "fast": Num(omega[0].item()), "slow": Num(omega[-1].item()),
              "fast_period": Num(2 * math.pi / omega[0].item()), "slow_period": Num(2 * math.pi / omega[-1].item()),
              "rot_clause": PHRASES["rotary.partial"].format(d_rot=Count(d_rot), d_k=Count(cfg.d_head))
              if d_rot < cfg.d_head else ""}  # fmt: skip
    values.update(_lengths(c, before))
    return Facts("rotary", values, [(before, "unrotated")])


def qk_norm(c: Ctx) -> Facts:
    """QK-norm: RMSNorm of q or k before the scores; each vector's length before and after."""
    cfg = c.config
    which = c.suffix.split("_")[0]
    before = c.sibling(which)
    lengths = c.item().norm(dim=-1)  # (h, T)
    values = {"which": PHRASES[f"rotary.{which}"], "over": PHRASES[f"qk_norm.{cfg.qk_norm}"],
              "width": Count(cfg.d_head if cfg.qk_norm == "head" else c.step.shape[1] * cfg.d_head),
              "min_len": Num(lengths.min().item()), "max_len": Num(lengths.max().item()),
              "n_vectors": Count(lengths.numel())}  # fmt: skip
    values.update(_lengths(c, before))
    return Facts("qk_norm", values, [(before, "unnormed")], ["plus_one"] if cfg.rmsnorm_plus_one else [])


def scores(c: Ctx) -> Facts:
    values = _attention_values(c)
    head = c.item()[0]
    values.update(s00=Num(head[0, 0].item()), **{f"head_{k}": v for k, v in stats(head).items()})
    q = c.sibling("q_rotated") or c.sibling("q_normed") or c.sibling("q")  # what the dot products read
    k = c.sibling("k_rotated") or c.sibling("k_normed") or c.sibling("k")
    return Facts("scores", values, [(q, "q"), (k, "k")])


def scaled_scores(c: Ctx) -> Facts:
    values = _attention_values(c)
    values["sqrt_dk"] = sqrt(c.config.d_head)
    before = c.sibling("scores")
    if not c.config.scale_attention:  # T5: nothing is divided
        return Facts("scaled_scores.none", values, [(before, "scores")])
    if before is not None:
        values.update(std_before=finite_std(c.item(before)), std_after=finite_std(c.item()))
    if c.config.attn_scale_dim is not None:  # Gemma 2 and 3: √s instead of √d_k
        s = c.config.attn_scale_dim
        values.update(s=Num(s), sqrt_s=math.sqrt(s))
        return Facts("scaled_scores.custom", values, [(before, "scores")])
    return Facts("scaled_scores", values, [(before, "scores")])


def softcap(c: Ctx) -> Facts:
    """Gemma 2's soft-capping c·tanh(x / c): of the scaled scores before the mask, or of the final logits."""
    before = c.previous()  # the scaled scores, or the raw logits
    after = c.item()
    if c.step.stack == "generator":
        cfg = c.config
        values = {"cap": Num(cfg.final_softcap), "tok": c.label("tgt_pos", after.shape[0] - 1)}
        row, raw = after[-1], c.item(before)[-1]  # (vocab,) each, the last position
        top = int(raw.argmax().item())
        values.update(max_before=Num(raw[top].item()), max_after=Num(row[top].item()), top_tok=c.id_label(top),
                      min_before=Num(raw.min().item()), min_after=Num(row.min().item()))  # fmt: skip
        return Facts("softcap.logits", values, [(before, "uncapped")])
    values = _attention_values(c)
    head, raw = after[0], c.item(before)[0]  # (n_q, n_k): head 1
    values.update(cap=Num(c.config.attn_softcap), max_before=Num(raw.max().item()), max_after=Num(head.max().item()),
                  min_before=Num(raw.min().item()), min_after=Num(head.min().item()))  # fmt: skip
    return Facts("softcap", values, [(before, "uncapped")])


def position_bias(c: Ctx) -> Facts:
    """T5's relative position bias map (h, n_q, n_k): what the last query gets for itself and its neighbours."""
    cfg = c.config
    values = _attention_values(c)
    decoder = c.step.stack == "decoder"
    per_direction = cfg.relative_buckets if decoder else cfg.relative_buckets // 2
    values.update(n_buckets=Count(cfg.relative_buckets), max_distance=Count(cfg.relative_max_distance),
                  max_exact_1=Count(max(per_direction // 2 - 1, 0)),
                  direction=PHRASES["direction.causal" if decoder else "direction.bidirectional"],
                  stack=PHRASES.get(f"stack.{c.step.stack}", c.step.stack))  # fmt: skip
    head = c.item()[0]  # (n_q, n_k), head 1
    n_q, n_k = head.shape
    i, j = n_q - 1, n_k - 1  # the last query sits at the last key position (keys before it may be cached)
    values["self_bias"] = Num(head[i, j].item())
    values["left_clause"] = PHRASES["left_clause"].format(left=Num(head[i, j - 1].item())) if j > 0 else ""
    values["right_clause"] = ""
    if not decoder and i > 0:  # the query before the last, and the key to its right (the last position)
        values["right_clause"] = PHRASES["right_clause"].format(q_prev=c.label(c.pos_dims()[0], i - 1),
                                                                right=Num(head[i - 1, j].item()))
    layer = c.step.layer or 0
    key = "position_bias.shared" if layer > 0 else "position_bias"
    first = c.earlier(f"{c.step.stack}.0.self_attn.position_bias") if layer > 0 else None
    return Facts(key, values, [(first, "bias_first"), (c.sibling("scaled_scores"), "unscaled")])


def mask(c: Ctx) -> Facts:
    values = _attention_values(c)
    m = c.item()  # (n_q, n_k): 0 or −∞
    n_q, n_k = m.shape
    blocked = torch.isneginf(m)
    n_blocked = int(blocked.sum().item())
    values.update(n_blocked=Count(n_blocked), n_allowed=Count(m.numel() - n_blocked))
    links = [(c.sibling("scaled_scores"), "scaled")]
    if n_blocked == 0:
        return Facts("mask.none", values, links)
    if c.step.attention_type == "decoder.self_attn":
        q = torch.arange(n_q)[:, None] + (n_k - n_q)  # the absolute position of each query
        n_causal = int((torch.arange(n_k)[None, :] > q).sum().item())
        n_pad = n_blocked - n_causal
        clause = PHRASES["pad_clause"].format(n_causal=Count(n_causal), n_pad_cells=Count(n_pad)) if n_pad else ""
        allowed = (~blocked).sum(-1)
        values.update(pad_clause=clause, first_seen=Count(allowed[0].item()), last_seen=Count(allowed[-1].item()))
        return Facts("mask.causal", values, links)
    values["n_pad_keys"] = Count(int(blocked.all(0).sum().item()))
    return Facts("mask.padding", values, links)


def masked_scores(c: Ctx) -> Facts:
    values = _attention_values(c)
    n_blocked = int(torch.isneginf(c.item()[0]).sum().item())
    values["n_blocked"] = Count(n_blocked)
    capped = c.sibling("capped_scores")  # Gemma 2: the mask is added to the soft-capped scores
    links = [(capped, "capped") if capped is not None else (c.sibling("scaled_scores"), "scaled"),
             (c.sibling("mask"), "mask")]  # fmt: skip
    bias = c.sibling("position_bias")
    if bias is not None:  # T5: S + B + M
        return Facts("masked_scores.bias_none" if n_blocked == 0 else "masked_scores.bias", values,
                     [links[0], (bias, "bias"), links[1]])  # fmt: skip
    return Facts("masked_scores.none" if n_blocked == 0 else "masked_scores", values, links)


def attention_weights(c: Ctx) -> Facts:
    values = _attention_values(c)
    pos = c.pos_dims()
    kd = pos[-1] if pos else "tgt_pos"
    head = c.item()[0]
    last = head[-1]
    j = int(last.argmax().item())
    values.update(w_max=Num(last[j].item()), w_min=Num(last.min().item()), k_top=c.label(kd, j), k_pos=Count(j + 1))
    masked = c.sibling("masked_scores")
    if masked is not None:
        values["n_zero"] = Count(int(torch.isneginf(c.item(masked)[0]).sum().item()))
    key = {"decoder.cross_attn": "attention_weights.cross", "decoder.self_attn": "attention_weights.masked"}
    links = [(masked, "masked")]
    if c.step.attention_type == "decoder.cross_attn":
        links.append((c.memory(), "memory"))
    return Facts(key.get(c.step.attention_type or "", "attention_weights"), values, links)


def context(c: Ctx) -> Facts:
    weights, v = c.sibling("weights"), c.sibling("v")
    values: dict = {}
    if weights is not None:
        values.update(_attention_values_of(c, weights))
        row = c.item(weights)[0, -1]  # head 1, last query
        j = int(row.argmax().item())
        values.update(w_top=Num(row[j].item()), k_top=c.label(c.pos_dims(weights)[-1], j),
                      ctx=Num(c.item()[0, -1, 0].item()))  # fmt: skip
        if v is not None:
            values["v_top"] = Num(c.item(v)[0, j, 0].item())
    return Facts("context", values, [(weights, "weights"), (v, "v")])


def _attention_values_of(c: Ctx, step: Step) -> dict:
    return _attention_values(Ctx(c.trace, step, c.config, c.batch))


def concat(c: Ctx) -> Facts:
    values = {"last_from": Count((c.config.n_heads - 1) * c.config.d_head + 1)}
    return Facts("concat", values, [(c.sibling("context"), "context")])


def projection(c: Ctx) -> Facts:
    cfg = c.config
    d = cfg.d_model
    count = cfg.d_attn * d + (d if cfg.linear_bias else 0)
    return Facts("projection", {"proj_params": Count(count)}, [(c.sibling("concat"), "concat")])


def dropout(c: Ctx) -> Facts:
    p = c.config.dropout
    x = c.item()
    values = {"p": Num(p), "zero_pct": pct((x == 0).double().mean().item()), "n_values": Count(x.numel())}
    if p < 1:
        values["keep_scale"] = Num(1 / (1 - p))
    return Facts("dropout", values, [(c.previous(), "dropped")])


# ---------------------------------------------------------------- Add & Norm


def residual(c: Ctx) -> Facts:
    if c.config.parallel_residual and c.step.name.endswith(".add_norm3.residual"):
        return _parallel_residual(c)
    first = next(s for s in c.trace if s.sublayer == c.step.sublayer)  # this Add & Norm's first step
    sub_out = c.trace[first.index - 1] if first.index > 0 else None
    post = sub_out is not None and sub_out.name.endswith(".post_norm")  # Gemma's sandwich: added after a norm
    inner = c.trace[sub_out.index - 1] if post else sub_out  # the sublayer's own output
    x = c.sublayer_input(inner.sublayer) if inner is not None else None
    pre_norm = x is not None and x.kind == "layer_norm" and x.sublayer.endswith(".norm")
    if pre_norm:  # pre-LN: the sublayer read LayerNorm(x); the residual adds x itself, the step before the norm
        x = c.trace[x.index - 1] if x.index > 0 else None
    sandwich = "residual.post_only" if c.config.post_norm_only else "residual.sandwich"  # OLMo 2: no pre-norm
    key = sandwich if post else "residual.pre" if pre_norm else "residual"
    if inner is None or inner.kind not in ("projection", "ffn_out") or sub_out.shape != c.step.shape:
        sub_out = x = None  # the trace lacks the sublayer's output
    links = [(sub_out, "sublayer"), (x, "x")]
    if sub_out is None or x is None or x.shape != c.step.shape:
        return Facts(key, {}, links)  # the plain template stands in
    r, x_t = c.item(), c.item(x)
    s = r - x_t  # what was added: Sublayer(x), after dropout when training
    values = {"tok": c.label(c.pos_dims()[0], 0), "x0": Num(x_t[0, 0].item()), "s0": Num(s[0, 0].item()),
              "r0": Num(r[0, 0].item()), "sd_x": finite_std(x_t), "sd_s": finite_std(s), "sd_r": finite_std(r)}
    return Facts(key, values, links)


def _parallel_residual(c: Ctx) -> Facts:
    """x + Attention(LN₁(x)) + FFN(LN₂(x)): x is the layer's input, the step before its first norm (add_norm1's),
    not the step before add_norm3's norm (the attention's output, traced in between)."""
    layer = c.step.name.rsplit(".add_norm3.", 1)[0]
    first = next((s for s in c.trace if s.name == f"{layer}.add_norm1.norm"), None)
    x = c.trace[first.index - 1] if first is not None and first.index > 0 else None
    if x is None or x.shape != c.step.shape:
        return Facts("residual.parallel", {}, [(x, "x")])
    r, x_t = c.item(), c.item(x)
    s = r - x_t  # what both sublayers added
    values = {"tok": c.label(c.pos_dims()[0], 0), "x0": Num(x_t[0, 0].item()), "s0": Num(s[0, 0].item()),
              "r0": Num(r[0, 0].item()), "sd_x": finite_std(x_t), "sd_s": finite_std(s), "sd_r": finite_std(r)}
    return Facts("residual.parallel", values, [(x, "x")])


def layer_norm(c: Ctx) -> Facts:
    rms = c.config.norm == "rmsnorm" and c.step.stack not in ("src_embed", "tgt_embed")
    if c.step.name.endswith("final_norm.out"):
        key, before, link = "layer_norm.rms_final" if rms else "layer_norm.final", c.previous(), "before"
    elif c.step.name.endswith(".post_norm"):  # a sandwich's second norm: the sublayer's output, before the add
        only = c.config.post_norm_only  # OLMo 2: the only norm around the sublayer
        key, before, link = "layer_norm.rms_post_only" if only else "layer_norm.rms_post", c.previous(), "before"
    elif c.step.sublayer.endswith(".norm"):  # pre-LN (norm_first): the norm before a sublayer
        key, before, link = "layer_norm.rms_pre" if rms else "layer_norm.pre", c.previous(), "before"
    elif c.step.stack in ("src_embed", "tgt_embed"):
        key, before, link = "layer_norm.embed", c.sibling("sum"), "sum"
    else:
        key, before, link = "layer_norm.rms" if rms else "layer_norm", c.sibling("residual"), "residual"
    stack = c.step.stack
    out = c.item()
    values = {"tok": c.label(c.pos_dims()[0], 0), "eps": Num(c.config.layer_norm_eps),
              "mu_out": _mean(out[0]), "sd_out": Num(row_std(out[0]).item()),
              "avg_sd_out": Num(row_std(out).mean().item()),
              "stack": PHRASES.get(f"stack.{stack}", stack),
              "consumer": PHRASES.get(f"consumer.{stack}", PHRASES["consumer.other"])}  # fmt: skip
    if before is not None and before.shape == c.step.shape:
        x = c.item(before)
        values.update(mu_in=_mean(x[0]), sd_in=Num(row_std(x[0]).item()),
                      avg_sd_in=Num(row_std(x).mean().item()))  # fmt: skip
        if rms:
            values.update(rms_in=Num(_rms(x[0]).item()), avg_rms_in=Num(_rms(x).mean().item()))
    if rms:
        values.update(rms_out=Num(_rms(out[0]).item()), avg_rms_out=Num(_rms(out).mean().item()))
        link = "before_rms" if link == "before" else link
    return Facts(key, values, [(before, link)], ["plus_one"] if rms and c.config.rmsnorm_plus_one else [])


def _rms(x: torch.Tensor) -> torch.Tensor:
    """Root mean square over the last axis (what RMSNorm divides by, without ε)."""
    return x.double().pow(2).mean(-1).sqrt()


def _mean(x: torch.Tensor) -> Num:
    """A vector's mean, with float32 rounding noise (|mean| ≪ std) shown as the 0 it stands for."""
    mean, std = x.mean().item(), x.std(unbiased=False).item()
    return Num(0.0 if abs(mean) < 1e-6 * max(std, 1.0) else mean)


# ---------------------------------------------------------------- feed-forward and output


def _ffn_values(c: Ctx) -> dict:
    x = c.item()
    return {"zero_pct": pct((x == 0).double().mean().item()), "neg_pct": pct((x < 0).double().mean().item()),
            "n_hidden": Count(x.numel()), "act_name": PHRASES[f"act.{c.config.activation}"],
            "act_short": PHRASES[f"act_short.{c.config.activation}"]}  # fmt: skip


def ffn_hidden(c: Ctx) -> Facts:
    act = c.config.activation
    values = _ffn_values(c)
    if c.config.ffn_gated:  # gate ⊙ linear
        values["small_pct"] = pct((c.item().abs() < 0.01).double().mean().item())
        return Facts("ffn_hidden.gated", values, [(c.sibling("gate"), "gate"), (c.sibling("linear"), "linear")])
    key = "ffn_hidden" if act == "relu" else f"ffn_hidden.{act}"
    return Facts(key, values, [(c.sublayer_input(c.step.sublayer), "x")])


def ffn_gate(c: Ctx) -> Facts:
    """The two branches of a gated feed-forward unit: act(x W_1) (`.gate`) and x V (`.linear`)."""
    key = "ffn_gate.linear" if c.suffix == "linear" else "ffn_gate"
    return Facts(key, _ffn_values(c), [(c.sublayer_input(c.step.sublayer), "x")])


def ffn_out(c: Ctx) -> Facts:
    if c.step.sublayer.endswith(".moe"):  # an expert's output or the mixture's weighted sum
        return moe_out(c)
    cfg = c.config
    d, f, inner, bias = cfg.d_model, cfg.d_ff, cfg.d_attn, cfg.linear_bias
    ffn_bias = bias if cfg.ffn_bias is None else cfg.ffn_bias
    k = 3 if cfg.ffn_gated else 2  # W_1, (V,) W_2
    ffn = k * d * f + ((k - 1) * f + d if ffn_bias else 0)
    if ffn_bias:
        formula = f"{k} · {Count(d)} · {Count(f)} + {'' if k == 2 else f'{k - 1} · '}{Count(f)} + {Count(d)}"
    else:
        formula = f"{k} · {Count(d)} · {Count(f)}"
    if cfg.ffn_gated:
        parts = PHRASES["ffn_parts.gated_bias" if ffn_bias else "ffn_parts.gated"]
    else:
        parts = PHRASES["ffn_parts.bias" if ffn_bias else "ffn_parts.plain"]
    n_attn = 2 if c.step.stack == "decoder" and cfg.has_encoder else 1
    kv = cfg.kv_heads * cfg.d_head  # K and V widths (narrower under grouped-query attention)
    qkv_bias = bias if cfg.qkv_bias is None else cfg.qkv_bias
    attn = 2 * d * inner + 2 * d * kv + (inner + 2 * kv if qkv_bias else 0) + (d if bias else 0)
    attn += {"head": 2 * cfg.d_head, "full": inner + kv}.get(cfg.qk_norm, 0)
    norm = d if cfg.norm == "rmsnorm" else 2 * d
    norms = (n_attn + 1) * (2 if cfg.post_norm and not cfg.post_norm_only else 1)  # two in a sandwich
    layer = ffn + n_attn * attn + norms * norm  # attention, FFN and their norms
    if cfg.relative_buckets and c.step.layer == 0:
        layer += cfg.relative_buckets * cfg.n_heads  # the relative position bias table of the first layer
    values = {"ffn_params": Count(ffn), "ffn_share": pct(ffn / layer), "ffn_formula": formula, "ffn_parts": parts}
    return Facts("ffn_out", values, [(c.sibling("hidden"), "hidden")])


# ---------------------------------------------------------------- mixture of experts (scratchformer.transformer.moe)


def _routing(c: Ctx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This batch item's router probabilities p (T, E), each token's chosen experts, most probable first (T, k),
    and their weights (T, k), read from the sublayer's router steps."""
    moe = c.step.sublayer
    probs = c.item(c.trace[f"{moe}.router_weights"])  # (T, E)
    chosen = probs.topk(c.config.experts_per_token, dim=-1).indices  # (T, k), the order the model chose in
    weights = c.item(c.trace[f"{moe}.chosen_weights"]).gather(-1, chosen)  # (T, k)
    return probs, chosen, weights


def _and(items: list[str]) -> str:
    """'3', '3 and 1', '3, 1 and 4'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _busiest(counts: torch.Tensor, shown: int = 4) -> str:
    """'expert 3: 5 tokens, expert 1: 4 tokens, expert 2: 0 tokens': how many tokens each expert got, the busiest
    first."""
    order = sorted(range(len(counts)), key=lambda e: (-int(counts[e]), e))
    parts = [PHRASES["expert_load"].format(e=e + 1, n=counted("token", int(counts[e]))) for e in order[:shown]]
    more = PHRASES["experts_more"].format(n=len(order) - shown) if len(order) > shown else ""
    return ", ".join(parts) + more


def _expert_params(cfg) -> int:
    """The weights of one expert: W_1, (V,) W_2, d_model × d_expert each (and their biases)."""
    d, f, k = cfg.d_model, cfg.d_expert or cfg.d_ff, 3 if cfg.ffn_gated else 2
    bias = cfg.linear_bias if cfg.ffn_bias is None else cfg.ffn_bias
    return k * d * f + ((k - 1) * f + d if bias else 0)


def _moe_values(c: Ctx) -> dict:
    cfg = c.config
    one = _expert_params(cfg)
    return {"n_experts": Count(cfg.n_experts), "top_k": Count(cfg.experts_per_token),
            "d_expert": Count(cfg.d_expert or cfg.d_ff), "expert_params": Count(one),
            "active_params": Count(one * cfg.experts_per_token), "all_params": Count(one * cfg.n_experts)}  # fmt: skip


def router(c: Ctx) -> Facts:
    """The router's logits, probabilities and chosen weights: who sends which token where."""
    values = _moe_values(c)
    last = c.step.shape[1] - 1
    values["tok"] = c.label("tgt_pos", last)
    if c.suffix == "router_logits":
        row = c.item()[last]  # (E,)
        values.update(top_e=Count(int(row.argmax()) + 1), top_logit=Num(row.max().item()),
                      low_e=Count(int(row.argmin()) + 1), low_logit=Num(row.min().item()))  # fmt: skip
        return Facts("router", values, [(c.sublayer_input(c.step.sublayer), "x")])
    probs, chosen, weights = _routing(c)
    if c.suffix == "router_weights":
        firsts = torch.bincount(chosen[:, 0], minlength=probs.shape[1])  # (E,): how often each is first choice
        busy = int(firsts.argmax())
        values.update(top_e=Count(int(chosen[last, 0]) + 1), top_p=Num(probs[last].max().item()),
                      busy_e=Count(busy + 1), busy_n=counted("token", int(firsts[busy])))  # fmt: skip
        return Facts("router.weights", values, [(c.sibling("router_logits"), "router_logits")])
    loads = torch.bincount(chosen.reshape(-1), minlength=probs.shape[1])  # (E,): tokens each expert got
    values.update(experts=_and([str(int(e) + 1) for e in chosen[last]]),
                  weights=_and([str(Num(w)) for w in weights[last].tolist()]), loads=_busiest(loads),
                  weight_sum=Num(weights[last].sum().item()),
                  renorm=PHRASES["moe.renormalised" if c.config.moe_renormalize else "moe.kept"])  # fmt: skip
    return Facts("router.chosen", values, [(c.sibling("router_weights"), "router_probs")])


def moe_out(c: Ctx) -> Facts:
    """One choice of expert's output (`choice_j`), or the weighted sum of them all (`out`)."""
    values = _moe_values(c)
    _, chosen, weights = _routing(c)
    last = c.step.shape[1] - 1
    values["tok"] = c.label("tgt_pos", last)
    moe = c.step.sublayer
    routing = c.earlier(f"{moe}.chosen_weights")
    if c.suffix.startswith("choice_"):
        j = int(c.suffix.split("_")[1]) - 1
        counts = torch.bincount(chosen[:, j], minlength=c.config.n_experts)  # (E,)
        values.update(nth=PHRASES["moe.nth"].format(n=ordinal(j + 1)), e=Count(int(chosen[last, j]) + 1),
                      w=Num(weights[last, j].item()), len_out=Num(c.item()[last].norm().item()),
                      counts=_busiest(counts))  # fmt: skip
        return Facts("ffn_out.expert", values, [(routing, "chosen"), (c.sublayer_input(moe), "x")])
    k = c.config.experts_per_token
    outs = [c.item(c.trace[f"{moe}.choice_{j + 1}"])[last, 0].item() for j in range(k)]
    w = weights[last].tolist()
    values.update(
        sum_expr=" + ".join(PHRASES["moe.weighted"].format(w=Num(w[j]), e=int(chosen[last, j]) + 1) for j in range(k)),
        first_expr=" + ".join(f"{Num(w[j])} × {term(outs[j])}" for j in range(k)), out0=Num(c.item()[last, 0].item()),
    )  # fmt: skip
    links = [(routing, "chosen")] + [(c.earlier(f"{moe}.choice_{j + 1}"), "choice") for j in range(k)]
    return Facts("ffn_out.moe", values, links)


def output_scale(c: Ctx) -> Facts:
    before = c.previous()
    values = {"inv_sqrt_dm": Num(c.config.d_model**-0.5)}
    if before is not None and before.shape == c.step.shape:
        values.update(std_before=finite_std(c.item(before)), std_after=finite_std(c.item()))
    return Facts("output_scale", values, [(before, "scaled_out")])


def logits(c: Ctx) -> Facts:
    cfg = c.config
    x = c.item()  # (T, vocab)
    row = x[-1]
    top = int(row.argmax().item())
    values = {"tok": c.label("tgt_pos", x.shape[0] - 1), "top_logit": Num(row[top].item()),
              "top_tok": c.id_label(top), "row_min": Num(row.min().item()), "row_max": Num(row.max().item())}
    links = [(c.previous(), "decoder_out")]
    if cfg.tie_output:
        links.append((c.earlier("tgt_embed.lookup"), "table"))
    notes = ["output_scale"] if cfg.scale_decoder_output else []
    notes += ["logits_bias"] if cfg.final_logits_bias else []
    notes += ["capped_logits"] if cfg.final_softcap else []
    return Facts("logits" if cfg.tie_output else "logits.untied", values, links, notes)


def probabilities(c: Ctx) -> Facts:
    p = c.item()  # (T, vocab)
    n = p.shape[0]
    top_p, top = p.max(-1)
    values = {"tok": c.label("tgt_pos", n - 1), "top_tok": c.id_label(int(top[-1].item())),
              "top_p": Num(top_p[-1].item()), "first_clause": ""}  # fmt: skip
    if n > 1:
        values["first_clause"] = PHRASES["first_clause"].format(
            first=c.label("tgt_pos", 0), first_top=c.id_label(int(top[0].item())), first_p=Num(top_p[0].item())
        )
    return Facts("probabilities", values, [(c.sibling("capped") or c.sibling("logits"), "logits")])


def _dictionary_values(c: Ctx) -> dict:
    read = c.step.name.rsplit(".dict.", 1)[0]
    found = c.trace.dictionaries.get(read)
    d, to = (found[0], found[2]) if found is not None else (None, read)
    arch = ""
    if d is not None:
        arch = (f"ReLU(pre) where pre is among the token's {d.k} largest" if d.architecture == "topk"
                else "pre where pre is above the feature's own threshold" if d.architecture in ("jumprelu", "batchtopk")
                else "ReLU(pre)")  # fmt: skip
    kind = "transcoder" if d is not None and d.transcoder else "SAE"
    last = c.step.shape[1] - 1
    pos = c.step.dims[1]
    return {"kind": kind, "read": read, "target": to, "formula_words": arch or "a sparse code of the token",
            "width": Count(c.step.shape[-1]), "tok": c.label(pos, last), "last": last, "dict": d,
            "pre_formula": "(x − b_dec) W_enc + b_enc" if d is None or d.centres_input else "x W_enc + b_enc"}


def dictionary(c: Ctx) -> Facts:
    """An attached dictionary's steps (scratchformer.features.attach): pre-activations, features, reconstruction,
    error."""
    v = _dictionary_values(c)
    x = c.item()  # (P, width)
    row = x[v.pop("last")]
    v.pop("dict")
    if c.suffix == "pre":
        v.update(min=Num(row.min().item()), max=Num(row.max().item()), top_f=Count(int(row.argmax())),
                 top_v=Num(row.max().item()))  # fmt: skip
        return Facts("features.pre", v, [(c.trace.find(v["read"]), "x")])
    if c.suffix == "features":
        v.update(n_active=Count(int((row > 0).sum())), top_f=Count(int(row.argmax())), top_v=Num(row.max().item()),
                 mean_active=Num(float((x > 0).sum(-1).double().mean())))  # fmt: skip
        return Facts("features", v, [(c.sibling("pre"), "pre")])
    y = c.item(c.trace.find(v["target"])) if c.trace.find(v["target"]) is not None else x
    target_row = y[c.step.shape[1] - 1]  # the last position, as `row`
    v["len_target"] = Num(float(target_row.norm()))
    if c.suffix == "recon":
        total = (y - y.mean(0)).pow(2).sum()
        share = 1 - float((y - x).pow(2).sum() / total) if total > 0 else 1.0
        v.update(len_recon=Num(float(row.norm())), share=f"{share:.0%}")
        return Facts("reconstruction", v, [(c.sibling("features"), "features")])
    v.update(len_error=Num(float(row.norm())),
             err_share=f"{float(row.norm() / target_row.norm()):.0%}" if target_row.norm() > 0 else "all")
    return Facts("reconstruction.error", v, [(c.sibling("recon"), "recon")])


FACTS: dict[str, Callable[[Ctx], Facts]] = {
    "tokens": tokens, "embedding": embedding, "positional_encoding": positional_encoding, "input": input_sum,
    "mask": mask, "qkv": qkv, "heads": heads, "scores": scores, "scaled_scores": scaled_scores,
    "masked_scores": masked_scores, "attention_weights": attention_weights, "context": context, "concat": concat,
    "projection": projection, "dropout": dropout, "residual": residual, "layer_norm": layer_norm,
    "ffn_hidden": ffn_hidden, "ffn_out": ffn_out, "logits": logits, "probabilities": probabilities,
    "position_bias": position_bias, "ffn_gate": ffn_gate, "output_scale": output_scale, "rotary": rotary,
    "qk_norm": qk_norm, "router": router, "softcap": softcap, "features": dictionary, "reconstruction": dictionary,
}  # fmt: skip


def facts(c: Ctx) -> Facts:
    """The Facts of any step; a kind without a function gets the generic 'step' text."""
    fn = FACTS.get(c.step.kind)
    return fn(c) if fn is not None else Facts("step")
