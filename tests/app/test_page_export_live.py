"""File › Export › Interactive page…'s Live check box: checked, the job writes a live page (the model inside, the
boxes opening with the window's sentence); a run the page cannot rerun is written as a recorded page and the
status line says why in one sentence; the box is Qt's own file dialog with the check box under it, remembered."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QCheckBox

import app.export.actions as actions
import app.export.page_export as page_export
from scratchformer.loading.bundle import load_model
from scratchformer.page import read_page
from scratchformer.page.live.model import live_refusal
from tests.app.conftest import run_and_wait

SOURCE = "the girl eats an apple"


def _answer(target, live: bool):
    """A stand-in for the dialog: the file, and the Live box as the reader leaves it."""

    def ask(window, caption, suggested, filters, checks=None):
        checks[page_export.LIVE_LABEL] = live
        return str(target)

    return ask


def test_the_live_box_writes_a_live_page(qtbot, make_window, tmp_path, monkeypatch):
    w = make_window(source=SOURCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    target = tmp_path / "live.html"
    monkeypatch.setattr(actions, "ask_save_path", _answer(target, True))
    w.export_actions["page"].trigger()
    qtbot.waitUntil(lambda: not w.page_jobs.busy(), timeout=60_000)
    assert w.message_text().startswith(f"Wrote {target}") and "the live page" in w.message_text(), w.message_text()
    text = target.read_text(encoding="utf-8")
    index, chunks = read_page(text)
    assert index["live"]["source"] == SOURCE and index["live"]["model"] == "en-hi" and "live" in chunks
    assert '<input id="sf-source"' in text
    assert page_export._live_default() is True  # remembered for the next export


def test_a_run_the_page_cannot_rerun_is_written_recorded_with_the_sentence(qtbot, make_window, tmp_path,
                                                                            monkeypatch):  # fmt: skip
    w = make_window(source="machine learning", target="", model="paper")  # its weights: 279 MB, over the budget
    run_and_wait(qtbot, w)
    target = tmp_path / "paper.html"
    monkeypatch.setattr(actions, "ask_save_path", _answer(target, True))
    w.export_actions["page"].trigger()
    qtbot.waitUntil(lambda: not w.page_jobs.busy(), timeout=60_000)
    sentence = live_refusal(load_model("paper", "cpu"))
    assert w.message_text().startswith(f"Wrote {target}") and w.message_text().endswith(f"It is not live: {sentence}")
    assert "live" not in read_page(target.read_text(encoding="utf-8"))[0]


def test_the_dialog_has_the_live_check_box(qtbot, make_window, tmp_path):
    w = make_window(source=SOURCE, target="", model="en-hi")
    target = tmp_path / "ticked.html"
    seen = []

    def answer():
        dialog = QApplication.activeModalWidget()
        box = dialog.findChild(QCheckBox)
        seen.append((box.text(), box.isChecked()))
        box.setChecked(True)
        dialog.selectFile(str(target))
        dialog.accept()

    QTimer.singleShot(0, answer)
    checks = {page_export.LIVE_LABEL: False}
    path = actions.ask_save_path(w, "Export an interactive page", str(tmp_path / "x.html"), page_export.FILTERS,
                                 checks)  # fmt: skip
    assert seen == [(page_export.LIVE_LABEL, False)]
    assert path == str(target) and checks == {page_export.LIVE_LABEL: True}
