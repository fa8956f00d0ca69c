"""Derivations of the input side: token → id, embedding row (× √d_model), positional encoding from its closed
form (or a learned table), their sum, and T5's output scaling. Each rule returns the fields of a Derivation."""

from __future__ import annotations

import math

from ...recording.trace import Step
from . import graph
from .reader import Reader
from .result import Term, num, paren


def _embeddings(r: Reader, step: Step):
    return r.model.get_submodule(step.stack)  # src_embed / tgt_embed


def tokens(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """x = tokenizer(text): the piece at this position and its row in the vocabulary."""
    b, p = index
    tokenizer = bundle.src_tokenizer if step.stack == "src_embed" else bundle.tgt_tokenizer
    shown = (r.trace.labels(step.dims[1], b) or [""] * (p + 1))[p]
    piece = tokenizer.hf.convert_ids_to_tokens(int(value))
    # a fast tokenizer looks one piece up; get_vocab() copies the whole vocabulary (10 ms for BERT's) every call
    token_to_id = getattr(getattr(tokenizer.hf, "_tokenizer", None), "token_to_id", None)
    found = token_to_id(piece) if token_to_id is not None else tokenizer.hf.get_vocab().get(piece)
    recomputed = float(found) if found is not None else float("nan")
    start = step.stack == "tgt_embed" and p == 0
    note = ("The decoder input starts with the start token, then reads the target shifted right by one."
            if start else f"The tokenizer ({tokenizer.name}) cut the text into pieces; this is piece {p + 1}.")
    return dict(recomputed=recomputed, formula="x = id of the piece in the vocabulary",
                expression=f"“{shown}” → vocabulary piece “{piece}” → id {num(recomputed)}",
                terms=[Term(f"piece “{piece}”", recomputed)], note=note)  # fmt: skip


def lookup(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """E[x]: row x of the embedding table."""
    b, p, d = index
    token_id = int(r.cell(f"{step.stack}.tokens", (b, p)))
    entry = r.param_cell(f"{step.stack}.tokens.weight", (token_id, d))
    return dict(recomputed=entry, formula="E[x][d] = E[id, d]",
                expression=f"E[{token_id}, {d}] = {num(entry)}",
                note=f"Row {token_id} of the embedding table (one learned row per vocabulary entry), "
                     f"dimension {d}.")  # fmt: skip


def scaled(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """E[x]·√d_model (paper §3.4)."""
    looked_up = r.cell(f"{step.stack}.lookup", index)
    d_model = r.config.d_model
    out = looked_up * math.sqrt(d_model)
    return dict(recomputed=out, formula="E[x] · √d_model",
                expression=f"{paren(looked_up)} · √{d_model} = {paren(looked_up)} · {num(math.sqrt(d_model))} = "
                           f"{num(out)}",
                terms=[Term("E[x]", looked_up), Term("√d_model", math.sqrt(d_model))],
                note="The paper multiplies the embeddings by √d_model so they are not drowned by the positional "
                     "encoding, whose entries lie between −1 and 1.")  # fmt: skip


def sinusoid(pos: int, d: int, d_model: int, layout: str) -> tuple[float, str, float]:
    """PE(pos, d) from its closed form, with the formula written out: the paper's interleaved sin/cos, or Marian's
    halves (every sine first, then every cosine). Returns (value, written out, the wave's length in positions)."""
    if layout == "halves":
        n_sin = d_model - d_model // 2
        i, fn = (d, "sin") if d < n_sin else (d - n_sin, "cos")
    else:
        i, fn = d // 2, ("sin" if d % 2 == 0 else "cos")
    wavelength_base = 10000.0 ** (2 * i / d_model)
    angle = pos / wavelength_base
    value = math.sin(angle) if fn == "sin" else math.cos(angle)
    text = f"{fn}({pos} / 10000^({2 * i}/{d_model})) = {fn}({num(angle)}) = {num(value)}"
    return value, text, 2 * math.pi * wavelength_base


def positional_encoding(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    p, d = index
    emb = _embeddings(r, step)
    pos = p + emb.position_offset
    if emb.positions is not None:  # learned (BERT, GPT-2, BART)
        entry = r.param_cell(f"{step.stack}.positions.weight", (pos, d))
        return dict(recomputed=entry, formula="P[pos, d] (a learned table)",
                    expression=f"P[{pos}, {d}] = {num(entry)}",
                    note="This model learned one vector per position instead of the paper's sinusoids"
                         + (f"; its position ids start at {emb.position_offset}." if emb.position_offset else "."))
    if r.config.positional in ("none", "rotary"):
        why = "positions enter each attention as a relative position bias" if r.config.relative_buckets else \
            "positions enter each attention by turning its queries and keys (RoPE)" \
            if r.config.positional == "rotary" else "this model adds no positional encoding"
        return dict(recomputed=0.0, formula="PE = 0", expression="0", note=f"Zero: {why}.")
    layout = "halves" if r.config.positional == "sinusoidal_halves" else "interleaved"
    out, text, wavelength = sinusoid(pos, d, r.config.d_model, layout)
    formula = ("PE(pos, i) = sin(pos/10000^(2i/d_model)) for the first half, cos for the second"
               if layout == "halves" else
               "PE(pos, 2i) = sin(pos/10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos/10000^(2i/d_model))")
    return dict(recomputed=out, formula=formula, expression=f"PE({pos}, {d}) = {text}",
                note=f"Nothing learned: dimension {d} is a wave of wavelength about {num(wavelength)} positions.")


def summed_input(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """E[x]·√d_model + PE (+ a token-type row for BERT)."""
    b, p, d = index
    emb = _embeddings(r, step)
    first = f"{step.stack}.scaled" if r.trace.find(f"{step.stack}.scaled") is not None else f"{step.stack}.lookup"
    x = r.cell(first, index)
    pe = r.cell(f"{step.stack}.positional_encoding", (p, d))
    terms = [Term("E[x]·√d_model" if first.endswith("scaled") else "E[x]", x), Term("PE", pe)]
    if emb.token_types is not None:  # the run reads every token as type 0 (one segment)
        terms.append(Term("T[type 0]", r.param_cell(f"{step.stack}.token_types.weight", (0, d))))
    out = sum(t.value for t in terms)
    return dict(recomputed=out, formula=emb.sum_formula(),
                expression=" + ".join(paren(t.value) for t in terms) + f" = {num(out)}", terms=terms,
                note="The token's meaning and its position are added into one vector of d_model numbers.")


def output_scale(r: Reader, step: Step, index: tuple[int, ...], value: float, bundle) -> dict:
    """T5 v1.0: the decoder output × d_model^-0.5 before the tied output layer."""
    x_step = graph.stream_before(r.trace, step.index, "tgt", r.config.norm_first)
    x = r.cell(x_step.name, index)
    factor = r.config.d_model ** -0.5
    out = x * factor
    return dict(recomputed=out, formula="x · d_model^-0.5",
                expression=f"{paren(x)} · 1/√{r.config.d_model} = {num(out)}",
                terms=[Term("x", x), Term("d_model^-0.5", factor)])
