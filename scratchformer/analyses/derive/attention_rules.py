"""Derivations inside multi-head attention (paper §3.2): a Q/K/V projection unit, the head split, the score
q_i·k_j, ÷ √d_k, T5's relative position bias, the mask (0 or −∞, and why), the softmax weight, the weighted sum of
values, the concatenation and the output projection."""

from __future__ import annotations

import math

import numpy as np

from ...recording.trace import Step
from ...transformer.attention import score_divisor
from . import graph
from .reader import Reader
from .result import Term, num, paren, summed


def _attention(r: Reader, step: Step):
    return r.model.get_submodule(step.sublayer)


def linear_unit(r: Reader, x_step: str, prefix: tuple[int, ...], weight: str, u: int, x_name: str = "x"
                ) -> tuple[float, str, list[Term]]:  # fmt: skip
    """One output unit of a linear map, Σ_d x[d]·W[u, d] + b[u], reading the row of `x_step` at `prefix`."""
    x = r.row(x_step, prefix)
    w = r.param_row(f"{weight}.weight", (u,))
    bias_name = f"{weight}.bias"
    extra = [Term(f"b[{u}]", r.param_cell(bias_name, (u,)))] if r.has_param(bias_name) else []
    return summed(x * w, lambda d: f"{x_name}[{d}]·W[{u}, {d}]", x, w, extra)


def _widths(mha, parts: tuple[str, ...]) -> list[int]:
    """The columns each of Q, K, V takes in a projection (K and V are narrower under grouped-query attention)."""
    return [mha.d_attn if p == "Q" else mha.d_kv_attn for p in parts]


def _part(mha, u: int, parts: tuple[str, ...]) -> str:
    """Which of Q, K, V, which head and which of its dimensions unit u of a fused projection is."""
    rest, which = u, 0
    for which, width in enumerate(_widths(mha, parts)):  # noqa: B007
        if rest < width:
            break
        rest -= width
    head, dim = divmod(rest, mha.d_head)
    return f"{parts[which]} of head {head + 1}, dimension {dim}"


def _kv_head(mha, h: int) -> int:
    """The key/value head query head h reads (itself unless heads are shared: h // (h_q / h_kv))."""
    return h // (mha.n_heads // mha.n_kv_heads)


def scored(r: Reader, sublayer: str, which: str) -> str:
    """The q or k step the scores read: after the rotation and QK-norm when the model has them."""
    for suffix in (f"{which}_rotated", f"{which}_normed", which):
        if r.trace.find(f"{sublayer}.{suffix}") is not None:
            return f"{sublayer}.{suffix}"
    return f"{sublayer}.{which}"


def projection_in(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """[Q K V] = X [W^Q W^K W^V] + b (self-attention), Q = X_dec W^Q, [K V] = X_enc [W^K W^V] (cross)."""
    b, p, u = index
    mha, last = _attention(r, step), step.name.rsplit(".", 1)[1]
    norm_first = r.config.norm_first
    if last == "kv_proj":
        x_step, parts = graph.memory_step(r.trace, norm_first), ("K", "V")
        formula = "[K V][j, u] = Σ_d x_enc[j, d]·W[u, d] + b[u]"
    else:
        x_step = graph.sublayer_input(r.trace, step.sublayer, norm_first)
        parts = ("Q",) if last == "q_proj" else ("Q", "K", "V")
        lhs = "[Q K V]" if last == "qkv" else "Q"
        formula = f"{lhs}[i, u] = Σ_d x[i, d]·W[u, d] + b[u]"
    total, expression, terms = linear_unit(r, x_step.name, (b, p), f"{step.sublayer}.{last}", u)
    note = (f"Unit {u} is the {_part(mha, u, parts)}: the dot product of the input row at this position "
            f"({x_step.name}) with row {u} of the weight matrix.")
    return dict(recomputed=total, formula=formula, expression=expression, terms=terms, note=note)


def head_split(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """q/k/v[b, h, pos, e] = the projection's column (part · d_attn) + h · d_head + e: an index mapping, no math."""
    b, h, p, e = index
    mha, part = _attention(r, step), step.name.rsplit(".", 1)[1]  # q, k or v
    if mha.cross:
        source = f"{step.sublayer}.q_proj" if part == "q" else f"{step.sublayer}.kv_proj"
        offset = mha.d_attn if part == "v" else 0
    else:
        source = f"{step.sublayer}.qkv"
        offset = sum(_widths(mha, ("Q", "K", "V"))[: "qkv".index(part)])
    col = offset + h * mha.d_head + e
    out = r.cell(source, (b, p, col))
    start = ("part·d_model + " if mha.d_kv_attn == mha.d_attn else "offset + ") if offset else ""
    return dict(recomputed=out, formula=f"{part}[h, pos, e] = projection[pos, {start}h·d_k + e]",
                expression=f"{part}[{h}, {p}, {e}] = {source.rsplit('.', 1)[1]}[{p}, {offset} + {h}·{mha.d_head} + "
                           f"{e} = {col}] = {num(out)}",
                note=f"No arithmetic: head {h + 1} owns columns {offset + h * mha.d_head}–"
                     f"{offset + (h + 1) * mha.d_head - 1} of the projection; this is its dimension {e}.")  # fmt: skip


def score(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """S[i, j] = q_i · k_j = Σ_e q[i, e]·k[j, e]."""
    b, h, i, j = index
    mha = _attention(r, step)
    g = _kv_head(mha, h)
    q = r.row(scored(r, step.sublayer, "q"), (b, h, i))
    k = r.row(scored(r, step.sublayer, "k"), (b, g, j))
    total, expression, terms = summed(q * k, lambda e: f"q[{e}]·k[{e}]", q, k)
    shared = f" Query head {h + 1} reads key head {g + 1}, which it shares with {mha.n_heads // mha.n_kv_heads - 1} " \
             "other query heads (grouped-query attention)." if mha.n_kv_heads != mha.n_heads else ""
    turned = " Both were turned by their positions first (RoPE), so the product depends on j − i, not on i and j." \
        if mha.rotary else ""
    return dict(recomputed=total, formula="S[i, j] = q_i · k_j = Σ_e q_i[e]·k_j[e]",
                expression=f"q_{i}·k_{j} = {expression}", terms=terms,
                note=f"The query of position {i} against the key of position {j}, over d_k = {len(q)} dimensions: "
                     f"large when the two vectors point the same way.{turned}{shared}")  # fmt: skip


def scaled_score(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    s = r.cell(f"{step.sublayer}.scores", index)
    mha = _attention(r, step)
    if not mha.scale:
        return dict(recomputed=s, formula="S (no ÷ √d_k)", expression=f"{num(s)} (unchanged)",
                    note="This model does not divide by √d_k (T5 folds the factor into its initialisation).")
    if mha.scale is not True:  # Gemma 2 and 3: √s, s the model's query_pre_attn_scalar
        root = score_divisor(mha.scale, mha.d_head)
        out = s / root
        return dict(recomputed=out, formula="S[i, j] / √s  (√s in place of √d_k)",
                    expression=f"{paren(s)} / √{mha.scale:g} = {paren(s)} / {num(root)} = {num(out)}",
                    terms=[Term("S", s), Term("√s", root)],
                    note=f"This model divides by √s with s = {mha.scale:g} (its query_pre_attn_scalar) instead of "
                         f"√d_k = √{mha.d_head}.")  # fmt: skip
    root = math.sqrt(mha.d_head)
    out = s / root
    return dict(recomputed=out, formula="S[i, j] / √d_k", expression=f"{paren(s)} / √{mha.d_head} = {paren(s)} / "
                                                                   f"{num(root)} = {num(out)}",
                terms=[Term("S", s), Term("√d_k", root)],
                note="Dividing by √d_k keeps the scores' spread near 1 however wide the heads are, so the softmax "
                     "does not saturate (paper §3.2.1).")  # fmt: skip


def mask_reason(r: Reader, step: Step, b: int, i: int, j: int) -> str:
    """Why key j is blocked for query i ('' when it is not): the causal rule or padding."""
    pads = r.trace.source_pad if step.dims[-1] == "src_pos" else r.trace.target_pad
    if step.attention_type == "decoder.self_attn" and j > i:
        return (f"key position {j} comes after query position {i}: the decoder's causal mask hides the future, "
                "so −∞ there makes its softmax weight exactly 0")
    window = r.config.sliding_window
    if step.attention_type == "decoder.self_attn" and window and r.config.windowed(step.layer) and i - j >= window:
        return (f"key position {j} lies {i - j} positions before query position {i}, outside this layer's sliding "
                f"window of {window}, so −∞ makes its softmax weight exactly 0")
    if pads is not None and bool(pads[min(b, len(pads) - 1), j]):
        return f"key position {j} is padding, which no query may read, so −∞ makes its softmax weight exactly 0"
    return ""


def mask(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    b, i, j = index
    why = mask_reason(r, step, b, i, j)
    out = float("-inf") if why else 0.0
    return dict(recomputed=out, formula="M[i, j] = 0 if query i may see key j, else −∞",
                expression=f"M[{i}, {j}] = {num(out)}",
                note=f"−∞: {why}." if why else f"0: query position {i} may read key position {j}.")


def masked_score(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """S/√d_k (+ B) + M."""
    b, h, i, j = index
    if r.trace.find(f"{step.sublayer}.capped_scores") is not None:  # Gemma 2: the mask meets the capped scores
        terms = [Term("c·tanh(S/c) (soft-capped)", r.cell(f"{step.sublayer}.capped_scores", index))]
    else:
        scaled = "S/√d_k" if _attention(r, step).scale else "S"
        terms = [Term(scaled, r.cell(f"{step.sublayer}.scaled_scores", index))]
    if r.trace.find(f"{step.sublayer}.position_bias") is not None:
        terms.append(Term("B (relative position bias)", r.cell(f"{step.sublayer}.position_bias", (h, i, j))))
    terms.append(Term("M", r.cell(f"{step.sublayer}.mask", (b, i, j))))
    out = sum(t.value for t in terms)
    why = mask_reason(r, step, b, i, j)
    return dict(recomputed=out, formula=" + ".join(t.label.split(" ")[0] for t in terms),
                expression=" + ".join(paren(t.value) for t in terms) + f" = {num(out)}", terms=terms,
                note=f"−∞: {why}." if why else "")


def weight(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """A[i, j] = exp(s_ij) / Σ_k exp(s_ik), computed as exp(s_ij − max) / Σ_k exp(s_ik − max)."""
    b, h, i, j = index
    row = r.row(f"{step.sublayer}.masked_scores", (b, h, i))
    if np.isneginf(row).all():
        return dict(recomputed=0.0, formula="A[i, j] = 0 for a query that may see no key",
                    expression="every score of this row is −∞ → 0", note="Every key of this row is masked (a padding "
                    "query): its weights are set to 0 instead of the NaN a softmax of only −∞ would give.")
    top = float(row.max())
    exps = np.exp(row - top)
    denom = float(exps.sum())
    out = float(exps[j] / denom)
    finite = np.flatnonzero(~np.isneginf(row))  # the keys this query may see
    shown = finite[np.argsort(-exps[finite], kind="stable")][:4]
    parts = [f"exp({paren(row[k])} − {paren(top)})" for k in shown]
    more = len(finite) - len(shown)
    if more > 0:
        parts.append(f"{more} more")
    why = mask_reason(r, step, b, i, j)
    note = (f"Weight 0: {why}." if why else
            f"Key {j} gets {num(out * 100)}% of query {i}'s attention; the row's weights add up to 1. "
            f"It ranks {int((exps > exps[j]).sum()) + 1} of {int((~np.isneginf(row)).sum())} in its row.")
    return dict(recomputed=out, formula="A[i, j] = exp(s_ij) / Σ_k exp(s_ik)",
                expression=f"exp({paren(row[j])} − {paren(top)}) / ({' + '.join(parts)}) = {num(float(exps[j]))} / "
                           f"{num(denom)} = {num(out)}",
                terms=[Term(f"exp(s_{i}{j} − max)", float(exps[j])), Term("Σ_k exp(s_ik − max)", denom)],
                note=note)  # fmt: skip


def context(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """head[i, e] = Σ_j A[i, j]·v_j[e]."""
    b, h, i, e = index
    a = r.row(f"{step.sublayer}.weights", (b, h, i))
    v = r.column(f"{step.sublayer}.v", (b, _kv_head(_attention(r, step), h)), (e,))  # its key/value head's values
    total, expression, terms = summed(a * v, lambda j: f"A[{i}, {j}]·v_{j}[{e}]", a, v)
    top = int(np.argmax(a))
    return dict(recomputed=total, formula="head[i, e] = Σ_j A[i, j]·v_j[e]", expression=expression, terms=terms,
                note=f"A weighted average of every key's value (dimension {e}); key {top} weighs most "
                     f"({num(float(a[top]))}).")  # fmt: skip


def concat(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """Concat(head_1, …, head_h)[i, u] = head_{u // d_k}[i, u mod d_k]."""
    b, i, u = index
    mha = _attention(r, step)
    h, e = divmod(u, mha.d_head)
    out = r.cell(f"{step.sublayer}.context", (b, h, i, e))
    return dict(recomputed=out, formula="Concat[i, u] = head_(u div d_k)[i, u mod d_k]",
                expression=f"Concat[{i}, {u}] = head {h + 1}[{i}, {e}] = {num(out)}",
                note=f"No arithmetic: the {mha.n_heads} heads' outputs are laid side by side; column {u} is "
                     f"head {h + 1}'s dimension {e}.")  # fmt: skip


def output_projection(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """MultiHead[i, u] = Σ_d Concat[i, d]·W^O[u, d] + b^O[u]."""
    b, i, u = index
    total, expression, terms = linear_unit(r, f"{step.sublayer}.concat", (b, i), f"{step.sublayer}.out_proj", u,
                                           "concat")  # fmt: skip
    return dict(recomputed=total, formula="MultiHead[i, u] = Σ_d Concat[i, d]·W^O[u, d] + b^O[u]",
                expression=expression, terms=terms,
                note="W^O mixes what every head found into one vector of d_model numbers.")


def position_bias(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """T5: B[h, i, j] = b_h[bucket(j − i)], from the table in the stack's first layer."""
    h, i, j = index
    table_path = f"{step.stack}.0.self_attn.relative_bias"
    table = r.model.get_submodule(table_path)
    n_q, n_k = step.shape[1], step.shape[2]
    bucket = int(table.buckets(n_q, n_k)[i, j])
    out = r.param_cell(f"{table_path}.weight", (bucket, h))
    return dict(recomputed=out, formula="B[h, i, j] = b_h[bucket(j − i)]",
                expression=f"distance j − i = {j - i} → bucket {bucket} → b_{h + 1}[{bucket}] = {num(out)}",
                note=f"A learned number per head for each distance bucket ({table.describe()}); every layer of the "
                     "stack adds the same map.")  # fmt: skip


def rotary(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """RoPE: x'[e] = x[e]·cos(pos·ω) − x[e + d/2]·sin(pos·ω) for the first half of the turning dimensions,
    x'[e] = x[e]·cos(pos·ω) + x[e − d/2]·sin(pos·ω) for the second; dimensions past d_rot pass unchanged."""
    from ...transformer.rotary import inverse_frequencies

    b, h, p, e = index
    which = step.name.rsplit(".", 1)[1].split("_")[0]  # q or k
    before = f"{step.sublayer}.{which}_normed"
    before = before if r.trace.find(before) is not None else f"{step.sublayer}.{which}"
    d_rot, x = r.config.d_rotary, r.cell(before, index)
    local = r.config.local_rope(step.layer)  # Gemma 3's sliding-window layers: a base of their own
    if e >= d_rot:
        return dict(recomputed=x, formula="x'[e] = x[e] (past the rotating dimensions)",
                    expression=f"{which}'[{e}] = {num(x)}", note=f"Only the first {d_rot} dimensions of each head "
                    "turn (a rotary fraction below 1, as in Pythia); this one passes unchanged.")  # fmt: skip
    half = d_rot // 2
    i = e % half  # the pair's frequency index
    partner = e + half if e < half else e - half
    y = r.cell(before, (b, h, p, partner))
    omega = float(inverse_frequencies(r.config, local)[i])
    angle = float(np.float32(p) * np.float32(omega))  # pos · ω in float32, as the model computes it
    c, s_ = math.cos(angle), math.sin(angle)
    sign = -1.0 if e < half else 1.0
    out = x * c + sign * y * s_
    op = "−" if sign < 0 else "+"
    return dict(recomputed=out, formula=f"x'[e] = x[e]·cos(pos·ω_i) {op} x[{'e + d/2' if e < half else 'e − d/2'}]·"
                                        "sin(pos·ω_i),  ω_i = θ^(−2i/d_rot)",
                expression=f"{paren(x)}·cos({p}·{num(omega)}) {op} {paren(y)}·sin({p}·{num(omega)}) = "
                           f"{paren(x)}·{paren(c)} {op} {paren(y)}·{paren(s_)} = {num(out)}",
                terms=[Term(f"{which}[{e}]", x), Term(f"{which}[{partner}] (its partner)", y),
                       Term("pos·ω_i (radians)", angle)],
                note=f"Dimensions {min(e, partner)} and {max(e, partner)} form pair {i}, turned together by position "
                     f"{p} times ω_{i} = {num(omega)}: a rotation in their plane, which keeps the pair's length.")


def qk_norm(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """QK-norm: RMSNorm of one head's q (or k) vector, or of all heads' at the position (OLMo 2's "full")."""
    b, h, p, e = index
    mha = _attention(r, step)
    which = step.name.rsplit(".", 1)[1].split("_")[0]
    source = f"{step.sublayer}.{which}"
    norm = mha.q_norm if which == "q" else mha.k_norm
    if mha.qk_norm == "head":
        z = r.row(source, (b, h, p))  # (d_head,)
        at, over = e, "this head's"
    else:  # every head of this position, side by side
        n = r.step(source).shape[1]
        z = np.concatenate([r.row(source, (b, g, p)) for g in range(n)])  # (h·d_head,)
        at, over = h * mha.d_head + e, "all heads'"
    gamma = r.param_cell(f"{step.sublayer}.{which}_norm.weight", (at,))
    ms = float(np.mean(z * z))
    scale, g = (1.0 + gamma, "(1 + γ[d])") if norm.plus_one else (gamma, "γ[d]")  # Gemma 3: (1 + γ)
    out = scale * float(z[at]) / math.sqrt(ms + norm.eps)
    return dict(recomputed=out, formula=f"RMSNorm(z)[d] = {g}·z[d]/√(mean(z²) + ε)",
                expression=f"{paren(scale)}·{paren(float(z[at]))}/√({num(ms)} + {num(norm.eps)}) = {num(out)}",
                terms=[Term("z[d]", float(z[at])), Term("mean(z²)", ms), Term("γ[d]", gamma)],
                note=f"The mean square runs over {over} {len(z)} numbers at position {p}; γ is learned.")


def softcap(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """Gemma 2's soft-capping, c·tanh(x / c): of a scaled score before the mask, or of a logit before the softmax."""
    logits = step.stack == "generator"
    before = "generator.logits" if logits else f"{step.sublayer}.scaled_scores"
    cap = r.config.final_softcap if logits else r.config.attn_softcap
    x = r.cell(before, index)
    out = cap * math.tanh(x / cap)
    what = "logit" if logits else "scaled score"
    return dict(recomputed=out, formula="c·tanh(x / c)",
                expression=f"{num(cap)}·tanh({paren(x)} / {num(cap)}) = {num(cap)}·{paren(math.tanh(x / cap))} = "
                           f"{num(out)}",
                terms=[Term(f"x ({what})", x), Term("c (the cap)", cap)],
                note=f"Near 0 this is almost x itself; however large the {what} grows, the result stays between "
                     f"−{num(cap)} and {num(cap)}.")  # fmt: skip
