"""Why divide by √d_k (paper §3.2.1 and its footnote 4): if q and k have independent components of mean 0 and
variance 1, q·k = Σ q_i k_i has variance d_k. Unscaled, the scores grow like √d_k and the softmax saturates — one
weight near 1, entropy near 0, and almost no gradient left to learn from. Divided by √d_k the scores keep
variance 1 whatever d_k, and the softmax stays spread.

Measured on seeded random q and k (1,000 rows of 10 keys for each d_k), and on the model's own q and k in its
first attention.
"""

from __future__ import annotations

import math

import torch

from ..errors import UserError
from .measures import row_stats

TITLE = "Why divide by √d_k"
CLAIM = ("Without ÷√d_k the dot products grow with d_k and the softmax saturates: one weight near 1, entropy near "
         "0, and no gradient left. Divided by √d_k, the weights stay spread whatever d_k.")  # fmt: skip
CONTROLS = {"d_k": 64, "seed": 0}
TABLE_DK = (8, 64, 512)  # the rows every result has (DESIGN.md), plus the control's d_k
CURVE_DK = tuple(2**i for i in range(10))  # 1 … 512: the line chart
ROWS, KEYS = 1000, 10
MAX_DK = 2048


def applies(bundle) -> str | None:
    return None  # random q and k need no model; every model has an attention for its own entry


def random_scores(d_ks: list[int] | tuple[int, ...], seed: int, rows: int = ROWS, keys: int = KEYS
                  ) -> dict[int, torch.Tensor]:  # fmt: skip
    """d_k → (rows, keys) dot products q·k of independent standard-normal q (rows, d_k) and k (rows, keys, d_k).
    One seeded draw at the largest d_k serves them all: each d_k takes the first d_k components (still
    independent, mean 0, variance 1), so a larger d_k extends a smaller one's vectors."""
    gen = torch.Generator().manual_seed(int(seed))
    width = max(d_ks)
    q = torch.randn(rows, width, generator=gen)  # (rows, d_max)
    k = torch.randn(rows, keys, width, generator=gen)  # (rows, keys, d_max)
    return {d: torch.einsum("rd,rkd->rk", q[:, :d], k[:, :, :d]).double() for d in d_ks}  # (rows, keys) each


def compare(scores: torch.Tensor, d_k: int, mask: torch.Tensor | None = None) -> dict:
    """softmax(s / √d_k) against softmax(s) for scores (rows, keys); mask (rows, keys) True = may attend."""
    scaled = scores / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        scaled = scaled.masked_fill(~mask, float("-inf"))
    finite = scores[torch.isfinite(scores)]
    return {"d_k": d_k, "score_std": {"unscaled": float(finite.std()), "scaled": float(finite.std() / math.sqrt(d_k))},
            "scaled": row_stats(scaled.softmax(-1)), "unscaled": row_stats(scores.softmax(-1))}  # fmt: skip


def model_entry(bundle, source: str) -> dict:
    """The same comparison on the model's own q and k: every head and query of its first attention, which reads
    the source (or a decoder-only model's text) alone, so a typed target changes nothing here."""
    inputs = bundle.prepare(source)
    _, trace = bundle.run(inputs, keep_output=False)
    c = bundle.config
    name = "encoder.0.self_attn" if c.has_encoder else "decoder.0.self_attn"
    q, k = trace[f"{name}.q"].item(0), trace[f"{name}.k"].item(0)  # (h, Tq, d_k), (h, Tk, d_k)
    allowed = trace[f"{name}.mask"].item(0) == 0  # (Tq, Tk): the additive mask's 0 cells
    scores = (q.double() @ k.double().transpose(-2, -1))  # (h, Tq, Tk)
    h, tq, tk = scores.shape
    mask = allowed[None].expand(h, tq, tk).reshape(-1, tk)  # (h·Tq, Tk)
    entry = compare(scores.reshape(-1, tk), q.shape[-1], mask)
    entry.update(attention=name, heads=h, queries=tq, keys=tk, model_scales=bool(c.scale_attention))
    return entry


def run(bundle, source: str, target: str | None = None, d_k: int = 64, seed: int = 0) -> dict:
    """`target` is taken as every experiment takes it, and not read: see model_entry."""
    d_k = int(d_k)
    if not 1 <= d_k <= MAX_DK:
        raise UserError(f"d_k must be between 1 and {MAX_DK}, not {d_k}.")
    dks = sorted({*TABLE_DK, d_k})
    scores = random_scores(sorted({*dks, *CURVE_DK}), seed)
    rows = [compare(scores[d], d) for d in dks]
    curve = [compare(scores[d], d) for d in CURVE_DK]
    example = scores[d_k][0]  # (keys,): one row, to draw
    chosen = next(r for r in rows if r["d_k"] == d_k)
    own = model_entry(bundle, source)
    summary = (f"At d_k = {d_k}, the largest weight is {chosen['unscaled']['max_weight']:.2f} without ÷√d_k and "
               f"{chosen['scaled']['max_weight']:.2f} with it (entropy {chosen['unscaled']['entropy']:.2f} against "
               f"{chosen['scaled']['entropy']:.2f} nats; a uniform row of {KEYS} keys has {math.log(KEYS):.2f}).")
    return {
        "rows": rows,
        "curve": curve,
        "example": {"d_k": d_k, "scores": [float(x) for x in example],
                    "scaled": [float(x) for x in (example / math.sqrt(d_k)).softmax(-1)],
                    "unscaled": [float(x) for x in example.softmax(-1)]},
        "samples": ROWS, "keys": KEYS, "uniform_entropy": math.log(KEYS),
        "model_qk": own,
        "summary": summary,
    }
