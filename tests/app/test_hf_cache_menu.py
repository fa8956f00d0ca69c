"""File › Open from the Hugging Face cache lists the cached models of families that open, and opens one by id."""

from __future__ import annotations

from PySide6.QtWidgets import QMenu

from tests.scratchformer.test_hf_cache import hf_home  # noqa: F401 - the fixture: a cache in a temporary HF_HOME


def test_the_cache_menu_lists_and_opens_a_cached_model(qtbot, make_window, hf_home):  # noqa: F811
    w = make_window(source="the cat sat", target="", model="en-hi")
    menu = w.findChild(QMenu, "hf_cache_menu")
    menu.aboutToShow.emit()
    texts = [a.text() for a in menu.actions()]
    assert texts == ["someone/tiny-bert  (bert)"]  # the llama folder is not a family that opens
    menu.actions()[0].trigger()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.current_result() is not None, w.message_text()
    assert w.current_result().bundle.name == "someone/tiny-bert"
    assert w.current_trace().source_tokens[0] == ["[CLS]", "the", "cat", "sat", "[SEP]"]


def test_an_empty_cache_says_where_it_looked(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))
    w = make_window(source="the cat sat", target="", model="en-hi")
    menu = w.findChild(QMenu, "hf_cache_menu")
    menu.aboutToShow.emit()
    (only,) = menu.actions()
    assert not only.isEnabled() and str(tmp_path / "empty" / "hub") in only.text()
