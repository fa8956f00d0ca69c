"""Summary statistics of a whole step tensor (the inspector's numbers)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .heatmap import format_value


@dataclass
class TensorStats:
    """Summary numbers of a whole step tensor (over every axis), ignoring ±∞ and NaN cells, which are counted;
    std is the population standard deviation (divided by n, as LayerNorm's)."""

    minimum: float
    maximum: float
    mean: float
    std: float
    n_masked: int  # cells that are −∞
    n_nan: int
    scope: str = "whole tensor"  # what the numbers cover: the whole tensor, or one batch item
    n_posinf: int = 0  # cells that are +∞

    def lines(self) -> list[str]:
        out = [
            f"min  {format_value(self.minimum)}",
            f"max  {format_value(self.maximum)}",
            f"mean {format_value(self.mean)}",
            f"std  {format_value(self.std)}",
        ]
        if self.n_masked:
            out.append(f"−∞   {self.n_masked} cells (masked)")
        if self.n_nan:
            out.append(f"NaN  {self.n_nan} cells")
        if self.n_posinf:
            out.append(f"+∞   {self.n_posinf} cells")
        return out


def tensor_stats(tensor: torch.Tensor) -> TensorStats:
    t = tensor.detach().to(torch.float32)
    finite = torch.isfinite(t)
    if bool(finite.all()):  # the usual case: two passes over the data, no copies
        vals, n_masked, n_nan = t.reshape(-1), 0, 0
    else:
        n_masked, n_nan = int(torch.isneginf(t).sum()), int(torch.isnan(t).sum())
        vals = t[finite]
    n_posinf = t.numel() - vals.numel() - n_masked - n_nan
    if vals.numel() == 0:
        nan = float("nan")
        return TensorStats(nan, nan, nan, nan, n_masked, n_nan, n_posinf=n_posinf)
    lo, hi = torch.aminmax(vals)
    std, mean = torch.std_mean(vals, correction=0)  # the population std, as LayerNorm and the explanations use
    return TensorStats(float(lo), float(hi), float(mean), float(std), n_masked, n_nan, n_posinf=n_posinf)
