"""File › Export › Interactive page…: the menu action asks for a file (answered by the test), a job writes the
page of the run shown, and the status line says so; a folder that cannot take it is one sentence."""

from __future__ import annotations

import numpy as np

import app.export.actions as actions
from scratchformer.page import read_page
from scratchformer.page.packing import unpack_values
from tests.app.conftest import run_and_wait

SOURCE = "the girl eats an apple"


def _page_action(window):
    action = window.export_actions["page"]
    assert action.text() == "Interactive page…" and action.isEnabled()
    return action


def test_menu_writes_the_page_of_the_run_shown(qtbot, make_window, tmp_path, monkeypatch):
    w = make_window(source=SOURCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    target = tmp_path / "lesson.html"
    asked = []
    monkeypatch.setattr(actions, "ask_save_path", lambda *a: asked.append(a) or str(target))
    _page_action(w).trigger()
    assert asked and asked[0][2].endswith("en-hi-the_girl_eats_an_apple.html")  # the suggested name
    qtbot.waitUntil(lambda: not w.page_jobs.busy(), timeout=60_000)
    assert target.exists(), w.message_text()
    assert w.message_text().startswith(f"Wrote {target}") and "114 steps" in w.message_text()
    index, chunks = read_page(target.read_text(encoding="utf-8"))
    trace, inputs = w.current_trace(), w.current_result().inputs
    assert [s["name"] for s in index["steps"]] == trace.names()
    assert index["input"]["translation"] == inputs.translation and inputs.translation
    step = trace["decoder.1.cross_attn.weights"]
    info = index["maps"][f"{step.index}/0"]
    weights = unpack_values(chunks[info["chunk"]], info["dtype"], tuple(info["shape"]))
    np.testing.assert_array_equal(weights, step.tensor[0].numpy().astype(np.float16).astype(np.float32))


def test_a_folder_that_does_not_exist_is_one_sentence_in_the_status_line(qtbot, make_window, tmp_path, monkeypatch):
    w = make_window(source=SOURCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(actions, "ask_save_path", lambda *a: str(blocked / "page.html"))
    _page_action(w).trigger()
    qtbot.waitUntil(lambda: not w.page_jobs.busy(), timeout=60_000)
    assert w.message_text() == f"{blocked} is a file, not a folder; choose a folder to export into."
    assert blocked.read_text() == "not a folder"


def test_closing_while_the_page_is_written_leaves_no_thread(qtbot, make_window, tmp_path, monkeypatch):
    w = make_window(source=SOURCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    monkeypatch.setattr(actions, "ask_save_path", lambda *a: str(tmp_path / "page.html"))
    _page_action(w).trigger()
    assert w.page_jobs.busy()
    w.close()  # the runner is shut down with the window; the conftest fails the test if a thread survives
    assert not w.page_jobs.busy()


def test_the_page_carries_the_graph_view_s_graph_at_its_threshold(qtbot, make_window, tmp_path, monkeypatch):
    from app.views.graph.view import GraphView

    w = make_window(source=SOURCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    view = next(v for v in w.views if isinstance(v, GraphView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not w.is_busy() and not view.is_busy() and view.built is not None, timeout=60_000)
    view.set_threshold(0.9)
    view.set_edge_threshold(0.7)
    qtbot.waitUntil(lambda: not view.is_busy() and view.built.threshold == 0.9, timeout=60_000)
    target = tmp_path / "with-graph.html"
    monkeypatch.setattr(actions, "ask_save_path", lambda *a: str(target))
    _page_action(w).trigger()
    qtbot.waitUntil(lambda: not w.page_jobs.busy(), timeout=60_000)
    assert "with the Graph view's attribution graph" in w.message_text(), w.message_text()
    graph = read_page(target.read_text(encoding="utf-8"))[0]["graph"]
    opened = graph["levels"][graph["default"]]
    assert opened["threshold"] == 0.9
    assert {graph["nodes"][i]["id"] for i in opened["nodes"]} == set(view.built.layout.ids)
    assert graph["edge_threshold"] == 0.7  # the Edges slider's share, not the default 0.98
