"""Lessons in the window: every page of every bundled lesson shown in the lesson dock, the window moved to what the
page names, each question answered once wrongly and once rightly through its widgets; progress and answers kept
across windows; a bad lesson file refused in one sentence while the others still open."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.lessons.lesson_panel import lesson_panel, open_lesson_file
from scratchformer.lessons import bundled_lessons
from scratchformer.plotdata.cells import map_cell

SOURCE = "the girl eats an apple"


def settle(qtbot, w, panel) -> None:
    qtbot.waitUntil(lambda: not panel.is_busy() and not w.is_busy(), timeout=60_000)


def lessons_view(w):
    return next(v for v in w.views if v.title == "Lessons")


def answer_wrong_then_right(qtbot, w, panel, q) -> None:
    if q.kind == "choice":
        wrong = (q.correct + 1) % len(q.choices)
        panel.choice_group.button(wrong).setChecked(True)
        qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
        assert panel.feedback.text().startswith(f"Not quite: the answer is {q.choices[q.correct]}.")
        panel.choice_group.button(q.correct).setChecked(True)
        qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
    elif q.kind == "number":
        panel.number_edit.setText(str(q.number + 10 * q.tolerance + 1))
        qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
        assert panel.feedback.text().startswith("Not quite: the answer is ")
        panel.number_edit.setText(repr(q.number))
        qtbot.keyClick(panel.number_edit, Qt.Key.Key_Return)
    else:  # a click on the Step view's map, where the page put the step and head
        step = w.current_trace().find(q.step)
        assert w.current_step().name == q.step and w.current_view().title == "Step"
        _, _, (row, col) = map_cell(step, q.cell)
        n_cols = step.shape[-1]
        w.views[0].heatmap.clicked.emit(row, (col + 1) % n_cols)
        assert panel.feedback.text().startswith("Not quite: the answer is ")
        w.views[0].heatmap.clicked.emit(row, col)
    assert panel.feedback.text().startswith("Right."), panel.feedback.text()


def test_every_page_of_every_lesson_in_the_window(qtbot, make_window):
    w = make_window(source=SOURCE, target="", model="en-hi")
    panel = lesson_panel(w)
    masks_answer = n_tgt = None
    for lesson in bundled_lessons():
        lessons_view(w).start(lesson.id, 1)
        for n, page in enumerate(lesson.pages, start=1):
            if n > 1:
                qtbot.mouseClick(panel.next_button, Qt.MouseButton.LeftButton)
            settle(qtbot, w, panel)
            held = page.reveal == "after-answer"  # the window shows the page once its question is answered
            assert panel.number == n and panel.note.isVisible() == held, (lesson.id, n, panel.note.text())
            prepared = panel._prepared[n]
            if held:
                answer_wrong_then_right(qtbot, w, panel, prepared.question)
                settle(qtbot, w, panel)
            first_words = " ".join(prepared.text.split()[:6])
            assert first_words in " ".join(panel.text.toPlainText().split())
            result = w.current_result()
            model, source, target, start_only = lesson.inputs(page)
            assert (result.request.model, result.request.source, result.request.target) == (model, source, target)
            assert result.request.start_only == start_only
            if page.step:
                assert w.current_step().name == page.step
            if page.shown_view():
                assert w.current_view().title == page.shown_view(), (lesson.id, n)
            if page.cells and page.shown_view() == "Step":
                assert w.views[0]._highlight == (page.step, [tuple(c) for c in page.cells])
            if page.experiment:
                assert w.current_view().name() == page.experiment
            if prepared.question is not None and not held:
                answer_wrong_then_right(qtbot, w, panel, prepared.question)
            if (lesson.id, n) == ("masks", 2):
                masks_answer = prepared.question.number
                n_tgt = len(w.current_trace().target_tokens[0])  # that page's run (the last lesson runs another)
        answered = sum(p.question is not None for p in lesson.pages)
        assert panel.status.text().endswith(f"{answered} of {answered} questions answered, {answered} right")
    assert masks_answer == n_tgt * (n_tgt - 1) // 2 == 10  # the causal mask of 5 decoder tokens: 10 cells of −∞
    # the last lesson ends; Next has no lesson after it
    assert not panel.next_button.isEnabled()


def test_progress_and_answers_persist_and_restart(qtbot, make_window):
    w = make_window(source=SOURCE, target="", model="en-hi", persist=True)
    lessons_view(w).start("scaling", 1)
    panel = lesson_panel(w)
    settle(qtbot, w, panel)
    q = panel.current_question()
    assert q.kind == "number" and abs(q.number - 32 ** 0.5) < 1e-9  # √(d_model / heads) = √(128 / 4)
    assert panel.answer("√32") is True
    qtbot.mouseClick(panel.next_button, Qt.MouseButton.LeftButton)
    settle(qtbot, w, panel)
    assert panel.answer(2) is False  # the choice "64": the standard deviation is 8, choice 1 (0-based)
    w.close()

    again = make_window(source=SOURCE, target="", model="en-hi", persist=True)
    view = lessons_view(again)
    view.list.setCurrentRow([x.id for x in view.lessons].index("scaling"))
    assert view.start_button.text() == "Continue"
    assert "page 2 of 4, 1 right" in view.list.currentItem().text()
    view.start()
    panel2 = lesson_panel(again)
    settle(qtbot, again, panel2)
    assert panel2.number == 2
    assert panel2.choice_group.checkedId() == 2  # the answer given before is shown again, with its verdict
    assert panel2.feedback.text().startswith("Not quite: the answer is 8.")
    assert panel2.status.text() == "Page 2 of 4 · 2 of 4 questions answered, 1 right"
    qtbot.mouseClick(panel2.restart_button, Qt.MouseButton.LeftButton)
    settle(qtbot, again, panel2)
    assert panel2.number == 1 and panel2.feedback.text() == "" and panel2.number_edit.text() == ""
    assert panel2.status.text() == "Page 1 of 4 · 0 of 4 questions answered, 0 right"


def test_a_bad_lesson_file_is_one_sentence_and_others_still_open(qtbot, make_window, tmp_path):
    w = make_window(source=SOURCE, target="", model="en-hi")
    bad = tmp_path / "typo.toml"
    bad.write_text('id = "typo"\ntitle = "Typo"\n[[pages]]\ntitle = "One"\ntext = "x"\nview = "Stpe"\n',
                   encoding="utf-8")
    assert not open_lesson_file(w, str(bad))
    message = w.message_text()
    assert "typo.toml" in message and "page 1 (One)" in message and "unknown view 'Stpe'" in message
    good = tmp_path / "mine.toml"
    good.write_text('id = "mine"\ntitle = "Mine"\n[[pages]]\ntitle = "Heads"\ntext = "{n_heads} heads of '
                    'width {d_k}."\nstep = "encoder.0.self_attn.weights"\nhead = 3\n', encoding="utf-8")
    assert open_lesson_file(w, str(good))
    panel = lesson_panel(w)
    settle(qtbot, w, panel)
    assert panel.text.toPlainText().strip() == "4 heads of width 32."
    assert w.current_step().name == "encoder.0.self_attn.weights" and w.current_head() == 3


def test_the_views_a_lesson_may_name_are_the_windows():
    from app.views.view_groups import GROUPS, MAX_GROUPS, flat_views
    from scratchformer.lessons import VIEW_TITLES

    titles = [cls.title for cls in flat_views()]
    assert set(VIEW_TITLES) <= set(titles) and "Lessons" in titles
    assert len(GROUPS) <= MAX_GROUPS


REVEAL_LESSON = """id = "reveal"
title = "Predict first"
[[pages]]
title = "Start"
text = "The first source token."
step = "src_embed.tokens"
[[pages]]
title = "Which word?"
text = "The row of {src:2}."
step = "encoder.0.self_attn.weights"
reveal = "after-answer"
[pages.question]
kind = "choice"
prompt = "Which token gets the largest weight in the row of {src:2}?"
choices = "src_tokens"
answer = "argmax:encoder.0.self_attn.weights[0,0,2,:]"
"""


def open_reveal_lesson(qtbot, make_window, tmp_path):
    """The window with REVEAL_LESSON opened from a file, at its first page."""
    w = make_window(source=SOURCE, target="", model="en-hi")
    path = tmp_path / "reveal.toml"
    path.write_text(REVEAL_LESSON, encoding="utf-8")
    assert open_lesson_file(w, str(path))
    panel = lesson_panel(w)
    settle(qtbot, w, panel)
    return w, panel


def test_a_page_that_would_give_its_answer_away_waits_for_the_answer(qtbot, make_window, tmp_path):
    w, panel = open_reveal_lesson(qtbot, make_window, tmp_path)
    assert w.current_step().name == "src_embed.tokens"
    qtbot.mouseClick(panel.next_button, Qt.MouseButton.LeftButton)
    settle(qtbot, w, panel)
    # the question is asked, the map that answers it is not shown yet
    assert panel.question_box.isVisible() and panel.note.text().startswith("Answer first")
    assert w.current_step().name == "src_embed.tokens"
    q = panel.current_question()
    panel.choice_group.button(q.correct).setChecked(True)
    qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
    settle(qtbot, w, panel)
    assert panel.feedback.text().startswith("Right.") and not panel.note.isVisible()
    assert w.current_step().name == "encoder.0.self_attn.weights"  # answered: now the window shows it
    # back to the first page and forward again: an answered page shows its view at once
    qtbot.mouseClick(panel.back_button, Qt.MouseButton.LeftButton)
    settle(qtbot, w, panel)
    qtbot.mouseClick(panel.next_button, Qt.MouseButton.LeftButton)
    settle(qtbot, w, panel)
    assert w.current_step().name == "encoder.0.self_attn.weights" and not panel.note.isVisible()


def test_show_reveals_a_held_back_page_before_answering(qtbot, make_window, tmp_path):
    w, panel = open_reveal_lesson(qtbot, make_window, tmp_path)
    panel.show_page(2)
    settle(qtbot, w, panel)
    assert w.current_step().name == "src_embed.tokens"
    qtbot.mouseClick(panel.show_button, Qt.MouseButton.LeftButton)
    settle(qtbot, w, panel)
    assert w.current_step().name == "encoder.0.self_attn.weights" and panel.current_question() is not None
