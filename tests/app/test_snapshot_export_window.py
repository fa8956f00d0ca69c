"""The Training tab's Export…: the chosen map over training is written (animation or grid) from a worker, with
a status message; the file dialog is answered by the test."""

from __future__ import annotations

from PIL import Image

import app.export.actions as actions
from app.views.training_view import TrainingView
from scratchformer.loading.bundle import snapshots_of
from tests.app.conftest import run_and_wait

SOURCE = "3 1 4 1 5"


def _training_tab(qtbot, window) -> TrainingView:
    view = next(v for v in window.views if isinstance(v, TrainingView))
    window.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy() and view.current_run() is not None, timeout=60_000)
    return view


def test_export_button_writes_the_animation_of_the_chosen_head(qtbot, make_window, tmp_path, monkeypatch):
    w = make_window(source=SOURCE, target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _training_tab(qtbot, w)
    view.head_box.setCurrentIndex(2)  # the user picks head 3
    target = tmp_path / "reverse.gif"
    asked = []
    monkeypatch.setattr(actions, "ask_save_path", lambda *a: asked.append(a) or str(target))
    view.export_button.click()
    assert asked and asked[0][2].endswith("reverse-cross-attention-L2-H3.gif")  # the suggested name
    qtbot.waitUntil(lambda: not view.is_busy() and target.exists(), timeout=60_000)
    assert "Wrote" in w.message_text() and "head 3" in w.message_text()
    with Image.open(target) as im:
        assert im.format == "GIF" and im.n_frames == len(snapshots_of("reverse")) + 1


def test_export_to_a_given_path_writes_the_grid_and_wrong_names_are_one_sentence(qtbot, make_window, tmp_path):
    w = make_window(source=SOURCE, target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _training_tab(qtbot, w)
    target = tmp_path / "grid.svg"
    job = view.export_snapshots(str(target))
    assert job is not None
    qtbot.waitUntil(lambda: not view.is_busy() and target.exists(), timeout=60_000)
    svg = target.read_text(encoding="utf-8")
    for snap in snapshots_of("reverse"):
        assert f"step {snap.step}" in svg
    assert "final" in svg and "Wrote" in w.message_text()
    assert view.export_snapshots(str(tmp_path / "grid.jpg")) is None
    assert "cannot be saved here" in w.message_text()


def test_closing_during_an_export_leaves_no_thread(qtbot, make_window, tmp_path):
    w = make_window(source=SOURCE, target="", model="reverse")
    run_and_wait(qtbot, w)
    view = _training_tab(qtbot, w)
    assert view.export_snapshots(str(tmp_path / "x.apng")) is not None
    w.close()  # the tab waits for its workers; the conftest fails the test if a thread survives
    assert not view.is_busy()
