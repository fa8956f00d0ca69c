"""The window notes what the tokenizer could not keep (tests/scratchformer/test_lost_text.py has the rest)."""

from tests.app.conftest import run_and_wait


def test_the_window_notes_what_was_lost(qtbot, make_window):
    w = make_window(source="the girl eats 🍎", target="", model="en-hi")
    run_and_wait(qtbot, w)
    assert "“🍎” → <unk>" in w.notes_label.text() and w.notes_label.isVisible()
