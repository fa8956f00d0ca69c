"""What a patching sweep measured: one Grid per family of components (heads, residual-stream points,
feed-forwards) and the Sweep that holds them with the metric's two ends. Plain data, below both the analysis that
fills it (scratchformer.analyses.sweep) and the plot data that draws it (scratchformer.plotdata.sweep)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from . import attribution
from .components import Component
from .metric import Metric
from .paths import Path


@dataclass
class Grid:
    """One family of components and what was measured for each: the exact effect, the attribution estimate, or
    both (None where not asked)."""

    components: list[Component]
    effects: torch.Tensor | None = None  # (n,) exact
    estimates: torch.Tensor | None = None  # (n,) attribution patching, in effect units

    def shown(self) -> torch.Tensor:
        """The numbers a map shows: the exact effects where they were measured, else the estimates."""
        return self.effects if self.effects is not None else self.estimates

    def disagree(self) -> torch.Tensor | None:
        if self.effects is None or self.estimates is None:
            return None
        return attribution.disagree(self.estimates, self.effects)


@dataclass
class Sweep:
    metric: Metric
    m_clean: float
    m_corrupt: float
    method: str
    per_position: bool
    heads: Grid
    positions: Grid
    mlp: Grid
    source_tokens: list[str]
    corrupt_tokens: list[str]
    target_tokens: list[str]
    path: Path | None = None
    checked: list[dict] = field(default_factory=list)  # the top estimates patched for real
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        def entries(grid: Grid, row: Callable[[Component], dict]) -> list[dict]:
            out = []
            shown, flags = grid.shown(), grid.disagree()
            for i, c in enumerate(grid.components):
                e = row(c) | {"effect": float(shown[i])}
                if self.method == "both":
                    e |= {"estimate": float(grid.estimates[i]), "disagree": bool(flags[i])}
                out.append(e)
            return out

        heads = entries(self.heads, lambda c: {"attention": c.attention, "layer": c.layer, "head": c.head,
                                               "position": c.position})  # fmt: skip
        points = lambda c: {"step": c.step, "position": c.position}  # noqa: E731
        out = {"metric": self.metric.to_dict(), "clean": self.m_clean, "corrupt": self.m_corrupt,
               "method": self.method, "heads": heads, "positions": entries(self.positions, points),
               "mlp": entries(self.mlp, points),
               "tokens": {"source": self.source_tokens, "corrupt": self.corrupt_tokens, "target": self.target_tokens},
               "notes": self.notes}  # fmt: skip
        if self.method != "exact":
            out["disagree_threshold"] = attribution.DISAGREE
        if self.checked:
            out["checked"] = self.checked
        if self.path is not None:
            out["path"] = self.path.to_dict()
        return out
