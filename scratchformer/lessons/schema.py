"""What a lesson file holds, read from its TOML table and checked field by field (docs/lessons.md).

Every mistake is a LessonError naming the file, the page (1-based, with its title) and the problem in one
sentence; checks that need the model's run (step names, placeholders, answers) live in check.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UserError
from .values import parse_expression, placeholders

# The window's views a page may open, by their tab titles (app/views/view_groups.py; a test keeps the two in step).
VIEW_TITLES = (
    "Step", "Heads", "How this number was made", "Positional encoding", "Rotary positions", "Masks", "LayerNorm",
    "Overview",
    "Q·K neuron view", "Weighted sum", "Output", "Decoding", "Compare", "Head importance", "Experiments",
    "Training",
)
# The live experiments a page may open (scratchformer.experiments; the window's Experiments view).
EXPERIMENT_NAMES = ("scaling", "mask", "order", "norm", "teacher_forcing", "temperature", "superposition",
                    "polysemantic")
QUESTION_KINDS = ("choice", "number", "click")
TOKEN_CHOICES = ("src_tokens", "tgt_tokens")  # choices = "src_tokens": one choice per source token
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")

LESSON_KEYS = {"id", "title", "concepts", "model", "source", "target", "start_only", "summary", "pages"}
PAGE_KEYS = {"title", "text", "source", "target", "start_only", "step", "view", "head", "cells", "query", "key",
             "question", "experiment", "controls", "reveal"}
# When a page moves the window to what it shows: at once, or only once the learner has answered its question
# (or asked to see it), for questions whose answer the view would give away.
REVEALS = ("at-once", "after-answer")
QUESTION_KEYS = {"kind", "prompt", "choices", "answer", "tolerance", "feedback"}


class LessonError(UserError):
    """A mistake in a lesson file: `file`, `page` (1-based; 0 for the lesson as a whole) and `problem`."""

    def __init__(self, file: str, page: int, problem: str, page_title: str = "") -> None:
        self.file, self.page, self.problem, self.page_title = file, page, problem, page_title
        where = f"page {page}" + (f" ({page_title})" if page_title else "") if page else "lesson"
        super().__init__(f"{file}: {where}: {problem}")


@dataclass(frozen=True)
class Question:
    kind: str  # choice | number | click
    prompt: str
    answer: str  # an expression (values.py) or "choice:N"
    choices: tuple[str, ...] | str = ()  # texts with placeholders, or "src_tokens" / "tgt_tokens"
    tolerance: float = 0.01  # number questions: |response − answer| ≤ tolerance
    feedback: str = ""  # shown after an answer, right or wrong; {answer} is the right answer


@dataclass(frozen=True)
class Page:
    title: str
    text: str
    source: str | None = None  # None: the lesson's
    target: str | None = None
    start_only: bool | None = None
    step: str | None = None  # a trace step name
    view: str | None = None  # a view's tab title; "Step" when only a step is given
    head: int = 0  # 0-based, as every index of a lesson (the window shows it as head 1)
    cells: tuple[tuple[int, ...], ...] = ()  # full indices of `step`'s tensor to outline
    query: int | None = None  # the Q·K neuron view's and the weighted sum's query row
    key: int | None = None  # the Q·K neuron view's key
    question: Question | None = None
    experiment: str | None = None
    controls: dict = field(default_factory=dict)  # the experiment's controls: d_k, temperature, masked, …
    reveal: str = "at-once"  # or "after-answer": the window shows the page once its question is answered

    def shown_view(self) -> str | None:
        if self.experiment:
            return "Experiments"
        return self.view or ("Step" if self.step else None)


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    concepts: tuple[str, ...]
    pages: tuple[Page, ...]
    model: str = "en-hi"
    source: str = ""  # "" : the model's first example
    target: str = ""  # "" : the model's own output
    start_only: bool = False
    summary: str = ""
    file: str = ""

    def inputs(self, page: Page) -> tuple[str, str, str, bool]:
        """(model, source, target, start_only) of the run a page reads."""
        source = self.source if page.source is None else page.source
        if not source.strip():
            from ..loading.bundle import examples_of

            examples = examples_of(self.model)
            source = examples[0].source if examples else "the girl eats an apple"
        target = self.target if page.target is None else page.target
        start_only = self.start_only if page.start_only is None else page.start_only
        return self.model, " ".join(source.split()), " ".join(target.split()), bool(start_only)

    def listing(self) -> dict:
        """`scratchformer lesson list --json` entry."""
        return {"id": self.id, "title": self.title, "pages": len(self.pages), "concepts": list(self.concepts)}


# --- reading the table -----------------------------------------------------------------------------------------


class _Reader:
    """Reads typed fields of one table, raising LessonError with this file and page."""

    def __init__(self, file: str, page: int = 0, title: str = "") -> None:
        self.file, self.page, self.title = file, page, title

    def fail(self, problem: str) -> LessonError:
        return LessonError(self.file, self.page, problem, self.title)

    def keys(self, table: dict, allowed: set[str], what: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.fail(f"unknown field {unknown[0]!r} in the {what} (the fields are {', '.join(sorted(allowed))})")

    def text(self, table: dict, key: str, required: bool = False, default: str | None = None) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                raise self.fail(f"the field {key!r} is missing")
            return default
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be text in quotes, not {value!r}")
        if required and not value.strip():
            raise self.fail(f"{key!r} is empty")
        return value

    def integer(self, table: dict, key: str, default: int | None = None) -> int | None:
        value = table.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(f"{key!r} must be a whole number from 0 (indices count from 0), not {value!r}")
        return value

    def boolean(self, table: dict, key: str) -> bool | None:
        value = table.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(f"{key!r} must be true or false, not {value!r}")
        return value

    def expressions_in(self, text: str, what: str) -> None:
        try:
            for expr in placeholders(text):
                parse_expression(expr)
        except ValueError as exc:
            raise self.fail(f"{what}: {exc}") from None


def read_lesson(table: dict, file: str) -> Lesson:
    """A Lesson from a parsed TOML document, every field checked that can be checked without the model."""
    r = _Reader(file)
    r.keys(table, LESSON_KEYS, "lesson")
    lesson_id = r.text(table, "id", required=True)
    if not ID_PATTERN.match(lesson_id):
        raise r.fail(f"the id {lesson_id!r} may hold only lower-case letters, digits and hyphens")
    title = r.text(table, "title", required=True)
    concepts = table.get("concepts", [])
    if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
        raise r.fail("'concepts' must be a list of texts, e.g. concepts = [\"attention\", \"softmax\"]")
    model = r.text(table, "model", default="en-hi")
    _check_model(r, model, file)
    pages = table.get("pages")
    if not isinstance(pages, list) or not pages:
        raise r.fail("a lesson needs at least one page: a [[pages]] table with a title and a text")
    read = tuple(read_page(p, file, n) for n, p in enumerate(pages, start=1))
    return Lesson(id=lesson_id, title=title, concepts=tuple(concepts), pages=read, model=model,
                  source=r.text(table, "source", default="") or "", target=r.text(table, "target", default="") or "",
                  start_only=bool(r.boolean(table, "start_only")), summary=r.text(table, "summary", default="") or "",
                  file=file)  # fmt: skip


def _check_model(r: _Reader, model: str, file: str) -> None:
    from pathlib import Path

    from ..loading.bundle import model_names

    names = model_names()
    if model in names:
        return
    folder = Path(model).expanduser()
    if not folder.is_absolute():
        folder = Path(file).parent / folder
    if not (folder / "config.json").is_file():
        raise r.fail(f"unknown model {model!r}; a lesson uses a bundled model or preset ({', '.join(names)}) "
                     "or a model folder")


def read_page(table, file: str, n: int) -> Page:
    if not isinstance(table, dict):
        raise LessonError(file, n, "each page must be a [[pages]] table")
    title = table.get("title") if isinstance(table.get("title"), str) else ""
    r = _Reader(file, n, title)
    r.keys(table, PAGE_KEYS, "page")
    r.text(table, "title", required=True)
    text = r.text(table, "text", required=True)
    r.expressions_in(text, "in its text")
    view = r.text(table, "view")
    if view is not None and view not in VIEW_TITLES:
        raise r.fail(f"unknown view {view!r}; the views are {', '.join(VIEW_TITLES)}")
    step = r.text(table, "step")
    cells = table.get("cells", [])
    if not isinstance(cells, list) or not all(
            isinstance(c, list) and c and all(isinstance(i, int) and not isinstance(i, bool) for i in c)
            for c in cells):
        raise r.fail("'cells' must be a list of full indices, e.g. cells = [[0, 0, 2, 3]]")
    if cells and not step:
        raise r.fail("'cells' outline cells of a step: give the page a 'step'")
    query, key = r.integer(table, "query"), r.integer(table, "key")
    if view in ("Q·K neuron view", "Weighted sum") and (not step or query is None):
        raise r.fail(f"the {view} shows one query of an attention: give 'step' (an attention step) and 'query'")
    if view == "Q·K neuron view" and key is None:
        raise r.fail("the Q·K neuron view compares one query with one key: give 'key' too")
    experiment = r.text(table, "experiment")
    controls = table.get("controls", {})
    if experiment is not None and experiment not in EXPERIMENT_NAMES:
        raise r.fail(f"unknown experiment {experiment!r}; the experiments are {', '.join(EXPERIMENT_NAMES)}")
    if not isinstance(controls, dict):
        raise r.fail("'controls' must be a table, e.g. controls = { d_k = 64 }")
    if controls and not experiment:
        raise r.fail("'controls' set an experiment's controls: give the page an 'experiment'")
    if experiment:
        _check_controls(r, experiment, controls)
    question = read_question(r, table.get("question"), step) if "question" in table else None
    reveal = r.text(table, "reveal") or "at-once"
    if reveal not in REVEALS:
        raise r.fail(f"'reveal' is {' or '.join(repr(x) for x in REVEALS)}, not {reveal!r}")
    if reveal == "after-answer" and (question is None or question.kind == "click"):
        raise r.fail("reveal = 'after-answer' holds the view back until the question is answered: it needs a choice "
                     "or number question (a click question is answered on the view itself)")
    return Page(title=title, text=text, source=r.text(table, "source"), target=r.text(table, "target"),
                start_only=r.boolean(table, "start_only"), step=step, view=view, head=r.integer(table, "head", 0),
                cells=tuple(tuple(c) for c in cells), query=query, key=key, question=question,
                experiment=experiment, controls=dict(controls), reveal=reveal)  # fmt: skip


def _check_controls(r: _Reader, experiment: str, controls: dict) -> None:
    try:
        from ..experiments import experiment_named

        allowed = experiment_named(experiment).controls
    except (ImportError, UserError):  # the experiments are not in this build: the window says so on the page
        return
    unknown = sorted(set(controls) - set(allowed))
    if unknown:
        raise r.fail(f"the {experiment} experiment has no control {unknown[0]!r}")


def read_question(r: _Reader, table, step: str | None) -> Question:
    if not isinstance(table, dict):
        raise r.fail("'question' must be a table: [pages.question] with kind, prompt and answer")
    r.keys(table, QUESTION_KEYS, "question")
    kind = r.text(table, "kind", required=True)
    if kind not in QUESTION_KINDS:
        raise r.fail(f"unknown question kind {kind!r}; the kinds are {', '.join(QUESTION_KINDS)}")
    prompt = r.text(table, "prompt", required=True)
    r.expressions_in(prompt, "in its question")
    if "answer" not in table:
        raise r.fail("the question has no answer: add answer = \"…\" (e.g. \"value:sqrt_d_k\")")
    answer = table["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise r.fail(f"the answer must be an expression in quotes or a number, not {answer!r}")
    answer = str(answer).strip()
    if not answer:
        raise r.fail("the answer is empty")
    if not answer.startswith("choice:"):
        try:
            parse_expression(answer)
        except ValueError as exc:
            raise r.fail(f"its answer: {exc}") from None
    choices = table.get("choices", ())
    if kind == "choice":
        if isinstance(choices, str):
            if choices not in TOKEN_CHOICES:
                raise r.fail(f"choices = {choices!r}: write a list, or one of {', '.join(TOKEN_CHOICES)}")
        elif not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise r.fail("a choice question needs 'choices': a list of at least two texts, or \"src_tokens\"")
        else:
            choices = tuple(choices)
            for c in choices:
                r.expressions_in(c, "in its choices")
        if answer.startswith("choice:"):
            n = answer.partition(":")[2]
            if not n.isdigit() or not 1 <= int(n) <= (len(choices) if isinstance(choices, tuple) else 10**6):
                raise r.fail(f"answer {answer!r} names no choice; choice:1 is the first")
    elif choices:
        raise r.fail(f"only a choice question has 'choices', not a {kind} question")
    elif answer.startswith("choice:"):
        raise r.fail(f"answer {answer!r} fits a choice question only")
    if kind == "click" and not step:
        raise r.fail("a click question asks for a cell of the page's map: give the page a 'step'")
    tolerance = table.get("tolerance", 0.01)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise r.fail(f"'tolerance' must be a number ≥ 0, not {tolerance!r}")
    feedback = r.text(table, "feedback", default="") or ""
    r.expressions_in(feedback.replace("{answer}", ""), "in its feedback")
    return Question(kind=kind, prompt=prompt, answer=answer, choices=choices if kind == "choice" else (),
                    tolerance=float(tolerance), feedback=feedback)  # fmt: skip
