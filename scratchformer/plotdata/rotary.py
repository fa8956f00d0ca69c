"""Rotary positions (RoPE): what the rotation does and why it works, as numbers the window and exporters share.

- `rotary_angles`: the angle pos · ω_i by which every pair of dimensions (i, i + d_rot/2) of a query or key turns
  at every position — a positions × pairs map of cos(pos · ω_i): the first pairs spin fast, the last barely move.
- `rotary_shift`: the property that makes it work, on one query vector q and one key vector k of a run: turned to
  positions m + s and n + s, their dot product is the same for every shift s (it depends on m − n only), and the
  rotation keeps their lengths. For contrast, the same q and k with the paper's sinusoids *added* instead give a
  score that moves with s: added positions mix absolute position into every dot product.
- `rotary_vectors`: the q and k a score of the trace was made from, before they were turned (QK-norm applied).

Everything here is numpy and float64, a few hundred numbers: cheap enough to compute while drawing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..recording.trace import Trace
from .heatmap import DIVERGING, Heatmap

DEFAULT_SHIFTS = (0, 1, 2, 5, 10, 50, 100, 1000)


def omegas(config, layer: int | None = None) -> np.ndarray:
    """ω_i = θ^(−2i/d_rot) for pair i of a layer (its local base on a Gemma 3 sliding-window layer), float64."""
    from ..transformer.rotary import inverse_frequencies  # torch: imported only when asked

    return inverse_frequencies(config, local=config.local_rope(layer)).double().numpy()


def turn(x: np.ndarray, omega: np.ndarray, pos: float) -> np.ndarray:
    """x (d_head,) turned to position `pos`: pair (i, i + d_rot/2) by the angle pos · ω_i; dimensions past d_rot
    (partial rotary) unchanged. The same arithmetic as scratchformer.transformer.rotary.rotate, in numpy."""
    x = np.asarray(x, dtype=np.float64)
    half = omega.shape[0]
    a, b = x[:half], x[half:2 * half]  # (d_rot/2,) each
    c, s = np.cos(pos * omega), np.sin(pos * omega)
    return np.concatenate([a * c - b * s, b * c + a * s, x[2 * half:]])


def sinusoids(pos: float, width: int) -> np.ndarray:
    """The paper's sinusoidal encoding of one position, `width` numbers (sin at even, cos at odd dimensions)."""
    i2 = np.arange(width) - np.arange(width) % 2
    angle = pos / np.power(10000.0, i2 / max(width, 1))
    return np.where(np.arange(width) % 2 == 0, np.sin(angle), np.cos(angle))


def rotary_angles(config, n_positions: int, layer: int | None = None, labels: Sequence[str] | None = None
                  ) -> Heatmap:  # fmt: skip
    """positions × pairs map of cos(pos · ω_i): how far each pair of a query or key dimensions is turned at
    each position. The angles themselves are in extra["angles"], ω in extra["omega"], wavelengths 2π/ω in
    extra["wavelengths"]."""
    omega = omegas(config, layer)  # (d_rot/2,)
    pos = np.arange(n_positions, dtype=np.float64)
    angles = pos[:, None] * omega[None, :]  # (positions, d_rot/2)
    d_rot, half = config.d_rotary, omega.shape[0]
    rows = list(labels[:n_positions]) if labels is not None else []
    rows = [f"{i} {t}" for i, t in enumerate(rows)] + [str(i) for i in range(len(rows), n_positions)]
    theta = config.rope_local_theta if config.local_rope(layer) else config.rope_theta
    wavelengths = 2 * np.pi / omega
    partial = ""
    if d_rot < config.d_head:
        partial = f"; the other {config.d_head - d_rot} of d_head {config.d_head} do not turn"
    return Heatmap(
        values=np.ascontiguousarray(np.cos(angles), dtype=np.float32),
        row_labels=rows, col_labels=[f"{i}&{i + half}" for i in range(half)], row_dim="position", col_dim="pair",
        levels=(-1.0, 1.0), colormap=DIVERGING,
        title=f"RoPE: cos of the angle each pair of dimensions (i, i + {half}) is turned by, at every position",
        subtitle=(f"{n_positions} positions × {half} pairs; θ = {theta:g}, d_rot = {d_rot}{partial}; wavelengths "
                  f"from {wavelengths.min():.3g} to {wavelengths.max():,.0f} positions"),
        formula=f"angle(pos, i) = pos · ω_i,  ω_i = {theta:g}^(−2i/{d_rot})",
        extra={"kind": "rotary_angles", "angles": angles, "omega": omega, "wavelengths": wavelengths,
               "theta": float(theta), "d_rot": d_rot},
    )  # fmt: skip


@dataclass
class RotaryShift:
    """One query vector and one key vector turned to positions (m + s, n + s) for several shifts s."""

    m: int  # the query's position in the run
    n: int  # the key's position
    shifts: list[int]
    rotary: np.ndarray  # (shifts,) rot(q, m + s) · rot(k, n + s): the same for every s
    added: np.ndarray  # (shifts,) (q + PE(m + s)) · (k + PE(n + s)): the paper's way, moves with s
    unturned: float  # q · k: what the score would be with no positions at all
    q_norms: np.ndarray  # (shifts,) |rot(q, m + s)|: all |q|, a rotation keeps lengths
    k_norms: np.ndarray
    q_norm: float
    k_norm: float
    traced: float | None = None  # the run's own score for this pair (unscaled), when known
    notes: dict = field(default_factory=dict)

    @property
    def spread(self) -> float:
        """How much the rotary score moves over the shifts: float rounding only."""
        return float(self.rotary.max() - self.rotary.min())

    @property
    def added_spread(self) -> float:
        return float(self.added.max() - self.added.min())

    def heatmap(self, title: str = "") -> Heatmap:
        """The two rows of scores over the shifts, for export."""
        values = np.ascontiguousarray(np.stack([self.rotary, self.added]), dtype=np.float32)  # (2, shifts)
        top = float(np.abs(values).max()) or 1.0
        return Heatmap(
            values=values, row_labels=["rotated (RoPE)", "sinusoids added"],
            col_labels=[f"s={s}" for s in self.shifts], row_dim="positions", col_dim="shift",
            levels=(-top, top), colormap=DIVERGING,
            title=title or f"Score of query {self.m} and key {self.n} with both moved by s positions",
            subtitle=(f"RoPE: {self.rotary[0]:.4g} for every s (spread {self.spread:.1g}); added sinusoids: from "
                      f"{self.added.min():.4g} to {self.added.max():.4g}"),
            formula="rot(q, m+s)·rot(k, n+s) = q·rot(k, n−m)   vs   (q + PE(m+s))·(k + PE(n+s))",
            extra={"kind": "rotary_shift", "shifts": list(self.shifts)},
        )


def rotary_shift(q: np.ndarray, k: np.ndarray, omega: np.ndarray, m: int, n: int,
                 shifts: Sequence[int] = DEFAULT_SHIFTS, traced: float | None = None) -> RotaryShift:  # fmt: skip
    """The shift demonstration for one query vector q and key vector k (d_head,), taken before rotation: both
    turned to positions m + s and n + s. The rotary score is q·rot(k, n − m) for every s: a rotation by a followed
    by the transpose of one by b is a rotation by b − a. The sinusoids added to the same q and k instead (the
    paper adds them to the embeddings, below W^Q and W^K: the same effect, q and k carry absolute positions)
    give (q + p_{m+s})·(k + p_{n+s}) = q·k + q·p_{n+s} + p_{m+s}·k + p_{m+s}·p_{n+s}: the last term depends on
    the distance only, the two middle ones on where the pair stands."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    shifts = [int(s) for s in shifts]
    rotary, added, qn, kn = [], [], [], []
    for s in shifts:
        qr, kr = turn(q, omega, m + s), turn(k, omega, n + s)
        rotary.append(qr @ kr)
        qn.append(np.linalg.norm(qr))
        kn.append(np.linalg.norm(kr))
        added.append((q + sinusoids(m + s, q.shape[0])) @ (k + sinusoids(n + s, k.shape[0])))
    return RotaryShift(m=m, n=n, shifts=shifts, rotary=np.array(rotary), added=np.array(added),
                       unturned=float(q @ k), q_norms=np.array(qn), k_norms=np.array(kn),
                       q_norm=float(np.linalg.norm(q)), k_norm=float(np.linalg.norm(k)), traced=traced)  # fmt: skip


def rotary_layers(trace: Trace) -> list[str]:
    """The attentions of a trace whose queries are turned (e.g. "decoder.0.self_attn"), in order."""
    return [s.name[: -len(".q_rotated")] for s in trace.steps if s.name.endswith(".q_rotated")]


def kv_head_of(config, head: int) -> int:
    """The key/value head a query head reads: n_heads / kv_heads consecutive query heads share one."""
    return head // max(config.n_heads // config.kv_heads, 1)


def rotary_steps(trace: Trace, attention: str) -> list:
    """The steps rotary_vectors reads (for a recompute off the UI thread before it runs)."""
    names = [f"{attention}.{w}_normed" if trace.find(f"{attention}.{w}_normed") else f"{attention}.{w}" for w in "qk"]
    return [s for s in (trace.find(n) for n in [*names, f"{attention}.scores"]) if s is not None]


def rotary_vectors(trace: Trace, config, attention: str, head: int, query: int, key: int, batch: int = 0
                   ) -> tuple[np.ndarray, np.ndarray, float | None]:  # fmt: skip
    """(q, k, traced score): query head `head`'s vector at position `query` and its key/value head's key vector at
    position `key` as they were before the rotation (after QK-norm where the model has it), and the run's score
    of that pair before scaling (None when the trace has none)."""
    def vector(which: str, h: int, pos: int) -> np.ndarray:
        step = trace.find(f"{attention}.{which}_normed") or trace[f"{attention}.{which}"]
        return step.item(batch)[h, pos].double().numpy()

    q = vector("q", head, query)
    k = vector("k", kv_head_of(config, head), key)
    scores = trace.find(f"{attention}.scores")
    traced = float(scores.item(batch)[head, query, key]) if scores is not None else None
    return q, k, traced


def layer_of(attention: str) -> int | None:
    """'decoder.3.self_attn' → 3."""
    parts = attention.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
