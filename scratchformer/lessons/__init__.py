"""Lessons: guided tours of the window as data files (resources/lessons/*.toml, documented in docs/lessons.md).

    lesson = load_lesson("resources/lessons/03-scaling.toml")       # Lesson, or LessonError(file, page, problem)
    pages = prepare_pages(lesson, run_values)                         # the text and question with this run's numbers
    check_response(pages[2].question, 1)                              # Verdict(correct, message)

A lesson names its model and input; each page says where the window goes (a step, a view, a head, cells to
outline, an experiment), what to read (text with placeholders such as {sqrt_d_k} or
{value:decoder.1.cross_attn.weights[0,0,2,2]}, filled from the run, never evaluated as code), and optionally asks a
question whose answer is computed from the run. Nothing here imports Qt: the window (app/lessons/lesson_panel.py) and
the command line (`scratchformer lesson list|check`) both read it.
"""

from .answers import Verdict, check_response
from .loading import bundled_lessons, find_lesson, lessons_dir, load_lesson
from .prepare import PreparedPage, PreparedQuestion, prepare_pages
from .schema import EXPERIMENT_NAMES, VIEW_TITLES, Lesson, LessonError, Page, Question
from .values import RunValues

__all__ = [
    "EXPERIMENT_NAMES", "VIEW_TITLES", "Lesson", "LessonError", "Page", "PreparedPage", "PreparedQuestion",
    "Question", "RunValues", "Verdict", "bundled_lessons", "check_response", "find_lesson", "lessons_dir",
    "load_lesson", "prepare_pages",
]
