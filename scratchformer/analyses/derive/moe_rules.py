"""Derivations inside a mixture of experts (scratchformer.transformer.moe): the router's score of an expert, its
probability, the weight a chosen expert gets, one chosen expert's output, and the weighted sum of the chosen
experts' outputs."""

from __future__ import annotations

import math

import numpy as np

from ...recording.trace import Step
from ...transformer.moe import ordinal
from . import graph
from .attention_rules import linear_unit
from .reader import Reader
from .result import Term, num, paren, summed
from .stream_rules import ACTIVATIONS


def _chosen(r: Reader, moe: str, b: int, p: int) -> tuple[np.ndarray, list[int]]:
    """A token's router probabilities (read, so listed as inputs) and its chosen experts, most probable first —
    the order the model's top-k gave them."""
    probs = r.row(f"{moe}.router_weights", (b, p))
    k = r.config.experts_per_token
    return probs, [int(e) for e in np.argsort(-probs, kind="stable")[:k]]


def router(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """logit[e] = Σ_d x[d]·W_router[e, d];  p[e] = softmax(logit)[e];  w[e] = p[e] (renormalised) if chosen, else 0."""
    b, p, e = index
    moe = step.sublayer
    if step.name.endswith(".router_logits"):
        x = graph.sublayer_input(r.trace, moe, r.config.norm_first).name
        total, expression, terms = linear_unit(r, x, (b, p), f"{moe}.router", e)
        return dict(recomputed=total, formula="logit[e] = Σ_d x[d]·W_router[e, d]", expression=expression,
                    terms=terms, note=f"How strongly the router wants expert {e + 1} for this token: the dot product "
                                      f"of its vector with expert {e + 1}'s row of W_router.")  # fmt: skip
    if step.name.endswith(".router_weights"):
        row = r.row(f"{moe}.router_logits", (b, p))
        top = float(row.max())
        exps = np.exp(row - top)
        denom = float(exps.sum())
        out = float(exps[e] / denom)
        rank = int((row > row[e]).sum()) + 1
        return dict(recomputed=out, formula="p[e] = exp(logit[e]) / Σ_e' exp(logit[e'])",
                    expression=f"exp({paren(row[e])} − {paren(top)}) / {num(denom)} = {num(out)}",
                    terms=[Term(f"exp(logit[{e}] − max)", float(exps[e])), Term("Σ_e' exp(logit[e'] − max)", denom)],
                    note=f"Expert {e + 1} ranks {rank} of {len(row)} for this token; the top "
                         f"{r.config.experts_per_token} will run.")  # fmt: skip
    probs, chosen = _chosen(r, moe, b, p)
    picked = probs[chosen]
    names = " and ".join(str(c + 1) for c in chosen)
    renorm = r.config.moe_renormalize
    if renorm:  # w[e] = p[e] / Σ_(e' in top k) p[e'] for a chosen expert
        formula = "w[e] = p[e] / Σ_(e' in top k) p[e'] if e is among the token's k most probable experts, else 0"
    else:
        formula = "w[e] = p[e] if e is among the token's k most probable experts, else 0"
    if e not in chosen:
        return dict(recomputed=0.0, formula=formula,
                    expression=f"p[{e}] = {num(float(probs[e]))} is not among the {len(chosen)} largest → 0",
                    terms=[Term(f"p[{e}]", float(probs[e]))],
                    note=f"This token went to experts {names}; expert {e + 1} does not run for it.")  # fmt: skip
    if not renorm:
        out = float(probs[e])
        return dict(recomputed=out, formula=formula, expression=f"p[{e}] = {num(out)}", terms=[Term(f"p[{e}]", out)],
                    note=f"This token went to experts {names}; their weights keep their probabilities, adding up to "
                         f"{num(float(picked.sum()))}.")  # fmt: skip
    denom = float(picked.sum())
    out = float(probs[e]) / denom
    return dict(recomputed=out, formula=formula,
                expression=f"{num(float(probs[e]))} / ({' + '.join(num(float(v)) for v in picked)}) = {num(out)}",
                terms=[Term(f"p[{e}]", float(probs[e])), Term("Σ chosen p", denom)],
                note=f"This token went to experts {names}; their probabilities are divided by their sum, so the "
                     "weights add up to 1.")  # fmt: skip


def _expert_hidden(r: Reader, path: str, x: np.ndarray) -> tuple[np.ndarray, str]:
    """One expert's hidden layer at one token, act(x W_1 + b_1) (⊙ (x V + b_v) when gated), from its matrices
    (read whole: counted as inputs, not listed one by one), and the name of its activation."""
    expert = r.model.get_submodule(path)
    name, act = ACTIVATIONS[expert.activation_name]

    def linear(which: str) -> np.ndarray:
        w = r.param(f"{path}.{which}.weight")  # (d_expert, d_model)
        r.unlisted += w.size
        z = w @ x
        if r.has_param(f"{path}.{which}.bias"):
            z = z + r.param(f"{path}.{which}.bias")
        return z

    hidden = np.array([act(float(z)) for z in linear("w_1")])
    if expert.w_v is not None:
        hidden = hidden * linear("w_v")
    return hidden, name


def ffn_out(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """choice_j[u] = FFN_e(x)[u] for e the token's j-th chosen expert; out[u] = Σ_j w_(e_j) · choice_j[u]."""
    b, p, u = index
    moe = step.sublayer
    probs, chosen = _chosen(r, moe, b, p)
    gated = r.config.ffn_gated
    hidden_formula = "act(x W_1^e) ⊙ x V^e" if gated else "act(x W_1^e + b_1^e)"
    expert_formula = f"FFN_e(x)[u] = Σ_f hidden_e[f]·W_2^e[u, f],  hidden_e = {hidden_formula}"
    if step.name.rsplit(".", 1)[1].startswith("choice_"):
        j = int(step.name.rsplit("_", 1)[1]) - 1
        e = chosen[j]
        path = f"{moe}.experts.{e}"
        x = r.row(graph.sublayer_input(r.trace, moe, r.config.norm_first).name, (b, p))
        hidden, act = _expert_hidden(r, path, x)
        w2 = r.param_row(f"{path}.w_2.weight", (u,))
        extra = [Term(f"b_2[{u}]", r.param_cell(f"{path}.w_2.bias", (u,)))] if r.has_param(f"{path}.w_2.bias") else []
        total, expression, terms = summed(hidden * w2, lambda f: f"hidden[{f}]·W_2^{e}[{u}, {f}]", hidden, w2, extra)
        formula = f"{expert_formula},  e = the token's j-th chosen expert,  act(z) = {act}"
        return dict(recomputed=total, formula=formula, expression=expression, terms=terms,
                    note=f"This token's {ordinal(j + 1)} choice (j = {j + 1}) is expert {e + 1} "
                         f"(p = {num(float(probs[e]))}); its {len(hidden)} hidden units come from this token's "
                         f"vector and expert {e + 1}'s own matrices.")  # fmt: skip
    weights = [r.cell(f"{moe}.chosen_weights", (b, p, e)) for e in chosen]
    outs = [r.cell(f"{moe}.choice_{j + 1}", (b, p, u)) for j in range(len(chosen))]
    products = [w * y for w, y in zip(weights, outs, strict=True)]
    total = math.fsum(products)
    return dict(recomputed=total, formula=f"MoE(x)[u] = Σ_j w_(e_j) · FFN_(e_j)(x)[u] over the chosen experts, "
                                          f"{expert_formula}",
                expression=" + ".join(f"{paren(w)}·{paren(y)}" for w, y in zip(weights, outs, strict=True))
                + f" = {num(total)}",
                terms=[Term(f"w[{e}]·choice_{j + 1}[{u}]", v) for j, (e, v) in enumerate(zip(chosen, products,
                                                                                              strict=True))],
                note=f"This token went to experts {' and '.join(str(e + 1) for e in chosen)}; only their outputs are "
                     "computed and added, each times its weight.")  # fmt: skip
