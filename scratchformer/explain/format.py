"""How numbers print in the explanations: three significant figures, no scientific notation for everyday sizes."""

from __future__ import annotations

import math

GROUP = "\u202f"  # narrow no-break space between thousands: 50 257


def sig3(x: float) -> str:
    """5.6569 → '5.66', 0.96123 → '0.961', 0.5 → '0.5', 54413.0 → '54 400', -0.00001234 → '-1.23e-05'."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= 3:
        return group(round(x, 2 - magnitude))
    if magnitude < -3:
        return f"{x:.2e}"
    text = f"{x:.{2 - magnitude}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def group(n: float) -> str:
    """Whole numbers of five or more digits with a thin space every three: 54400 → '54 400'."""
    n = int(round(n))
    return f"{n:,}".replace(",", GROUP) if abs(n) >= 10000 else str(n)


def pct(fraction: float) -> str:
    """0.6234 → '62.3%'."""
    return f"{sig3(100 * fraction)}%"


def term(x: float) -> str:
    """A number written after a '+': negative ones in parentheses, 3 + (-0.5)."""
    return f"({sig3(x)})" if x < 0 else sig3(x)


class Num(float):
    """A float that prints with three significant figures, unless the template gives a format ({x:.2f})."""

    def __format__(self, spec: str) -> str:
        return format(float(self), spec) if spec else sig3(float(self))

    def __str__(self) -> str:
        return sig3(float(self))


class Count(int):
    """A whole number that prints with thousands grouped: 50 257."""

    def __format__(self, spec: str) -> str:
        return format(int(self), spec) if spec else group(int(self))

    def __str__(self) -> str:
        return group(int(self))
