"""A lesson's pages with one run's numbers in them: the text filled, the choices listed, the answer computed.

Preparing reads the run's tensors, so the window does it off the UI thread, for every page of a lesson that
reads the same run at once; then a page turn only shows what is ready.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .schema import TOKEN_CHOICES, Lesson, LessonError, Page, Question
from .values import RESULT_FUNCTION, RunValues, Value, evaluate, fill, parse_expression, placeholders


@dataclass(frozen=True)
class PreparedQuestion:
    kind: str  # choice | number | click
    prompt: str
    choices: tuple[str, ...]  # choice questions: the texts shown
    correct: int | None  # choice questions: the right choice (0-based)
    number: float | None  # number questions: the right number
    tolerance: float
    cell: tuple[int, ...] | None  # click questions: the full index of the right cell
    step: str | None  # click questions: the step whose map is clicked
    answer_text: str  # the right answer, as the feedback writes it
    feedback: str  # with this run's numbers and {answer} filled


@dataclass(frozen=True)
class PreparedPage:
    page: Page
    number: int  # 1-based
    text: str
    question: PreparedQuestion | None


def prepare_pages(lesson: Lesson, run: RunValues, numbers: list[int] | None = None) -> dict[int, PreparedPage]:
    """The pages (1-based numbers; all by default) with this run's values; LessonError for the first that fails."""
    out = {}
    for n in numbers or range(1, len(lesson.pages) + 1):
        out[n] = prepare_page(lesson, n, run)
    return out


def prepare_page(lesson: Lesson, n: int, run: RunValues) -> PreparedPage:
    page = lesson.pages[n - 1]
    try:
        check_targets(page, run)
        run = with_experiment(lesson, page, run)
        text = fill(page.text, run)
        question = prepare_question(page.question, page, run) if page.question is not None else None
    except ValueError as exc:
        raise LessonError(lesson.file or lesson.id, n, str(exc), page.title) from None
    return PreparedPage(page, n, text, question)


def reads_result(page: Page) -> bool:
    """Whether a text of the page reads its experiment's result ({result:…} or answer = "result:…")."""
    q = page.question
    texts = [page.text] + ([q.prompt, q.answer, q.feedback, *([] if isinstance(q.choices, str) else q.choices)]
                           if q is not None else [])  # fmt: skip
    return any(e.strip().startswith(f"{RESULT_FUNCTION}:") for t in texts for e in [*placeholders(t), t])


def with_experiment(lesson: Lesson, page: Page, run: RunValues) -> RunValues:
    """The run's values with the page's experiment measured (its controls, the page's input), when a text of the
    page reads it: kept in the run's cache, so pages that show the same setting measure it once."""
    if not page.experiment or not reads_result(page) or run.bundle is None:
        return run
    from ..errors import UserError
    from ..experiments import run_experiment

    _, source, target, _ = lesson.inputs(page)
    key = ("experiment", page.experiment, source, target, tuple(sorted(page.controls.items())))
    if key not in run.cache:
        try:
            run.cache[key] = run_experiment(page.experiment, run.bundle, source, target or None, **page.controls)
        except UserError as exc:
            raise ValueError(f"its experiment: {exc}") from None
    return replace(run, experiment=run.cache[key])


def check_targets(page: Page, run: RunValues) -> None:
    """The page's step, head, cells, query and key exist in this run (ValueError otherwise)."""
    if not page.step:
        return
    step = run.trace.find(page.step)
    if step is None:
        raise ValueError(f"unknown step {page.step!r}; this model's steps are named like "
                         f"{run.trace[min(9, len(run.trace) - 1)].name!r} (see `scratchformer trace`)")
    shape = tuple(step.shape)
    if "head" in step.dims and page.head >= shape[step.dims.index("head")]:
        raise ValueError(f"head {page.head} is out of range: {page.step} has {shape[step.dims.index('head')]} "
                         "heads, counted from 0")  # fmt: skip
    for cell in page.cells:
        if len(cell) != len(shape) or not all(-n <= i < n for i, n in zip(cell, shape)):
            raise ValueError(f"cell {list(cell)} is not in {page.step}, whose shape is "
                             f"{' × '.join(map(str, shape))} ({' × '.join(step.dims)})")  # fmt: skip
    if page.query is not None or page.key is not None:
        if not step.attention_type or "head" not in step.dims:
            raise ValueError(f"'query' and 'key' pick a row and column of an attention: {page.step} is not one "
                             "(use e.g. decoder.1.cross_attn.weights)")
        rows, cols = shape[-2], shape[-1]
        if page.query is not None and page.query >= rows:
            raise ValueError(f"query {page.query} is out of range: {page.step} has {rows} rows")
        if page.key is not None and page.key >= cols:
            raise ValueError(f"key {page.key} is out of range: {page.step} has {cols} columns")


def prepare_question(q: Question, page: Page, run: RunValues) -> PreparedQuestion:
    prompt = fill(q.prompt, run)
    answer: Value | None = None if q.answer.startswith("choice:") else evaluate(q.answer, run)
    choices: tuple[str, ...] = ()
    correct = number = cell = None
    step = None
    if q.kind == "choice":
        if isinstance(q.choices, str):  # one choice per token of the run
            side = "src" if q.choices == TOKEN_CHOICES[0] else "tgt"
            tokens = (run.trace.source_tokens if side == "src" else run.trace.target_tokens) or [[]]
            choices = tuple(tokens[0])
            axis = "src_pos" if side == "src" else "tgt_pos"
            if answer is None or answer.position is None or answer.axis not in (axis, ""):
                raise ValueError(f"choices = {q.choices!r} needs an answer that picks a {axis} position "
                                 f"(argmax/argmin over a {axis} axis, or {side}:N)")  # fmt: skip
            correct = answer.position
        else:
            choices = tuple(fill(c, run) for c in q.choices)
            if answer is None:
                correct = int(q.answer.partition(":")[2]) - 1
            else:
                correct = _matching_choice(choices, answer, q.tolerance)
        answer_text = choices[correct]
    elif q.kind == "number":
        if answer.number is None:
            raise ValueError(f"the answer {q.answer!r} is a text, but a number question needs a number")
        number = answer.number
        answer_text = answer.shown(parse_expression(q.answer).decimals)
    else:  # click
        if answer.cell is None or answer.step is None:
            raise ValueError(f"a click question's answer names a cell: argmax:, argmin: or value:STEP[…], "
                             f"not {q.answer!r}")  # fmt: skip
        if answer.step != page.step:
            raise ValueError(f"the answer's cell is in {answer.step}, but the page shows {page.step}")
        cell, step = answer.cell, answer.step
        answer_text = answer.text or ", ".join(map(str, cell))
    feedback = fill(q.feedback, run, {"answer": answer_text}) if q.feedback else ""
    return PreparedQuestion(q.kind, prompt, choices, correct, number, q.tolerance, cell, step, answer_text, feedback)


def _matching_choice(choices: tuple[str, ...], answer: Value, tolerance: float) -> int:
    """The choice that says the answer: the same text, else the nearest number within the tolerance."""
    if answer.text:
        for i, c in enumerate(choices):
            if c.strip() == answer.text.strip():
                return i
    if answer.number is not None:
        near = []
        for i, c in enumerate(choices):
            try:
                near.append((abs(float(c.strip().replace("−", "-")) - answer.number), i))
            except ValueError:
                continue
        if near and min(near)[0] <= tolerance:
            return min(near)[1]
    raise ValueError(f"the answer on this run is {answer.shown()!r}, which is none of the choices "
                     f"({', '.join(choices)})")  # fmt: skip
