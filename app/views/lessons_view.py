"""The Learn group's Lessons view: the bundled lessons in curriculum order with each one's progress; Start or
Continue opens a lesson in the lesson dock (app/lessons/lesson_panel.py) at the page the learner left, Restart from
page 1. Lesson files from elsewhere open with the button here or File › Open lesson…."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout

from scratchformer.lessons import Lesson, LessonError, bundled_lessons

from .base import View

INTRO = ("A first class on Transformers, in order: each lesson moves the window to what it explains, with this "
         "run's numbers, and asks you to predict before you look. Answers and the page you reached are kept.")


class LessonsView(View):
    title = "Lessons"
    tooltip = "Guided lessons: why attention, self-attention, ÷√d_k, heads, positions, masks … one token at a time"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.list = QListWidget()
        self.list.itemActivated.connect(lambda _item: self.start())
        self.list.currentRowChanged.connect(lambda _row: self._describe())
        layout.addWidget(self.list, 1)
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.details)
        row = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(lambda: self.start())
        self.restart_button = QPushButton("Restart")
        self.restart_button.clicked.connect(self.restart)
        self.file_button = QPushButton("Open lesson file…")
        self.file_button.clicked.connect(self._open_file)
        for b in (self.start_button, self.restart_button):
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(self.file_button)
        layout.addLayout(row)
        self.lessons: list[Lesson] = []
        self.error = ""
        self.reload()

    def reload(self) -> None:
        """Read the bundled lessons (a broken one is named in one sentence; `lesson check` catches it first)."""
        try:
            self.lessons = bundled_lessons()
            self.error = ""
        except LessonError as exc:
            self.lessons, self.error = [], str(exc)
        self.fill()

    def fill(self) -> None:
        from ..lessons.lesson_progress import LessonProgress

        progress = LessonProgress(self.main.settings, self.main.persist)
        row = max(0, self.list.currentRow())
        self.list.clear()
        for n, lesson in enumerate(self.lessons, start=1):
            seen, answers = progress.seen(lesson.id), progress.answers(lesson.id)
            state = "" if not seen else (f"  — page {progress.page(lesson.id)} of {len(lesson.pages)}, "
                                         f"{sum(answers.values())} right")  # fmt: skip
            item = QListWidgetItem(f"{n}. {lesson.title}  ({len(lesson.pages)} pages){state}")
            item.setToolTip(lesson.summary or ", ".join(lesson.concepts))
            self.list.addItem(item)
        if self.lessons:
            self.list.setCurrentRow(min(row, len(self.lessons) - 1))
        self._describe()

    def _describe(self) -> None:
        lesson = self.selected()
        if lesson is None:
            self.details.setText(html.escape(self.error))
            self.start_button.setEnabled(False)
            return
        from ..lessons.lesson_progress import LessonProgress

        self.start_button.setEnabled(True)
        seen = LessonProgress(self.main.settings, self.main.persist).seen(lesson.id)
        self.start_button.setText("Continue" if seen else "Start")
        self.details.setText(f"<b>{html.escape(lesson.title)}</b> — {html.escape(lesson.summary)}<br>"
                             f"<span style='color:#555'>Concepts: {html.escape(', '.join(lesson.concepts))}</span>")

    def selected(self) -> Lesson | None:
        row = self.list.currentRow()
        return self.lessons[row] if 0 <= row < len(self.lessons) else None

    def start(self, lesson_id: str | None = None, page: int | None = None) -> bool:
        """Open the selected lesson (or the one with this id) where the learner left it, or at `page`."""
        from ..lessons.lesson_panel import lesson_panel

        lesson = next((x for x in self.lessons if x.id == lesson_id), None) if lesson_id else self.selected()
        if lesson is None:
            return False
        panel = lesson_panel(self.main)
        panel.open_lesson(lesson, page)
        return True

    def restart(self) -> None:
        from ..lessons.lesson_progress import LessonProgress

        lesson = self.selected()
        if lesson is not None:
            LessonProgress(self.main.settings, self.main.persist).restart(lesson.id)
            self.start(lesson.id, 1)

    def _open_file(self) -> None:
        from ..lessons.lesson_panel import open_lesson_dialog

        open_lesson_dialog(self.main)

    def refresh(self) -> None:
        self.fill()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        self.fill()  # progress made in the lesson dock since it was last shown
