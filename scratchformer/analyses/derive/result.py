"""What a derivation returns, and how its numbers are written: a value, the same value recomputed from its
inputs by the written-out formula, the expression with this run's numbers, the inputs read and the terms."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .reader import Cell, json_number

TOP_TERMS = 6  # a long sum lists this many of its largest terms and summarises the rest


def num(x: float) -> str:
    """Four significant figures, −∞ and ∞ as symbols: 0.41327 → '0.4133', -12.5 → '−12.5'."""
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    if x == 0:
        return "0"
    text = f"{x:.4g}"
    if "e" in text:
        mantissa, exp = text.split("e")
        text = f"{mantissa}e{int(exp)}"
    return text.replace("-", "−")


def paren(x: float) -> str:
    """A number as a factor: negative ones in parentheses, '(−0.31)'."""
    text = num(x)
    return f"({text})" if text.startswith("−") else text


@dataclass
class Term:
    label: str
    value: float

    def to_dict(self) -> dict:
        return {"label": self.label, "value": json_number(self.value)}


@dataclass
class Derivation:
    """How one cell of one step was computed."""

    step: str
    index: tuple[int, ...]
    value: float  # the trace's value
    recomputed: float  # from the inputs, by the written-out formula (float64)
    formula: str  # symbolic: 'score[i, j] = Σ_e q[i, e]·k[j, e]'
    expression: str  # the same with this run's numbers
    terms: list[Term] = field(default_factory=list)
    inputs: list[Cell] = field(default_factory=list)
    unlisted: int = 0  # inputs read but not listed one by one (a 50 257-entry softmax row)
    note: str = ""  # one or two sentences in words: why a cell is −∞, what a clipped ReLU did …
    title: str = ""  # the step's title for people

    def agrees(self, rtol: float = 1e-5) -> bool:
        """Whether the recomputed value equals the trace's, relative to the size of the terms that made it."""
        if math.isinf(self.value) or math.isinf(self.recomputed):
            return self.value == self.recomputed
        scale = max([abs(self.value), *(abs(t.value) for t in self.terms if math.isfinite(t.value)), 1e-30])
        return abs(self.value - self.recomputed) <= rtol * scale + 1e-7

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "index": list(self.index),
            "value": json_number(self.value),
            "recomputed": json_number(self.recomputed),
            "formula": self.formula,
            "expression": self.expression,
            "inputs": [c.to_dict() for c in self.inputs],
            "unlisted_inputs": self.unlisted,
            "terms": [t.to_dict() for t in self.terms],
            "note": self.note,
        }

    def input_groups(self) -> list[tuple[str, list[tuple[int, ...]]]]:
        """The trace cells read, grouped by step in the order first read: [(step name, [index, …])]."""
        groups: dict[str, list[tuple[int, ...]]] = {}
        for c in self.inputs:
            if c.step is not None:
                groups.setdefault(c.step, []).append(c.index)
        return list(groups.items())


def summed(products: np.ndarray, label, left: np.ndarray, right: np.ndarray, extra: list[Term] | None = None
           ) -> tuple[float, str, list[Term]]:  # fmt: skip
    """A sum of products Σ left[j]·right[j] (+ extra terms such as a bias): (total, written-out expression, terms).

    Long sums show their TOP_TERMS largest products by size and one summary term for the rest, so the terms still
    add up to the total. `label(j)` names product j."""
    extra = extra or []
    total = float(products.sum()) + sum(t.value for t in extra)
    order = np.argsort(-np.abs(products), kind="stable")
    top = order[:TOP_TERMS]
    rest = order[TOP_TERMS:]
    parts = [f"{paren(left[j])}·{paren(right[j])}" for j in top]
    terms = [Term(label(int(j)), float(products[j])) for j in top]
    if len(rest):
        rest_sum = float(products[rest].sum())
        parts.append(f"{len(rest)} smaller terms ({num(rest_sum)})")
        terms.append(Term(f"{len(rest)} smaller terms", rest_sum))
    parts += [paren(t.value) for t in extra]
    terms += extra
    return total, " + ".join(parts) + f" = {num(total)}", terms
