"""The lesson beside the window: a dock that shows one page of a lesson (scratchformer/lessons) and drives the
window to what the page talks about.

A page turn: if the window's run is not the page's (model, sentence, target), the panel puts the page's input in
the fields and presses Run (window.run(); the result arrives on the worker's `finished` signal, after the window
has shown it). Once a run is there, every page of the lesson that reads it is prepared at once off the UI thread
(placeholders filled, answers computed), so turning between them only shows text and moves the window: the
step, the view, the head, the outlined cells, the pair of the Q·K neuron view, the experiment. The learner may
leave to explore and press "Show" to come back; progress and answers are kept between launches (lesson_progress).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from scratchformer.errors import UserError
from scratchformer.lessons import Lesson, LessonError, RunValues, bundled_lessons, check_response, load_lesson
from scratchformer.lessons.prepare import PreparedPage, prepare_pages

from ..widgets.cell_links import derive_cell, show_cells, view_of
from ..work.jobs import JobRunner
from .lesson_progress import LessonProgress

RIGHT, WRONG = "#1b7a2f", "#b00020"


def page_html(text: str) -> str:
    """A page's text as HTML: blank lines make paragraphs, **…** is bold; everything else is escaped."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    out = []
    for p in paragraphs:
        p = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(p, quote=False))
        out.append(f"<p>{p}</p>")
    return "".join(out)


class LessonPanel(QDockWidget):
    def __init__(self, window) -> None:
        super().__init__("Lesson", window)
        self.setObjectName("lesson_panel")
        self.main = window
        self.progress = LessonProgress(window.settings, window.persist)
        self.lesson: Lesson | None = None
        self.number = 1  # the page shown, 1-based
        self._prepared: dict[int, PreparedPage] = {}
        self._prepared_run = None  # the RunResult the prepared pages read
        self._waiting_run = False  # a run of this page's input was asked for
        self._revealed: tuple | None = None  # (lesson id, page) the learner asked to see before answering
        self._jobs = JobRunner("scratchformer-lesson")  # one at a time: the page asked for last is shown after
        self._verdict_shown = None
        self._build()
        window.worker.worker.finished.connect(self._run_arrived)  # after the window's own slot: it shows it first
        window.worker.worker.failed.connect(self._run_failed)
        step_view = view_of(window, "StepView")
        if step_view is not None:
            step_view.heatmap.clicked.connect(self._map_clicked)

    # --- construction ------------------------------------------------------------------------------------------

    def _build(self) -> None:
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(8, 6, 8, 6)
        self.heading = QLabel()
        self.heading.setWordWrap(True)
        self.heading.setTextFormat(Qt.TextFormat.RichText)
        self.where = QLabel()
        self.where.setStyleSheet("color: #555;")
        self.where.setWordWrap(True)
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #8a5a00;")
        self.note.hide()
        self.question_box = QWidget()
        self.question_layout = QVBoxLayout(self.question_box)
        self.question_layout.setContentsMargins(0, 4, 0, 0)
        self.prompt = QLabel()
        self.prompt.setWordWrap(True)
        self.prompt.setStyleSheet("font-weight: bold;")
        self.question_layout.addWidget(self.prompt)
        self.inputs = QWidget()
        self.inputs_layout = QVBoxLayout(self.inputs)
        self.inputs_layout.setContentsMargins(0, 0, 0, 0)
        self.question_layout.addWidget(self.inputs)
        self.check_button = QPushButton("Check")
        self.check_button.clicked.connect(self._check_typed)
        self.question_layout.addWidget(self.check_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.feedback = QLabel()
        self.feedback.setWordWrap(True)
        self.question_layout.addWidget(self.feedback)
        self.choice_group = QButtonGroup(self)
        self.number_edit: QLineEdit | None = None
        nav = QHBoxLayout()
        self.back_button = QPushButton("‹ Back")
        self.back_button.clicked.connect(lambda: self.show_page(self.number - 1))
        self.show_button = QPushButton("Show")
        self.show_button.setToolTip("Take the window back to what this page shows (after exploring)")
        self.show_button.clicked.connect(self._show_again)
        self.next_button = QPushButton("Next ›")
        self.next_button.clicked.connect(self.next_page)
        for b in (self.back_button, self.show_button, self.next_button):
            nav.addWidget(b)
        self.status = QLabel()
        self.status.setStyleSheet("color: #555;")
        self.restart_button = QPushButton("Restart lesson")
        self.restart_button.clicked.connect(self.restart)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.restart_button)
        for w in (self.heading, self.where):
            layout.addWidget(w)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.note)
        layout.addWidget(self.question_box)
        layout.addLayout(nav)
        layout.addLayout(bottom)
        self.setWidget(body)
        self.setMinimumWidth(320)

    # --- opening -------------------------------------------------------------------------------------------------

    def open_lesson(self, lesson: Lesson, page: int | None = None) -> None:
        """Show a lesson at `page` (1-based), or where the learner left it."""
        self.lesson = lesson
        self._prepared, self._prepared_run = {}, None
        self.progress.set_last(lesson.file if lesson.file and not _bundled(lesson) else lesson.id)
        self.show()
        self.raise_()
        self.show_page(page if page is not None else self.progress.page(lesson.id))

    def restart(self) -> None:
        if self.lesson is not None:
            self.progress.restart(self.lesson.id)
            self.show_page(1)

    def next_page(self) -> None:
        if self.lesson is None:
            return
        if self.number < len(self.lesson.pages):
            self.show_page(self.number + 1)
            return
        following = next_lesson(self.lesson)
        if following is not None:
            self.open_lesson(following, 1)

    # --- a page --------------------------------------------------------------------------------------------------

    def show_page(self, number: int) -> None:
        """Turn to page `number`: at once when its run is the window's and prepared, else after running it."""
        lesson = self.lesson
        if lesson is None:
            return
        self.number = min(max(1, number), len(lesson.pages))
        self.progress.set_page(lesson.id, self.number)
        page = lesson.pages[self.number - 1]
        self._show_frame()
        result = self.main.current_result()
        if not self._is_run_of(result, lesson.inputs(page)):
            self._start_run(lesson.inputs(page))
            return
        prepared = self._prepared.get(self.number) if self._prepared_run is result else None
        if prepared is None:
            self._prepare(result)
            return
        self._display(prepared)
        if self._held_back(prepared):
            self._say("Answer first: the window shows this page once you have answered (or press Show).")
            self.show_button.setToolTip("Show what this page is about now, before answering")
            return
        self.show_button.setToolTip("Take the window back to what this page shows (after exploring)")
        self._drive(prepared)

    def _held_back(self, prepared: PreparedPage) -> bool:
        """Whether the page waits for an answer before it moves the window (reveal = "after-answer", not yet
        answered): its view would give the answer away."""
        return (prepared.page.reveal == "after-answer" and self._revealed != (self.lesson.id, prepared.number)
                and self.progress.answer(self.lesson.id, prepared.number) is None)

    def _show_again(self) -> None:
        """Show: the page's view now (before answering, too), or back to it after exploring."""
        if self.lesson is not None:
            self._revealed = (self.lesson.id, self.number)
            self.show_page(self.number)

    def _show_frame(self) -> None:
        """What needs no run: the heading, the buttons, the progress."""
        lesson, n = self.lesson, self.number
        page = lesson.pages[n - 1]
        self.heading.setText(f"<b>{html.escape(lesson.title)}</b><br>{n}. {html.escape(page.title)}")
        self.back_button.setEnabled(n > 1)
        last = n == len(lesson.pages)
        following = next_lesson(lesson) if last else None
        self.next_button.setText("Next lesson ›" if following is not None else "Next ›")
        self.next_button.setEnabled(not last or following is not None)
        asked = [i for i, p in enumerate(lesson.pages, start=1) if p.question is not None]
        answers = self.progress.answers(lesson.id)
        right = sum(1 for i in asked if answers.get(i))
        self.status.setText(f"Page {n} of {len(lesson.pages)} · {len([i for i in asked if i in answers])} of "
                            f"{len(asked)} questions answered, {right} right")  # fmt: skip

    def _is_run_of(self, result, inputs: tuple[str, str, str, bool]) -> bool:
        if result is None:
            return False
        r = result.request
        model, source, target, start_only = inputs
        return (r.model == model and " ".join(r.source.split()) == source and " ".join(r.target.split()) == target
                and bool(r.start_only) == start_only and r.windows is None and not r.interventions
                and not r.padded)  # fmt: skip

    def _start_run(self, inputs: tuple[str, str, str, bool]) -> None:
        model, source, target, start_only = inputs
        w = self.main
        self._waiting_run = True
        self._say(f"Running {model} on “{source}” for this page…", busy=True)
        w.set_model(model)
        w.input_bar.start_only.setChecked(start_only)
        w.use_text(source, target)  # fills the fields (undoable) and runs

    def _run_arrived(self, generation: int, result) -> None:
        if not self._waiting_run or not self.main.worker.is_current(generation):
            return
        self._waiting_run = False
        if self.lesson is not None and self.main.current_result() is result:
            self.show_page(self.number)

    def _run_failed(self, generation: int, message: str) -> None:
        if self._waiting_run and self.main.worker.is_current(generation):
            self._waiting_run = False
            self._say(f"This page's run failed: {message}")

    def _prepare(self, result) -> None:
        """Fill every page of the lesson that reads this run, off the UI thread."""
        if self._jobs.busy():
            return  # when it ends, the page asked for last is shown
        lesson = self.lesson
        inputs = lesson.inputs(lesson.pages[self.number - 1])
        numbers = [i for i, p in enumerate(lesson.pages, start=1) if lesson.inputs(p) == inputs]
        values = RunValues.of(result.bundle, result.trace, result.inputs.translation)
        self._say("Reading this run's numbers…", busy=True)
        # a LessonError is a UserError: its own sentence reaches _prepared_ready
        self._jobs.start(lambda job: prepare_pages(lesson, values, numbers),
                         on_result=lambda pages: self._prepared_ready(lesson, result, pages, ""),
                         on_error=lambda error: self._prepared_ready(lesson, result, {}, error),
                         doing="Recomputing the lesson's numbers")

    def _prepared_ready(self, lesson, result, pages: dict, error: str) -> None:
        if lesson is not self.lesson:
            if self.lesson is not None:
                self.show_page(self.number)
            return
        if error:
            self._say(error)
            return
        self._prepared, self._prepared_run = pages, result
        if self.main.current_result() is result:
            self.show_page(self.number)

    def _say(self, text: str, busy: bool = False) -> None:
        """A line above the question (busy: the page is on its way; else a note about it)."""
        self.note.setText(text)
        self.note.setVisible(bool(text))
        if busy:
            self.text.setHtml("")
            self.question_box.hide()

    def is_busy(self) -> bool:
        return self._waiting_run or self._jobs.busy()

    def shutdown(self) -> None:
        """Wait for the numbers being read (the window calls it as it closes)."""
        self._jobs.shutdown()

    # --- showing -------------------------------------------------------------------------------------------------

    def _display(self, prepared: PreparedPage) -> None:
        self.note.hide()
        self.text.setHtml(page_html(prepared.text))
        self._show_question(prepared)

    def _show_question(self, prepared: PreparedPage) -> None:
        q = prepared.question
        while self.inputs_layout.count():
            item = self.inputs_layout.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        for b in self.choice_group.buttons():
            self.choice_group.removeButton(b)
        self.number_edit = None
        self.feedback.setText("")
        self.question_box.setVisible(q is not None)
        if q is None:
            return
        self.prompt.setText(q.prompt)
        if q.kind == "choice":
            for i, text in enumerate(q.choices):
                button = QRadioButton(text)
                self.choice_group.addButton(button, i)
                self.inputs_layout.addWidget(button)
            self.check_button.show()
        elif q.kind == "number":
            self.number_edit = QLineEdit()
            self.number_edit.setPlaceholderText("a number, e.g. 5.66")
            self.number_edit.returnPressed.connect(self._check_typed)
            self.inputs_layout.addWidget(self.number_edit)
            self.check_button.show()
        else:
            hint = QLabel("Click a cell of the map in the Step view.")
            hint.setStyleSheet("color: #555;")
            self.inputs_layout.addWidget(hint)
            self.check_button.hide()
        stored = self.progress.answer(self.lesson.id, prepared.number)
        if stored is not None:
            response, _ = stored
            if q.kind == "choice" and isinstance(response, int) and 0 <= response < len(q.choices):
                self.choice_group.button(response).setChecked(True)
            elif q.kind == "number" and self.number_edit is not None:
                self.number_edit.setText(str(response))
            self._show_verdict(q, response, record=False)

    def _drive(self, prepared: PreparedPage) -> None:
        """Move the window to what the page shows."""
        page, w = prepared.page, self.main
        trace = w.current_trace()
        step_view = view_of(w, "StepView")
        title = page.shown_view()
        if step_view is not None and not (page.cells and title == "Step"):
            step_view.highlight("", [])  # the previous page's outlines go
        if page.step and title == "Step" and page.cells:
            show_cells(w, page.step, [tuple(c) for c in page.cells])
            return
        view = next((v for v in w.views if v.title == title), None) if title else None
        if title and view is None:
            self._say(f"The {title} view is not in this build; the page's text still applies.")
        if view is not None and not page.experiment:
            w.tabs.setCurrentWidget(view)
        if page.step:
            w.go_to_step(page.step, head=page.head)
        step = trace.find(page.step) if page.step else None
        if view is not None and step is not None:
            if title in ("Q·K neuron view", "Rotary positions") and hasattr(view, "show_pair"):
                if page.query is not None:  # the rotary view picks the step's attention by itself otherwise
                    view.show_pair(step.sublayer, page.head or 0, page.query, page.key)
            elif title == "Weighted sum" and hasattr(view, "show_query"):
                view.show_query(step.sublayer, page.head, page.query)
            elif title == "How this number was made" and page.cells:
                derive_cell(w, page.step, tuple(page.cells[0]))
        if page.experiment:
            if view is None or not hasattr(view, "show_experiment"):
                self._say(f"The live experiments are not in this build; `scratchformer experiment "
                          f"{page.experiment}` measures the same on the command line.")  # fmt: skip
                return
            try:
                view.show_experiment(page.experiment, **page.controls)
            except UserError as exc:
                self._say(str(exc))

    # --- answering -----------------------------------------------------------------------------------------------

    def current_question(self):
        prepared = self._prepared.get(self.number) if self.lesson is not None else None
        return prepared.question if prepared is not None else None

    def answer(self, response) -> bool | None:
        """Answer the page's question (a choice index, a number or its text, a full cell index); None when the
        page asks nothing or the response cannot be read."""
        q = self.current_question()
        if q is None:
            return None
        return self._show_verdict(q, response, record=True)

    def _check_typed(self) -> None:
        q = self.current_question()
        if q is None:
            return
        if q.kind == "choice":
            self.answer(self.choice_group.checkedId() if self.choice_group.checkedId() >= 0 else None)
        elif q.kind == "number" and self.number_edit is not None:
            self.answer(self.number_edit.text())

    def _map_clicked(self, row: int, col: int) -> None:
        """A click on the Step view's map answers a click question about that map."""
        from scratchformer.plotdata.cells import cell_index

        q = self.current_question()
        step = self.main.current_step()
        shown = view_of(self.main, "StepView")
        hm = shown.current_heatmaps()[0] if shown is not None and shown.current_heatmaps() else None
        if q is None or q.kind != "click" or step is None or step.name != q.step or row < 0 or col < 0 or hm is None:
            return
        _, batch, head = hm.extra.get("cell_of", (step.name, self.main.current_batch(), self.main.current_head()))
        self.answer(cell_index(step, batch, head, row, col, hm.extra.get("vocab_ids")))
        show_cells(self.main, q.step, [tuple(q.cell)])  # back from the derivation the click opened: the answer

    def _show_verdict(self, q, response, record: bool) -> bool | None:
        verdict = check_response(q, response)
        unreadable = not verdict.correct and verdict.message.startswith(("Pick", "Type", "Click"))
        self.feedback.setStyleSheet(f"color: {RIGHT if verdict.correct else WRONG if not unreadable else '#555'};")
        self.feedback.setText(verdict.message)
        if unreadable:
            return None
        if record:
            held = self.lesson.pages[self.number - 1].reveal == "after-answer" and \
                self.progress.answer(self.lesson.id, self.number) is None
            self.progress.record(self.lesson.id, self.number, response, verdict.correct)
            self._show_frame()
            prepared = self._prepared.get(self.number)
            if held and prepared is not None:  # answered: now the window shows what the answer was about
                self.note.hide()
                self._drive(prepared)
        return verdict.correct


def _bundled(lesson: Lesson) -> bool:
    from scratchformer.lessons import lessons_dir

    try:
        return Path(lesson.file).resolve().parent == lessons_dir().resolve()
    except OSError:
        return False


def next_lesson(lesson: Lesson) -> Lesson | None:
    """The bundled lesson after this one (None after the last, or for a lesson from elsewhere)."""
    try:
        lessons = bundled_lessons()  # read once per process while the files stay the same
    except LessonError:
        return None
    ids = [item.id for item in lessons]
    if lesson.id not in ids or ids.index(lesson.id) + 1 >= len(ids):
        return None
    return lessons[ids.index(lesson.id) + 1]


def lesson_panel(window) -> LessonPanel:
    """The window's lesson dock, made on first use (on the right, beside the explanation)."""
    panel = window.lesson_panel
    if panel is None:
        panel = LessonPanel(window)
        window.lesson_panel = panel
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, panel)
    return panel


def open_lesson_file(window, path: str, page: int | None = None) -> bool:
    """Open a lesson file in the window; a bad one is one sentence in the status bar (file, page, problem)."""
    try:
        lesson = load_lesson(path)
    except LessonError as exc:
        window.show_error(str(exc))
        return False
    lesson_panel(window).open_lesson(lesson, page)
    return True


def open_lesson_dialog(window) -> None:
    """File › Open lesson…"""
    from scratchformer.lessons import lessons_dir

    path, _ = QFileDialog.getOpenFileName(window, "Open a lesson", str(lessons_dir()),
                                          "Lessons (*.toml);;All files (*)")
    if path:
        open_lesson_file(window, path)
