"""The colour bar's tick labels: a few round values, chosen here instead of by pyqtgraph.

pyqtgraph's automatic ticks on a tall colour bar lay out two or three levels of minor ticks and measure every label
(30 or more) each time the range changes — about 2 ms on every step of holding Next, since each step has a new
range. Four to six round values (1, 2 or 5 × 10ᵏ apart) say the same and cost a fraction of that.
"""

from __future__ import annotations

import math

STEPS = (1.0, 2.0, 5.0, 10.0)


def _count(lo: float, hi: float, step: float) -> tuple[int, int]:
    """(first, last) multiples of `step` within [lo, hi]."""
    return math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)


def round_step(lo: float, hi: float, least: int = 3) -> float:
    """The largest 1, 2 or 5 × 10ᵏ with at least `least` multiples between lo and hi (hi > lo)."""
    power = 10.0 ** math.floor(math.log10(hi - lo))
    for step in (m * power / 10**k for k in range(3) for m in STEPS[::-1]):
        first, last = _count(lo, hi, step)
        if last - first + 1 >= least:
            return step
    return power / 1000


def bar_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """[(value, label)] of three to about seven round values between lo and hi; one tick for a constant map
    (lo = hi) and none for a range that is not finite."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [(lo, f"{lo:.4g}")]
    step = round_step(lo, hi)
    first, last = _count(lo, hi, step)
    decimals = max(0, -math.floor(math.log10(step)))
    big = max(abs(lo), abs(hi)) >= 1e5 or step < 1e-4
    ticks = []
    for i in range(first, last + 1):
        value = i * step
        text = f"{value:.3g}" if big else f"{value:.{decimals}f}"
        if text.startswith("-") and float(text) == 0.0:
            text = text[1:]  # no "-0.0"
        ticks.append((value, text.replace("-", "−")))
    return ticks
