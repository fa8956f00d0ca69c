"""Training a dictionary on activations (TopK: Gao et al. 2024; BatchTopK: Bussmann et al. 2024; ReLU + L1).

    loss = ‖y − ŷ‖² / d_out                                 the reconstruction (y = x for an SAE)
         + α · ‖e − ê_dead‖² / d_out   (TopK, BatchTopK)    AuxK: the k_aux largest *dead* features reconstruct
                                                            the error e = y − ŷ, so dead features get gradient again
         + λ · Σ_i f_i ‖W_dec,i‖       (ReLU)               the L1 sparsity penalty

Adam; b_dec starts at the mean of y; after each step the decoder's rows are put back to unit norm (their gradient
along themselves removed first), so a feature's size lives in its activation. A feature is *dead* when it has not
fired over the last `dead_after` tokens. Checkpoints are the dictionary's own folder, written every
`checkpoint_every` steps and when training is cancelled, so nothing trained is lost.

Under torchrun each rank trains on its shard of the corpus (torch.distributed's process group, as training's
scratchformer.training.distributed sets it up) and the gradients are averaged over the ranks after each backward
pass, as DistributedDataParallel does: the ranks hold the same weights after every step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import folder as folder_io
from .dictionary import Dictionary

AUX_ALPHA = 1 / 32


@dataclass
class TrainSettings:
    width: int = 512  # d_sae
    k: int = 8
    architecture: str = "topk"
    steps: int | None = None  # None: as many as `epochs` passes over the activations take
    epochs: float = 8.0
    batch_tokens: int = 1024
    lr: float | None = None  # None: 2e-4 · √(16384 / width), Gao et al.'s scaling
    l1: float = 5.0  # ReLU dictionaries' λ
    # tokens without firing before a feature counts as dead (AuxK); None: a tenth of the run's tokens, at least
    # 20 000 (AuxK switched on too early slows training and helps nothing)
    dead_after: int | None = None
    seed: int = 0
    checkpoint_every: int = 500


@dataclass
class Outcome:
    dictionary: Dictionary
    steps: int
    seconds: float
    cancelled: bool = False
    history: list[float] = field(default_factory=list)  # the reconstruction loss every 50 steps


def learning_rate(s: TrainSettings) -> float:
    return s.lr if s.lr is not None else 2e-4 * math.sqrt(16384 / s.width)


def _aux_loss(d: Dictionary, pre: torch.Tensor, error: torch.Tensor, dead: torch.Tensor) -> torch.Tensor:
    """AuxK: the k_aux = d_in / 2 largest pre-activations among dead features, decoded without bias, fit the error."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return pre.new_zeros(())
    k_aux = min(max(d.d_out // 2, 1), n_dead)
    masked = pre.masked_fill(~dead, float("-inf"))  # (N, d_sae)
    values, index = masked.topk(k_aux, dim=-1)
    f_aux = torch.zeros_like(pre).scatter(-1, index, values.relu())
    guess = f_aux @ d.W_dec  # (N, d_out)
    return (guess - error.detach()).pow(2).sum(-1).mean() / d.d_out


def _unit_rows(d: Dictionary) -> None:
    with torch.no_grad():
        d.W_dec /= d.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-8)


def _drop_parallel_grad(d: Dictionary) -> None:
    """Remove from each decoder row's gradient its part along the row (the row's norm is fixed at 1)."""
    g, w = d.W_dec.grad, d.W_dec.data
    if g is not None:
        g -= (g * w).sum(1, keepdim=True) * w


def train(d: Dictionary, x: torch.Tensor, y: torch.Tensor | None, settings: TrainSettings,
          out: str | Path | None = None, progress: Callable[[int, int, float], None] | None = None,
          cancelled: Callable[[], bool] | None = None, dist=None) -> Outcome:  # fmt: skip
    """Train `d` in place on inputs x (N, d_in) and targets y (N, d_out; None: x itself). `dist`: a
    training.distributed.Distributed (None: one process). Checkpoints go to `out` (rank 0 writes)."""
    from ..training.distributed import Distributed

    dist = dist or Distributed()
    y = x if y is None else y
    g = torch.Generator().manual_seed(settings.seed)
    d.reset_parameters(g)  # the same start on every rank
    n = x.shape[0]
    total_n = int(dist.sum([n])[0])
    with torch.no_grad():  # b_dec starts at the mean target, over every rank's shard
        sums = dist.sum(y.double().sum(0).tolist())
        d.b_dec.copy_(torch.tensor(sums, dtype=torch.float32) / max(total_n, 1))
    batch = max(1, settings.batch_tokens // dist.world_size)
    steps = settings.steps or max(1, int(settings.epochs * total_n / settings.batch_tokens))
    dead_after = settings.dead_after or max(20_000, steps * settings.batch_tokens // 10)
    opt = torch.optim.Adam(d.parameters(), lr=learning_rate(settings), betas=(0.9, 0.999))
    since_fired = torch.zeros(d.d_sae)
    kept_min: list[float] = []  # BatchTopK: the smallest activation kept, per step (the threshold's estimate)
    history: list[float] = []
    start = time.perf_counter()
    order = torch.randperm(n, generator=g)
    at = 0
    step = 0
    for step in range(1, steps + 1):
        if cancelled is not None and cancelled():
            break
        if at + batch > n:
            order, at = torch.randperm(n, generator=g), 0
        idx = order[at : at + batch]
        at += batch
        xb, yb = x[idx], y[idx]  # (b, d_in), (b, d_out)
        pre = d.pre(xb)  # (b, d_sae)
        f = d.activate(pre, batch_topk=settings.architecture == "batchtopk")  # (b, d_sae)
        recon = f @ d.W_dec + d.b_dec
        error = yb - recon
        loss = error.pow(2).sum(-1).mean() / d.d_out
        fired = (f > 0).any(0)
        since_fired = torch.where(fired, torch.zeros_like(since_fired), since_fired + len(idx))
        if settings.architecture in ("topk", "batchtopk"):
            loss = loss + AUX_ALPHA * _aux_loss(d, pre, error, since_fired >= dead_after)
        elif settings.architecture == "standard":
            loss = loss + settings.l1 * (f * d.W_dec.norm(dim=1)).sum(-1).mean() / d.d_out
        if settings.architecture == "batchtopk" and bool((f > 0).any()):
            kept_min.append(float(f.detach()[f > 0].min()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        _average_grads(d, dist)
        _drop_parallel_grad(d)
        opt.step()
        _unit_rows(d)
        if step % 50 == 0 or step == 1:
            history.append(float(loss.detach()))
        if progress is not None:
            progress(step, steps, float(loss.detach()))
        if out is not None and dist.is_main and step % settings.checkpoint_every == 0:
            _finish(d, kept_min)
            folder_io.save(d, out)
    was_cancelled = step < steps or (cancelled is not None and cancelled())
    _finish(d, kept_min)
    if out is not None and dist.is_main:
        folder_io.save(d, out)
    return Outcome(d, step, time.perf_counter() - start, was_cancelled, history)


def _average_grads(d: Dictionary, dist) -> None:
    """The gradient averaged over the ranks (nothing to do in one process)."""
    if not dist.active:
        return
    import torch.distributed as tdist

    for p in d.parameters():
        if p.grad is not None:
            tdist.all_reduce(p.grad)
            p.grad /= dist.world_size


def _finish(d: Dictionary, kept_min: list[float]) -> None:
    """BatchTopK runs as a JumpReLU once trained: its threshold is the smallest kept activation, averaged over the
    last steps (about a tenth of them)."""
    if d.architecture == "batchtopk" and kept_min:
        tail = kept_min[-max(1, len(kept_min) // 10) :]
        with torch.no_grad():
            d.threshold.fill_(sum(tail) / len(tail))
