"""LayerNorm before and after, and what BatchNorm would have normalised instead.

LayerNorm (Ba et al., 2016; paper §3.1) normalises each token on its own: the d_model numbers of one position
get mean 0 and standard deviation 1, then a learned per-feature scale γ and shift β. BatchNorm (Ioffe & Szegedy,
2015), the norm of convolutional networks, normalises each feature across the batch instead: one column of the
(batch·positions) × d_model matrix at a time, which ties a token's result to the other sentences it is batched
with. `norm_comparison` computes both from the LayerNorm step's own input, so the two can be shown side by side.
A model normalising with RMSNorm (T5) gets its own left map: x / √(mean(x²) + ε), no mean subtracted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..recording.trace import Step, Trace
from .heatmap import DIVERGING, Heatmap, axis_labels, step_heatmap


@dataclass
class NormComparison:
    """One LayerNorm step: statistics per token before / after, and BatchNorm's per-feature alternative."""

    step: str  # the LayerNorm step, e.g. "encoder.0.add_norm1.out"
    input_step: str  # what it normalised, e.g. "encoder.0.add_norm1.residual"
    batch: int  # the batch item of the per-token arrays and the heatmaps
    pos_dim: str  # "src_pos" or "tgt_pos"
    labels: list[str]  # token labels of the positions (batch item `batch`)
    eps: float
    # per token (over d_model), batch item `batch`; std is the population std LayerNorm divides by (without ε)
    mean_before: np.ndarray  # (positions,)
    std_before: np.ndarray
    mean_after: np.ndarray  # of the step's output: after γ and β, so not exactly 0 / 1 on a trained model
    std_after: np.ndarray
    mean_normalized: np.ndarray  # of z = (x − μ)/√(σ² + ε), before γ and β: 0 and (nearly) 1
    std_normalized: np.ndarray
    # per feature, across every batch item and position: the statistics BatchNorm would use
    feature_mean: np.ndarray  # (d_model,)
    feature_std: np.ndarray
    n_rows: int  # batch · positions that BatchNorm would average over
    layer_norm: Heatmap  # z for batch item `batch`: each row has mean 0, std 1
    output: Heatmap  # the step's output γ·z + β (what the model passes on)
    batch_norm: Heatmap  # (x − μ_feature)/√(σ²_feature + ε): each column has mean 0, std 1 over the batch
    notes: list[str] = field(default_factory=list)


def layer_norm_input(trace: Trace, step: Step) -> Step | None:
    """The step a LayerNorm step normalised: an Add & Norm's `.residual`, the embeddings' `.sum`, or (for a
    stack's final LayerNorm) the step before it. None when `step` is not a LayerNorm step."""
    if step.kind != "layer_norm":
        return None
    name = step.name
    candidates = []
    if name.endswith(".out"):
        candidates.append(name[: -len(".out")] + ".residual")
    if name.endswith(".layer_norm"):
        candidates.append(name[: -len(".layer_norm")] + ".sum")
    for c in candidates:
        found = trace.find(c)
        if found is not None and found.shape == step.shape:
            return found
    if step.index > 0:  # the final LayerNorm of a stack reads the last layer's output, the step before it
        prev = trace[step.index - 1]
        if prev.shape == step.shape and prev.dims == step.dims:
            return prev
    return None


def _per_token(x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std over the last axis."""
    mean = x.mean(-1)
    std = x.var(-1, unbiased=False).sqrt()
    return mean.to(torch.float32).numpy(), std.to(torch.float32).numpy()


def norm_comparison(trace: Trace, step: Step | str | int, batch: int = 0, eps: float = 1e-5) -> NormComparison | None:
    """LayerNorm vs BatchNorm for a `layer_norm` step (None for any other kind, or when its input is not found).

    `eps` is the model's LayerNorm ε (config.layer_norm_eps); BatchNorm gets the same. BatchNorm's statistics run
    over every batch item and position of the input, padding included (a Transformer batch carries it too).
    """
    step = step if isinstance(step, Step) else trace[step]
    source = layer_norm_input(trace, step)
    if source is None or "batch" not in step.dims or len(step.shape) != 3:
        return None
    x = source.tensor.to(torch.float64)  # (B, T, d_model)
    y = step.tensor.to(torch.float64)
    n_batch, n_pos, d_model = x.shape
    b = min(max(batch, 0), n_batch - 1)
    pos_dim = step.dims[1]

    # LayerNorm: statistics of each token's row (RMSNorm, T5's: the root mean square only, nothing centred)
    rms = is_rms_norm(step)
    if rms:
        z = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)  # (B, T, d_model)
    else:
        mu = x.mean(-1, keepdim=True)  # (B, T, 1)
        var = x.var(-1, unbiased=False, keepdim=True)
        z = (x - mu) / torch.sqrt(var + eps)  # (B, T, d_model)

    # BatchNorm: statistics of each feature's column over batch and positions
    rows = x.reshape(-1, d_model)  # (B·T, d_model)
    f_mu = rows.mean(0)  # (d_model,)
    f_var = rows.var(0, unbiased=False)
    bn = (x - f_mu) / torch.sqrt(f_var + eps)  # (B, T, d_model)

    mean_before, std_before = _per_token(x[b])
    mean_after, std_after = _per_token(y[b])
    mean_norm, std_norm = _per_token(z[b])
    output = step_heatmap(trace, step, b)
    labels = axis_labels(trace, pos_dim, n_pos, b) or [str(i) for i in range(n_pos)]

    z_b = np.ascontiguousarray(z[b].to(torch.float32).numpy())
    bn_b = np.ascontiguousarray(bn[b].to(torch.float32).numpy())
    finite = np.concatenate([np.abs(z_b[np.isfinite(z_b)]), np.abs(bn_b[np.isfinite(bn_b)])])
    m = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    levels = (-m, m)  # one colour scale for both, so they compare cell for cell
    item = f"batch item {b + 1}"
    if rms:
        ln_map = _like(output, z_b, levels, "RMSNorm: each row → root mean square 1 (mean not 0)",
                       f"{step.name} before γ  ·  {n_pos} {pos_dim} × {d_model} d_model  ·  {item}",
                       "z = x / √(mean(x²)_token + ε)")
    else:
        ln_map = _like(output, z_b, levels,
                       "LayerNorm: each row → mean 0, std 1",
                       f"{step.name} before γ, β  ·  {n_pos} {pos_dim} × {d_model} d_model  ·  {item}",
                       "z = (x − μ_token) / √(σ²_token + ε)")
    bn_map = _like(output, bn_b, levels,
                   "BatchNorm: each column → mean 0, std 1",
                   f"input {source.name}  ·  statistics over {n_batch} × {n_pos} = {n_batch * n_pos} rows  ·  {item}",
                   "(x − μ_feature) / √(σ²_feature + ε),  μ, σ over batch and positions")
    notes = []
    if rms:
        notes.append("This model normalises with RMSNorm: each token is divided by its root mean square and scaled by "
                     "γ; no mean is subtracted and there is no β.")
    if n_batch * n_pos == 1:
        notes.append("With a single token in the batch BatchNorm has nothing to compare it with: "
                     "every value becomes 0.")
    elif n_batch == 1:
        notes.append("The batch holds one sentence, so BatchNorm's statistics come from its own positions only.")
    return NormComparison(
        step=step.name, input_step=source.name, batch=b, pos_dim=pos_dim, labels=labels, eps=eps,
        mean_before=mean_before, std_before=std_before, mean_after=mean_after, std_after=std_after,
        mean_normalized=mean_norm, std_normalized=std_norm,
        feature_mean=f_mu.to(torch.float32).numpy(), feature_std=f_var.sqrt().to(torch.float32).numpy(),
        n_rows=n_batch * n_pos, layer_norm=ln_map, output=output, batch_norm=bn_map, notes=notes,
    )


def _like(template: Heatmap, values: np.ndarray, levels: tuple[float, float], title: str, subtitle: str,
          formula: str) -> Heatmap:
    return Heatmap(
        values=values, row_labels=template.row_labels, col_labels=template.col_labels, row_dim=template.row_dim,
        col_dim=template.col_dim, levels=levels, colormap=DIVERGING, title=title, subtitle=subtitle,
        formula=formula,
    )


def is_rms_norm(step: Step) -> bool:
    """True for a norm step of a model that uses RMSNorm (T5): its formula names it."""
    return step.kind == "layer_norm" and step.formula.startswith("RMSNorm")


def layer_norm_steps(trace: Trace) -> list[Step]:
    """Every LayerNorm step of a trace, in order."""
    return [s for s in trace if s.kind == "layer_norm"]


def layer_norm_step_near(trace: Trace, index: int) -> Step | None:
    """The LayerNorm step at or after step `index`; the last one before it when none follows."""
    steps = layer_norm_steps(trace)
    after = [s for s in steps if s.index >= index]
    if after:
        return after[0]
    return steps[-1] if steps else None
