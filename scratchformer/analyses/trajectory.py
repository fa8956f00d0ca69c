"""Token trajectories: every token's vector at every point of the residual stream, projected onto a plane.

The points are the trace's own residual-stream steps (scratchformer.analyses.stream): after the embeddings and
after every sublayer, the encoder's first, then the decoder's (one "points" list, encoder then decoder). All the
vectors of all the points — the source tokens' at the encoder's points, the decoder-input tokens' at the
decoder's — are projected with one principal component analysis, fitted once, so one picture holds both stacks
and distances mean the same everywhere (both live in the same d_model space: the decoder reads the encoder's
output through cross-attention). `fit_on` fits it on one step's vectors instead and projects every point onto
those axes.

PCA (Pearson 1901; here by the singular value decomposition): with the fitted vectors X (n × d_model) and their
mean μ, X − μ = U Σ Vᵀ; the coordinates of any vector x are (x − μ) V[:, :2], and component k explains
σ_k² / Σ σ_j² of the fitted variance. Each component's sign is fixed so that its largest loading is positive,
so the picture does not flip between runs.

    compute(bundle, trace, batch=0, fit_on=None) → Trajectory;
    `scratchformer trajectory --model M --source S [--fit-on STEP] [--json]`
"""

from __future__ import annotations

import argparse
import difflib
from dataclasses import dataclass, field

import numpy as np
import torch

from ..commands.common import print_result, traced_run
from ..errors import UserError
from ..recording.trace import Trace
from .stream import add_run_args, point_label, residual_points

COMPONENTS = 2


@dataclass
class Trajectory:
    points: list[str]  # residual-stream step names: the encoder's, then the decoder's
    labels: list[str]  # 'encoder embeddings', 'decoder layer 1 cross-attention', …
    stacks: list[str]  # per point: 'encoder' or 'decoder'
    tokens: list[list[str]]  # per point: the tokens its vectors belong to (source tokens, or decoder input)
    coords: list[np.ndarray]  # per point: (tokens, 2)
    explained_variance: list[float]  # share of the fitted variance each component explains
    fit_on: str | None = None  # the step the PCA was fitted on (None: all points)
    mean: np.ndarray | None = None  # (d_model,) μ
    components: np.ndarray | None = None  # (2, d_model) the rows of Vᵀ
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"points": self.points, "labels": self.labels, "stacks": self.stacks, "tokens": self.tokens,
                "coords": [c.tolist() for c in self.coords], "explained_variance": self.explained_variance,
                "fit_on": self.fit_on, "notes": self.notes}  # fmt: skip


def fit_pca(x: np.ndarray, k: int = COMPONENTS) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """(μ (d,), the first k components (k, d), the share of variance each explains) of the rows of x (n, d), by
    SVD of the centred rows; each component's largest-magnitude loading made positive."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)  # vt: (min(n, d), d)
    k_avail = min(k, vt.shape[0])
    comps = vt[:k_avail].copy()
    signs = np.sign(comps[np.arange(k_avail), np.abs(comps).argmax(axis=1)])
    comps *= np.where(signs == 0, 1.0, signs)[:, None]
    total = float((s**2).sum())
    shares = [float(v) / total if total > 0 else 0.0 for v in (s[:k_avail] ** 2)]
    if k_avail < k:  # fewer vectors than components: the missing axes are zero
        comps = np.vstack([comps, np.zeros((k - k_avail, x.shape[1]))])
        shares += [0.0] * (k - k_avail)
    return mean, comps, shares


def _stack_tokens(trace: Trace, stack: str, batch: int) -> tuple[list[str], np.ndarray]:
    """The tokens of a stack's positions and which positions are not padding."""
    tokens = trace.source_tokens if stack == "encoder" else trace.target_tokens
    row = list(tokens[min(batch, len(tokens) - 1)]) if tokens else []
    pad = trace.source_pad if stack == "encoder" else trace.target_pad
    keep = np.ones(len(row), dtype=bool)
    if pad is not None and pad.shape[-1] == len(row):
        keep = ~pad[min(batch, pad.shape[0] - 1)].cpu().numpy()
    return row, keep


def _vectors(trace: Trace, name: str, batch: int, keep: np.ndarray | None) -> np.ndarray:
    step = trace[name]
    x = step.item(batch).to(torch.float64).numpy()  # (positions, d_model)
    if x.ndim != 2:
        raise UserError(f"{name} is not a vector per token (its axes are {', '.join(step.dims)}), so it cannot "
                        "be projected; --fit-on takes a residual-stream step such as the embeddings' output.")
    return x[keep] if keep is not None and keep.shape[0] == x.shape[0] else x


def stack_points(config, trace: Trace) -> list[tuple[str, str]]:
    """(stack, step name) of every residual-stream point: the encoder's, then the decoder's."""
    out = []
    for stack, has in (("encoder", config.has_encoder), ("decoder", config.has_decoder)):
        if has:
            out += [(stack, name) for name in residual_points(trace, stack, config.norm_first)]
    return out


def compute(bundle, trace: Trace, batch: int = 0, fit_on: str | None = None) -> Trajectory:
    """Every token's residual-stream vector at every point of batch item `batch`, on the first two principal
    components of all those vectors (or of step `fit_on`'s)."""
    c = bundle.config
    points = stack_points(c, trace)
    both = c.has_encoder and c.has_decoder
    names, labels, stacks, tokens, vectors = [], [], [], [], []
    kept = {}
    for stack, name in points:
        if stack not in kept:
            kept[stack] = _stack_tokens(trace, stack, batch)
        row, keep = kept[stack]
        x = _vectors(trace, name, batch, keep)  # (tokens, d_model)
        names.append(name)
        labels.append(f"{stack} {point_label(name)}" if both else point_label(name))  # 'decoder layer 1 …'
        stacks.append(stack)
        tokens.append([t for t, k in zip(row, keep) if k] if len(row) == len(keep) else row)
        vectors.append(x)
    if not vectors:
        raise UserError("This run has no residual stream to follow.")
    if fit_on is not None:
        if trace.find(fit_on) is None:
            close = difflib.get_close_matches(fit_on, names, n=3) or names[:3]
            raise UserError(f"--fit-on {fit_on} is not a step of this run; residual-stream steps are for example "
                            f"{', '.join(close)}.")
        stack = "encoder" if fit_on.startswith(("encoder.", "src_embed.")) else "decoder"
        fitted = _vectors(trace, fit_on, batch, kept.get(stack, (None, None))[1])
        if fitted.shape[-1] != vectors[0].shape[-1]:
            raise UserError(f"{fit_on} has {fitted.shape[-1]} numbers per token, not the stream's "
                            f"{vectors[0].shape[-1]}; --fit-on takes a residual-stream step.")
    else:
        fitted = np.concatenate(vectors)  # (all tokens × points, d_model)
    mean, comps, shares = fit_pca(fitted)
    coords = [((x - mean) @ comps.T).astype(np.float64) for x in vectors]  # each (tokens, 2)
    notes = []
    if both:
        notes.append("One PCA for both stacks: the encoder's points carry the source tokens, the decoder's the "
                     "decoder-input tokens, all projected onto the same two axes.")
    if trace.interventions:
        notes.append("This run changed the model on purpose (" + "; ".join(i.spec() for i in trace.interventions)
                     + "), and the trajectories follow the changed run.")  # fmt: skip
    return Trajectory(names, labels, stacks, tokens, coords, shares, fit_on, mean, comps[:COMPONENTS], notes)


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    p = sub.add_parser("trajectory", help="every token's path through the layers, on two principal components",
                       description="Project every token's vector at every point of the residual stream (after the "
                       "embeddings and after each sublayer; the encoder's points, then the decoder's) with one PCA "
                       "fitted on all of them, or on one step's vectors with --fit-on.")  # fmt: skip
    add_run_args(p)
    p.add_argument("--fit-on", metavar="STEP", help="fit the PCA on this step's vectors only (for example "
                   "encoder.1.add_norm2.out)")


def run(args: argparse.Namespace) -> int:
    bundle, _, trace, item = traced_run(args)
    result = compute(bundle, trace, item, args.fit_on)
    return print_result(args.json, result.to_dict(), lambda: text_report(result))


def text_report(t: Trajectory) -> str:
    """Per point and token: the two coordinates; the explained variance first."""
    fitted = f"fitted on {t.fit_on}" if t.fit_on else "fitted on every point"
    shares = ", ".join(f"PC{i + 1} {v:.1%}" for i, v in enumerate(t.explained_variance))
    lines = [f"PCA {fitted}: {shares} of the variance"]
    width = max(len(label) for label in t.labels)
    for label, toks, xy in zip(t.labels, t.tokens, t.coords):
        cells = "  ".join(f"{tok} ({x:+.2f}, {y:+.2f})" for tok, (x, y) in zip(toks, xy.tolist()))
        lines.append(f"  {label:<{width}}  {cells}")
    lines += [f"note: {n}" for n in t.notes]
    return "\n".join(lines)
