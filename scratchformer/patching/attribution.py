"""Attribution patching (Nanda 2023; AtP, Kramár et al. 2024): every patch of the grid estimated from one
backward pass.

Patching component c moves its activation a from a_corrupt to a_clean. To first order in that move,

    m_patched − m_corrupt ≈ (a_clean − a_corrupt) · ∂m/∂a |corrupted run

so one forward pass on the corrupted input and one backward pass give every estimate at once. The gradient must
be the total derivative: each patched step carries on as tensor + 0, where the 0 is a tensor the gradient is
taken against (a StepEdit), so every later step still reads the earlier ones and the gradient flows through them.

The estimate is linear: where the metric curves between the two runs — attention that saturates, a norm that
rescales — it can be far off. `check_top_k` runs the real patches of the largest estimates, and `disagree`
marks the cells where the two differ by more than DISAGREE (in effect units: a tenth of the way from the
corrupted to the clean metric).
"""

from __future__ import annotations

import torch

from .batched import _cells, patched_metrics
from .components import Component
from .interventions import StepEdit, intervene
from .pair import Pair, final_hidden

DISAGREE = 0.1  # |estimated effect − exact effect| above this marks a cell


def _cell_sum(c: Component, t: torch.Tensor) -> torch.Tensor:
    """Sum of a (1, …) step tensor over the component's cells (its head, its position or every position)."""
    cells = _cells(c, t)[0]  # (T, d)
    return cells.sum() if c.position is None else cells[c.position].sum()


def gradients(pair: Pair, steps: list[str]) -> tuple[float, dict[str, torch.Tensor]]:
    """(m on the corrupted run, step → ∂m/∂step (1, …)) from one forward and one backward pass."""
    model = pair.model
    zeros = {s: torch.zeros(pair.corrupt[s].shape, device=pair.corrupt[s].device, requires_grad=True)
             for s in steps}  # fmt: skip
    nudges = [StepEdit(s, lambda t, z=z: t + z.to(t.dtype), "nudged by zero (attribution patching)")
              for s, z in zeros.items()]  # fmt: skip
    with torch.enable_grad(), intervene(model, nudges):
        m = pair.metric.values(model, final_hidden(model, pair.src_corrupt, pair.tgt_corrupt))[0]
        grads = torch.autograd.grad(m, list(zeros.values()))
    return float(m.detach()), dict(zip(zeros, grads))


def estimate(pair: Pair, components: list[Component]) -> torch.Tensor:
    """Estimated m_patched − m_corrupt (n,) of each component: Σ over its cells of ∂m/∂a · (a_clean − a_corrupt)."""
    _, grads = gradients(pair, list(dict.fromkeys(c.step for c in components)))
    out = torch.empty(len(components))
    for i, c in enumerate(components):
        diff = pair.clean[c.step].float() - pair.corrupt[c.step].float()  # (1, …)
        out[i] = _cell_sum(c, grads[c.step].float() * diff)
    return out


def disagree(estimated: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """bool (n,): cells whose estimated and exact effects differ by more than DISAGREE."""
    return (estimated - exact).abs() > DISAGREE


def check_top_k(pair: Pair, components: list[Component], estimated_effects: torch.Tensor, k: int = 10,
                budget: int | None = None) -> list[tuple[int, float, float]]:  # fmt: skip
    """The k cells with the largest estimated |effect|, each patched for real: [(index, estimated effect, exact
    effect)], largest estimate first."""
    k = min(k, len(components))
    top = estimated_effects.abs().topk(k).indices.tolist()
    m = patched_metrics(pair, [components[i] for i in top], budget=budget)
    exact = pair.effect(m)
    return [(i, float(estimated_effects[i]), float(e)) for i, e in zip(top, exact)]
