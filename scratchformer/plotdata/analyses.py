"""What views and exports draw from the lens, rollout and attribution results (scratchformer.analyses): maps as
Heatmaps, the lens's table of top tokens, and the numbers as CSV. Pure functions of the results, so that what is
exported is exactly what is shown.

    lens_map(lens) → Heatmap        lens_table(lens, position) → rows        lens_csv(lens) → str
    rollout_beside_raw(result, trace, layer) → (rollout map, raw map, agreement)        rollout_csv(result) → str
    attribution_maps(attribution) → [Heatmap]        attribution_csv(attribution) → str
"""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..recording.trace import Trace
from .heatmap import DIVERGING, SEQUENTIAL, Heatmap

if TYPE_CHECKING:  # the results' types only: the analyses' command lines sit above plotdata
    from ..analyses.attribute import Attribution
    from ..analyses.lens import Lens
    from ..analyses.rollout import Rollout


def agreement(relevance: torch.Tensor, raw: torch.Tensor) -> float:
    """How far raw attention (Tq, Tk, heads averaged) already says what rollout or flow says: the mean over rows
    of 1 − the total variation distance between the two rows (1 = the same distributions, 0 = disjoint)."""
    p = relevance.double() / relevance.double().sum(-1, keepdim=True)
    q = raw.double() / raw.double().sum(-1, keepdim=True).clamp_min(1e-30)
    return float((1 - 0.5 * (p - q).abs().sum(-1)).mean())


def _map(values, rows, cols, row_dim, col_dim, title, subtitle="", formula="", levels=None, cmap=SEQUENTIAL):
    v = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(len(rows), len(cols)))
    if levels is None:
        top = float(np.abs(v).max()) if v.size else 0.0
        levels = (-top, top) if cmap == DIVERGING else (0.0, 1.0)
        if cmap == DIVERGING and top == 0:
            levels = (-1.0, 1.0)
    return Heatmap(v, list(rows), list(cols), row_dim, col_dim, levels, cmap, title, subtitle, formula)


def lens_map(lens: Lens) -> Heatmap:
    """Points (rows, embeddings first) × decoder positions: the probability each point gives the token the model
    finally emits at that position. Columns read 'input → emitted'. For an encoder read through its masked-LM head:
    × source positions, 'token → the head's final guess for it'."""
    cols = [f"{a} → {b}" for a, b in zip(lens.positions, lens.emitted)]
    if lens.stack == "encoder":
        return _map(lens.final_probs.numpy(), lens.labels, cols, "point", "src_pos",
                    "Logit lens over the encoder: P(the head's final guess) at every point of the stream",
                    f"{len(lens.steps)} points × {len(cols)} source positions",
                    "P = softmax(MLMHead(x_point)),  MLMHead(x) = LayerNorm(act(x W_t + b_t)) W_vocabᵀ + b_vocab")
    return _map(lens.final_probs.numpy(), lens.labels, cols, "point", "tgt_pos",
                "Logit lens: P(the token finally emitted) at every point of the residual stream",
                f"{len(lens.steps)} points × {len(cols)} decoder positions", "P = softmax(W_vocab · norm(x_point))")


def lens_table(lens: Lens, position: int) -> list[tuple[str, str, list[tuple[str, float]], float, int]]:
    """Per point at one (decoder or source) position: (label, step, [(token, p)] most likely first, P(emitted),
    its rank)."""
    j = min(max(position, 0), len(lens.positions) - 1)
    return [(lens.labels[i], lens.steps[i], list(zip(lens.top_tokens[i][j], lens.top_probs[i, j].tolist())),
             float(lens.final_probs[i, j]), int(lens.final_ranks[i, j])) for i in range(len(lens.steps))]  # fmt: skip


def lens_csv(lens: Lens) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["point", "step", "position", "reads", "emitted", "p_emitted", "rank_emitted", "top_token", "top_p"])
    for i, step in enumerate(lens.steps):
        for j, reads in enumerate(lens.positions):
            w.writerow([lens.labels[i], step, j, reads, lens.emitted[j], f"{float(lens.final_probs[i, j]):.6g}",
                        int(lens.final_ranks[i, j]), lens.top_tokens[i][j][0],
                        f"{float(lens.top_probs[i, j, 0]):.6g}"])  # fmt: skip
    return out.getvalue()


RAW_STEPS = {"encoder": "encoder.{}.self_attn.weights", "decoder": "decoder.{}.self_attn.weights",
             "cross": "decoder.{}.cross_attn.weights"}  # fmt: skip
AXES = {"encoder": ("src_pos", "src_pos"), "decoder": ("tgt_pos", "tgt_pos"), "cross": ("tgt_pos", "src_pos")}


def rollout_beside_raw(result: Rollout, trace: Trace, which: str, layer: int | None = None, batch: int = 0
                       ) -> tuple[Heatmap, Heatmap, float]:  # fmt: skip
    """(the rollout or flow map, the raw attention of one layer with heads averaged (the last layer by default),
    their agreement: 1 − mean total variation distance of the rows)."""
    relevance = getattr(result, which)
    steps, n = [], 0
    while (found := trace.find(RAW_STEPS[which].format(n))) is not None:
        steps.append(found)
        n += 1
    step = steps[-1 if layer is None else layer]
    raw = step.item(batch).double().mean(0)  # (h, Tq, Tk) → (Tq, Tk)
    row_dim, col_dim = AXES[which]
    rows = trace.labels(row_dim, batch) or [str(i) for i in range(raw.shape[0])]
    cols = trace.labels(col_dim, batch) or [str(i) for i in range(raw.shape[1])]
    name = {"rollout": "Attention rollout", "flow": "Attention flow"}[result.method]
    left = _map(relevance.numpy(), rows, cols, row_dim, col_dim, f"{name} ({which})",
                "every layer followed back to the input tokens", "R = Ã_L ⋯ Ã_1, Ã = 0.5·A + 0.5·I")
    right = _map(raw.numpy(), rows, cols, row_dim, col_dim, f"Raw attention, layer {step.layer + 1} (heads averaged)",
                 step.name, "mean_h softmax(QKᵀ/√d_k + M)")  # fmt: skip
    return left, right, agreement(relevance, raw)


def rollout_csv(result: Rollout) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["method", "matrix", "row", "row_token", "column", "column_token", "value"])
    labels = {"encoder": (result.source_tokens, result.source_tokens),
              "decoder": (result.target_tokens, result.target_tokens),
              "cross": (result.target_tokens, result.source_tokens)}  # fmt: skip
    for which, (rl, cl) in labels.items():
        m = getattr(result, which)
        if m is None:
            continue
        for i, row in enumerate(m.tolist()):
            for j, v in enumerate(row):
                w.writerow([result.method, which, i, rl[i] if i < len(rl) else "", j, cl[j] if j < len(cl) else "",
                            f"{v:.6g}"])  # fmt: skip
    return out.getvalue()


def attribution_maps(a: Attribution) -> list[Heatmap]:
    """One row per input (source, decoder input), a column per token, diverging around 0 on one shared scale."""
    sides = ([("source", a.source_tokens, a.source, "src_pos")] if a.source is not None else []) + [
        ("decoder input", a.target_tokens, a.target, "tgt_pos")]
    top = max(float(v.abs().max()) for _, _, v, _ in sides if v.numel()) or 1.0
    how = f"Integrated Gradients, {a.steps} steps" if a.method == "ig" else "gradient × input"
    return [_map(v.numpy()[None], [name], tokens, "input", dim,
                 f"Attribution of log P(“{a.token}”) at decoder position {a.position}: {name}",
                 f"{how}, {a.baseline} baseline; sum {a.total:+.4f} against f(x) − f(x′) = {a.delta:+.4f}",
                 "(x − x′) · ∫ ∂f/∂x dα" if a.method == "ig" else "(x − x′) · ∂f/∂x", (-top, top), DIVERGING)
            for name, tokens, v, dim in sides]  # fmt: skip


def attribution_csv(a: Attribution) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["input", "position", "token", "attribution"])
    if a.source is not None:
        for i, (t, v) in enumerate(zip(a.source_tokens, a.source.tolist())):
            w.writerow(["source", i, t, f"{v:.6g}"])
    for i, (t, v) in enumerate(zip(a.target_tokens, a.target.tolist())):
        w.writerow(["decoder input", i, t, f"{v:.6g}"])
    w.writerow(["completeness", "", "sum", f"{a.total:.6g}"])
    w.writerow(["completeness", "", "f(input) - f(baseline)", f"{a.delta:.6g}"])
    return out.getvalue()
