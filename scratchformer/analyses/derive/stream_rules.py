"""Derivations along the residual stream: the residual sum, LayerNorm and RMSNorm, the feed-forward network
(plain and gated), dropout, and the output layer's logits and probabilities."""

from __future__ import annotations

import math

import numpy as np
from torch import nn

from ...recording.trace import Step
from ...transformer.layers import parallel_terms
from . import graph
from .attention_rules import linear_unit
from .reader import Reader
from .result import Term, num, paren, summed

# The activations written out in float64, as the paper and the imported models define them.
ACTIVATIONS = {
    "relu": ("max(0, z)", lambda z: max(0.0, z)),
    "gelu": ("z·Φ(z) = z·(1 + erf(z/√2))/2", lambda z: 0.5 * z * (1.0 + math.erf(z / math.sqrt(2.0)))),
    "gelu_tanh": ("z·(1 + tanh(√(2/π)·(z + 0.044715·z³)))/2",
                  lambda z: 0.5 * z * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))),
    "silu": ("z·σ(z) = z/(1 + e^−z)", lambda z: z / (1.0 + math.exp(-z)) if z > -700 else 0.0),
}  # fmt: skip


def residual(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """x + Sublayer(x); a parallel layer's (GPT-NeoX) x + Attention(LN₁(x)) + FFN(LN₂(x))."""
    if r.config.parallel_residual:
        return _parallel_residual(r, step, index)
    x_step, sub_step = graph.residual_parts(r.trace, step, r.config.norm_first)
    x, sub = r.cell(x_step.name, index), r.cell(sub_step.name, index)
    out = x + sub
    added = "Dropout(Sublayer(x))" if sub_step.kind == "dropout" else "Sublayer(x)"  # a training run drops some
    if r.trace.find(step.name.removesuffix(".residual") + ".post_norm") is not None:  # Gemma's sandwich
        added = added.replace("Sublayer(x)", "PostNorm(Sublayer(x))")
    return dict(recomputed=out, formula=f"x + {added}", expression=f"{paren(x)} + {paren(sub)} = {num(out)}",
                terms=[Term(f"x ({x_step.name})", x), Term(f"{added} ({sub_step.name})", sub)],
                note="The residual connection: the sublayer only adds a correction to what flows past it.")


def _parallel_residual(r: Reader, step: Step, index: tuple[int, ...]) -> dict:
    layer = step.name.split(".add_norm")[0]  # decoder.N
    attn, ffn = _parallel_term(r, layer, 1, "self_attn"), _parallel_term(r, layer, 3, "ffn")
    x_step = graph.stream_before(r.trace, r.trace[f"{layer}.add_norm1.norm"].index, "tgt", True)
    x, a, f = r.cell(x_step.name, index), r.cell(attn, index), r.cell(ffn, index)
    out = x + a + f
    a_text, f_text = parallel_terms("LN", r.trace.find(f"{layer}.moe.out") is not None, attn.endswith(".post_norm"))
    return dict(recomputed=out, formula=f"x + {a_text} + {f_text}",
                expression=f"{paren(x)} + {paren(a)} + {paren(f)} = {num(out)}",
                terms=[Term(f"x ({x_step.name})", x), Term(f"{a_text} ({attn})", a), Term(f"{f_text} ({ffn})", f)],
                note="A parallel layer (GPT-NeoX, Pythia): attention and the feed-forward both read the layer's "
                     "input x, and one residual add joins their outputs to it.")  # fmt: skip


def _parallel_term(r: Reader, layer: str, k: int, sublayer: str) -> str:
    """The step a parallel layer adds for one sublayer: its post-norm in a sandwich layer, else the sublayer's own
    output (`<layer>.moe.out` where a mixture of experts stands in for the feed-forward)."""
    post = f"{layer}.add_norm{k}.post_norm"
    if r.trace.find(post) is not None:
        return post
    if sublayer == "ffn" and r.trace.find(f"{layer}.moe.out") is not None:
        return f"{layer}.moe.out"
    return f"{layer}.{sublayer}.out"


def norm(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """LayerNorm: γ·(z − μ)/√(σ² + ε) + β over the d_model numbers of one position; RMSNorm: γ·z/√(mean z² + ε)."""
    *prefix, d = index
    z_step = graph.norm_input(r.trace, step, r.config.norm_first)
    path = graph.norm_module(step)
    module = r.model.get_submodule(path)
    z = r.row(z_step.name, tuple(prefix))
    gamma = r.param_cell(f"{path}.weight", (d,))  # every norm of layers.make_norm has γ; a LayerNorm has β too
    eps = module.eps
    if not isinstance(module, nn.LayerNorm):  # RMSNorm
        ms = float(np.mean(z * z))
        scale, g = rms_gamma(module, gamma)  # γ, or Gemma's 1 + γ
        out = scale * z[d] / math.sqrt(ms + eps)
        return dict(recomputed=out, formula=f"RMSNorm(z)[d] = {g}·z[d]/√(mean(z²) + ε)",
                    expression=f"{paren(scale)}·{paren(z[d])}/√({num(ms)} + {num(eps)}) = {num(out)}",
                    terms=[Term("z[d]", float(z[d])), Term("mean(z²)", ms), Term("γ[d]", gamma)],
                    note=f"RMSNorm rescales the {len(z)} numbers of this position to a root mean square of 1 "
                         f"(no mean subtracted, no β), then multiplies by {g.replace('[d]', '')}, γ learned.")
    beta = r.param_cell(f"{path}.bias", (d,))
    mu, var = float(np.mean(z)), float(np.var(z))
    out = gamma * (z[d] - mu) / math.sqrt(var + eps) + beta
    return dict(recomputed=out, formula="LayerNorm(z)[d] = γ[d]·(z[d] − μ)/√(σ² + ε) + β[d]",
                expression=f"{paren(gamma)}·({paren(z[d])} − {paren(mu)})/√({num(var)} + {num(eps)}) + {paren(beta)} "
                           f"= {num(out)}",
                terms=[Term("z[d]", float(z[d])), Term("μ", mu), Term("σ²", var), Term("γ[d]", gamma),
                       Term("β[d]", beta)],
                note=f"μ and σ² are the mean and variance of this position's {len(z)} numbers ({z_step.name}); "
                     "every position is normalised on its own, never across the batch.")  # fmt: skip


def rms_gamma(module, gamma: float) -> tuple[float, str]:
    """What an RMSNorm multiplies by, and how the formula writes it: γ[d], or (1 + γ[d]) for Gemma's (plus_one)."""
    if getattr(module, "plus_one", False):
        return 1.0 + gamma, "(1 + γ[d])"
    return gamma, "γ[d]"


def _ffn_input(r: Reader, step: Step) -> str:
    return graph.sublayer_input(r.trace, step.sublayer, r.config.norm_first).name


def ffn_hidden(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """max(0, x W_1 + b_1) (or GELU, SiLU …); gated: act(x W_1) ⊙ x V."""
    b, p, f = index
    ffn = r.model.get_submodule(step.sublayer)
    if ffn.w_v is not None:
        gate, linear = r.cell(f"{step.sublayer}.gate", index), r.cell(f"{step.sublayer}.linear", index)
        out = gate * linear
        return dict(recomputed=out, formula="hidden[f] = act(x W_1)[f] · (x V)[f]",
                    expression=f"{paren(gate)} · {paren(linear)} = {num(out)}",
                    terms=[Term("gate", gate), Term("linear", linear)],
                    note="A gated unit: the activated branch decides how much of the linear branch passes.")
    return _activated_unit(r, step, index, ffn, "w_1", "hidden")


def _activated_unit(r: Reader, step: Step, index: tuple[int, ...], ffn, weight: str, what: str) -> dict:
    b, p, f = index
    name, act = ACTIVATIONS[ffn.activation_name]
    z, expression, terms = linear_unit(r, _ffn_input(r, step), (b, p), f"{step.sublayer}.{weight}", f)
    out = act(z)
    note = (f"ReLU cut the negative pre-activation {num(z)} to 0: this unit is silent for this position."
            if ffn.activation_name == "relu" and z < 0 else
            f"Unit {f} of d_ff = {ffn.w_1.out_features}: the dot product of the position's vector with row {f} of "
            f"W_1, then {ffn.activation_name.upper() if ffn.activation_name != 'relu' else 'ReLU'}.")
    return dict(recomputed=out, formula=f"{what}[f] = act(Σ_d x[d]·W_1[f, d] + b_1[f]),  act(z) = {name}",
                expression=f"z = {expression};  act({num(z)}) = {num(out)}",
                terms=[*terms, Term("z (pre-activation)", z)], note=note)  # fmt: skip


def ffn_gate(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """The gated FFN's branches: gate = act(x W_1 + b_1), linear = x V + b_v."""
    ffn = r.model.get_submodule(step.sublayer)
    if step.name.endswith(".gate"):
        return _activated_unit(r, step, index, ffn, "w_1", "gate")
    b, p, f = index
    total, expression, terms = linear_unit(r, _ffn_input(r, step), (b, p), f"{step.sublayer}.w_v", f)
    return dict(recomputed=total, formula="linear[f] = Σ_d x[d]·V[f, d]", expression=expression, terms=terms,
                note="The linear branch of the gated unit: no activation.")


def ffn_out(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """FFN(x)[u] = Σ_f hidden[f]·W_2[u, f] + b_2[u]."""
    b, p, u = index
    hidden = graph.ffn_hidden(r.trace, step.sublayer)  # after dropout in a training run
    total, expression, terms = linear_unit(r, hidden, (b, p), f"{step.sublayer}.w_2", u, "hidden")
    return dict(recomputed=total, formula="FFN(x)[u] = Σ_f hidden[f]·W_2[u, f] + b_2[u]", expression=expression,
                terms=terms, note="W_2 brings the d_ff hidden units back down to d_model numbers.")


def dropout(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """Training only: each number is zeroed with probability p or scaled by 1/(1 − p)."""
    before = r.trace.steps[step.index - 1]
    x = r.cell(before.name, index)
    p = r.config.dropout
    out = 0.0 if value == 0 else x / (1 - p)
    return dict(recomputed=out, formula="Dropout(x) = 0 with probability p, else x/(1 − p)",
                expression=f"{'dropped → 0' if value == 0 else f'kept: {paren(x)}/(1 − {p}) = {num(out)}'}",
                note="Dropout draws a new random choice on every training step; this cell's was " +
                     ("to drop it." if value == 0 else "to keep it."))  # fmt: skip


def logits(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """logits[v] = Σ_d x[d]·W_vocab[v, d] (+ a fixed bias for BART and Marian)."""
    b, t, v = index
    x_step = graph.generator_input(r.trace, r.config.norm_first)
    x = r.row(x_step.name, (b, t))
    w = r.param_row("generator.proj.weight", (v,))
    extra = []
    if r.has_param("generator.final_logits_bias"):
        extra.append(Term(f"bias[{v}]", r.param_cell("generator.final_logits_bias", (v,))))
    total, expression, terms = summed(x * w, lambda d: f"x[{d}]·W[{v}, {d}]", x, w, extra)
    token = _token(r, bundle, v)
    return dict(recomputed=total, formula="logit[v] = Σ_d x[d]·W_vocab[v, d]", expression=expression, terms=terms,
                note=f"How well the decoder's vector at position {t} matches vocabulary entry {v} ({token}).")


def probabilities(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """P(v) = exp(logit_v) / Σ_w exp(logit_w), over the whole vocabulary."""
    b, t, v = index
    capped = r.trace.find("generator.capped") is not None  # Gemma 2: the softmax reads the soft-capped logits
    row = r.row("generator.capped" if capped else "generator.logits", (b, t))
    top = float(row.max())
    exps = np.exp(row - top)
    denom = float(exps.sum())
    out = float(exps[v] / denom)
    best = np.argsort(-row, kind="stable")[:3]
    shown = " + ".join(f"exp({paren(row[k])} − {paren(top)})" for k in best)
    rank = int((row > row[v]).sum()) + 1
    return dict(recomputed=out, formula="P(v) = exp(logit_v) / Σ_w exp(logit_w)",
                expression=f"exp({paren(row[v])} − {paren(top)}) / ({shown} + {len(row) - len(best)} more) = "
                           f"{num(float(exps[v]))} / {num(denom)} = {num(out)}",
                terms=[Term(f"exp(logit_{v} − max)", float(exps[v])), Term("Σ exp(logit − max)", denom)],
                note=f"{_token(r, bundle, v)} ranks {rank} of {len(row)} at position {t}.")


def _token(r: Reader, bundle, v: int) -> str:
    if bundle is None:
        return f"id {v}"
    return f"“{bundle.tgt_tokenizer.token_strings([v])[0]}”"
