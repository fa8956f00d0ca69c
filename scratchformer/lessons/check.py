"""`lesson check`: everything a lesson's pages name must exist on its model's run — each step, head, cell, query
and key, each placeholder, each answer (and it must be among the choices), each experiment must apply — so a
learner never meets a page that cannot show. One run per distinct input, shared between lessons."""

from __future__ import annotations

from .prepare import prepare_page
from .schema import Lesson, LessonError
from .values import RunValues

_BUNDLES: dict = {}  # model → loaded bundle, shared by every check in this process (a model loads once)


class Runs:
    """Runs of the lessons' inputs, each made once: (model, source, target, start_only) → RunValues."""

    def __init__(self) -> None:
        self.bundles: dict = _BUNDLES
        self.runs: dict = {}

    def bundle(self, model: str):
        if model not in self.bundles:
            from ..loading.bundle import load_model

            self.bundles[model] = load_model(model)
        return self.bundles[model]

    def values(self, inputs: tuple[str, str, str, bool]) -> RunValues:
        if inputs not in self.runs:
            model, source, target, start_only = inputs
            bundle = self.bundle(model)
            prepared = bundle.prepare_run(source, target, start_only, truncate=True)
            _, trace = bundle.run(prepared, keep_output=False)
            self.runs[inputs] = RunValues.of(bundle, trace, prepared.translation)
        return self.runs[inputs]


def check_lesson(lesson: Lesson, runs: Runs | None = None) -> None:
    """Raise LessonError (file, page, problem) for the first page that cannot be shown on its run."""
    runs = runs or Runs()
    for n, page in enumerate(lesson.pages, start=1):
        try:
            values = runs.values(lesson.inputs(page))
        except LessonError:
            raise
        except Exception as exc:  # noqa: BLE001 - a model that does not load or run is one sentence
            raise LessonError(lesson.file or lesson.id, n, f"its run fails: {exc}", page.title) from None
        prepare_page(lesson, n, values)
        if page.experiment:
            from ..experiments import experiment_named

            why_not = experiment_named(page.experiment).applies(runs.bundle(lesson.model))
            if why_not:
                raise LessonError(lesson.file or lesson.id, n, why_not, page.title)
