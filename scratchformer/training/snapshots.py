"""When a run keeps its snapshots (`train --snapshots N`), and the loss curve it records.

Attention forms early: in the copy and reverse tasks cross-attention goes from uniform to its final diagonal within
the first few hundred updates, then hardly moves. So the N snapshots are spread geometrically over the planned
steps, each at twice the step of the one before and the last at the final step (N = 6 over 1 056 steps: 33, 66,
132, 264, 528, 1056); a run too short for that many doublings starts at step 1 with a smaller ratio. Where the
interesting part is over long before the run ends, `--snapshots-until S` spreads them over the first S steps
instead (en-hi: N = 4 until 256 gives 32, 64, 128, 256; the final model shows the rest). Each snapshot
is a checkpoint in `<out>/snapshots/step-NNNNNN/` (see checkpoint.py); its step, train loss, validation loss and
token accuracy go into `<out>/training.json` under "snapshots", and the curve — the training loss averaged over
every `curve_every` steps, with validation at every snapshot and epoch end — under "curve".
"""

from __future__ import annotations

CURVE_POINTS = 200  # about this many points of training loss over a run


def snapshot_steps(total: int, n: int, until: int | None = None) -> list[int]:
    """N strictly increasing steps in [1, total], geometric (ratio at most 2), ending at `total` — or, given
    `until`, at min(until, total)."""
    if until is not None:
        total = min(total, max(until, 0))
    n = min(max(n, 0), max(total, 0))
    if n == 0:
        return []
    if n == 1:
        return [total]
    ratio = min(2.0, total ** (1 / (n - 1)))
    ideal = [total / ratio ** (n - 1 - i) for i in range(n)]
    steps = [max(1, round(x)) for x in ideal]
    steps[-1] = total
    for i in range(1, n):  # rounding can collide where steps are dense: push later ones up ...
        steps[i] = max(steps[i], steps[i - 1] + 1)
    steps[-1] = total
    for i in range(n - 2, -1, -1):  # ... and back under the next (n ≤ total leaves room for all)
        steps[i] = min(steps[i], steps[i + 1] - 1)
    return steps


def curve_every(total: int) -> int:
    """Steps per point of the training-loss curve: about CURVE_POINTS points over the planned run."""
    return max(1, total // CURVE_POINTS)
