"""Checking a learner's answer against the one computed from the run, with feedback that explains it."""

from __future__ import annotations

from dataclasses import dataclass

from .prepare import PreparedQuestion
from .values import number_text


@dataclass(frozen=True)
class Verdict:
    correct: bool
    message: str  # "Right. …" or "Not quite: the answer is … ." followed by the page's feedback


def check_response(q: PreparedQuestion, response) -> Verdict:
    """`response`: a choice (0-based int) for choice questions, a number or its text for number questions, a full
    cell index for click questions. A response that cannot be read (no number typed) is not counted wrong: it
    comes back with correct=False and a message saying what to give."""
    if q.kind == "choice":
        try:
            picked = int(response)
        except (TypeError, ValueError):
            return Verdict(False, "Pick one of the choices first.")
        correct = picked == q.correct
    elif q.kind == "number":
        value = read_number(response)
        if value is None:
            return Verdict(False, "Type a number first (e.g. 5.66).")
        correct = abs(value - q.number) <= q.tolerance
    else:
        try:
            cell = tuple(int(i) for i in response)
        except (TypeError, ValueError):
            return Verdict(False, "Click a cell of the map first.")
        correct = cell == tuple(q.cell)
    return Verdict(correct, verdict_text(q, correct))


def verdict_text(q: PreparedQuestion, correct: bool) -> str:
    answer = q.answer_text
    if q.kind == "number" and q.tolerance > 0:
        answer += f" (within ±{number_text(q.tolerance)})"
    head = "Right." if correct else f"Not quite: the answer is {answer}."
    return f"{head} {q.feedback}".strip()


def read_number(response) -> float | None:
    if isinstance(response, bool):
        return None
    if isinstance(response, (int, float)):
        return float(response)
    text = str(response or "").strip().replace("−", "-").replace(",", ".").replace("\u202f", "").replace(" ", "")
    if text.startswith("√"):  # "√32" is a fine way to say 5.66
        inner = read_number(text[1:])
        return inner ** 0.5 if inner is not None and inner >= 0 else None
    try:
        return float(text)
    except ValueError:
        return None
