"""Derive rules of a dictionary's steps (scratchformer.features.attach): a feature's pre-activation is its encoder
column · the input + its bias, the feature is that after the TopK cut, the JumpReLU threshold or the ReLU, and the
reconstruction is the active features' decoder rows summed. The dictionary's weights are read as parameters named
`<step>.dict.W_enc` and so on, so the inputs list them like the model's own."""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ...recording.trace import Step
from .reader import Cell, Reader
from .result import Term, num, paren, summed


def _dictionary(r: Reader, step: Step):
    """(the step the dictionary reads, (dictionary, at, to)) for one of its steps."""
    read = step.name.rsplit(".dict.", 1)[0]
    found = r.trace.dictionaries.get(read)
    if found is None:
        raise UserError(f"{step.name} belongs to a dictionary this run no longer holds; attach it again.")
    return read, found


def pre(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """pre[i] = Σ_d (x[d] − b_dec[d])·W_enc[d, i] + b_enc[i]."""
    b, p, i = index
    read, (d, at, _to) = _dictionary(r, step)
    x = r.row(at, (b, p))
    if d.centres_input:
        x = x - r.param_row(f"{read}.dict.b_dec", ())
    w = r.param_column(f"{read}.dict.W_enc", (i,))
    bias = Term(f"b_enc[{i}]", r.param_cell(f"{read}.dict.b_enc", (i,)))
    total, expression, terms = summed(x * w, lambda j: f"x[{j}]·W_enc[{j}, {i}]", x, w, [bias])
    centred = "(x[d] − b_dec[d])" if d.centres_input else "x[d]"
    clamp = _clamp_note(r, read, i, p)
    return dict(recomputed=total, formula=f"pre[i] = Σ_d {centred}·W_enc[d, i] + b_enc[i]", expression=expression,
                terms=terms, note=f"Feature {i}'s encoder column read against the token's vector at {at}." + clamp)


def _clamp_note(r: Reader, read: str, feature: int, position: int) -> str:
    for c in r.trace.interventions:
        if getattr(c, "step", None) == read and "clamped" in c.note() and f"feature {feature} " in c.note() + " ":
            return " This run clamps this feature, so the features step holds the clamped value."
    return ""


def features(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """f[i] = σ(pre)[i]: TopK keeps a token's k largest, JumpReLU those above θ_i, ReLU the positive ones."""
    b, p, i = index
    read, (d, _at, _to) = _dictionary(r, step)
    row = r.row(f"{read}.dict.pre", (b, p), listed=False)
    z = r.cell(f"{read}.dict.pre", (b, p, i))
    arch = d.architecture if not (d.architecture == "batchtopk" and not bool(d.threshold.any())) else "topk"
    if arch == "topk":
        kth = float(np.sort(row)[-min(d.k, len(row))])
        kept = z >= kth
        out = max(z, 0.0) if kept else 0.0
        rank = int((row > z).sum()) + 1
        note = (f"pre = {num(z)} ranks {rank} of {len(row)} at this token; TopK keeps the {d.k} largest (the "
                f"{d.k}th is {num(kth)}), " + ("so it passes" + (" (ReLU: negative → 0)." if z < 0 else ".")
                                                 if kept else "so it is cut to 0."))  # fmt: skip
        formula = f"f[i] = ReLU(pre[i]) if pre[i] is among the token's {d.k} largest, else 0"
        expression = f"rank {rank} ≤ {d.k}: f = ReLU({num(z)}) = {num(out)}" if kept else f"rank {rank} > {d.k}: f = 0"
    elif arch in ("jumprelu", "batchtopk"):
        theta = r.param_cell(f"{read}.dict.threshold", (i,))
        out = z if z > theta else 0.0
        formula = "f[i] = pre[i] if pre[i] > θ[i], else 0  (JumpReLU)"
        expression = f"{num(z)} {'>' if z > theta else '≤'} θ = {num(theta)}: f = {num(out)}"
        note = f"A JumpReLU feature fires only above its own threshold θ[{i}]."
    else:
        out = max(z, 0.0)
        formula, expression = "f[i] = ReLU(pre[i])", f"ReLU({num(z)}) = {num(out)}"
        note = "A ReLU feature fires wherever its pre-activation is positive."
    note += _clamp_note(r, read, i, p)
    return dict(recomputed=out, formula=formula, expression=expression,
                terms=[Term("pre[i]", z)], note=note)  # fmt: skip


def reconstruction(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """recon[u] = Σ_i f[i]·W_dec[i, u] + b_dec[u];  error[u] = y[u] − recon[u]."""
    b, p, u = index
    read, (d, _at, to) = _dictionary(r, step)
    if step.name.endswith(".error"):
        y = r.cell(to, index)
        rec = r.cell(f"{read}.dict.recon", index)
        out = y - rec
        return dict(recomputed=out, formula="error[u] = y[u] − x̂[u]", expression=f"{num(y)} − {paren(rec)} = "
                    f"{num(out)}", terms=[Term("y", y), Term("−x̂", -rec)],  # fmt: skip
                    note=f"What the dictionary's features miss of {to} at this token: the error node of a graph.")
    f = r.row(f"{read}.dict.features", (b, p), listed=False)
    active = np.nonzero(f)[0]
    for j in active:
        r.cells.append(Cell((b, p, int(j)), float(f[j]), step=f"{read}.dict.features"))
    w = r.param_entries(f"{read}.dict.W_dec", active, u)
    bias = Term(f"b_dec[{u}]", r.param_cell(f"{read}.dict.b_dec", (u,)))
    total, expression, terms = summed(f[active] * w, lambda k: f"f[{int(active[k])}]·W_dec[{int(active[k])}, {u}]",
                                      f[active], w, [bias])  # fmt: skip
    return dict(recomputed=total, formula="x̂[u] = Σ_i f[i]·W_dec[i, u] + b_dec[u]  (over the active features)",
                expression=expression, terms=terms,
                note=f"{len(active)} features are active at this token; the others add nothing.")
