"""File › Open from the Hugging Face cache lists the cached models of families that open, and opens one by id."""

from __future__ import annotations

from PySide6.QtWidgets import QMenu

from tests.scratchformer.test_hf_cache import hf_home  # noqa: F401 - the fixture: a cache in a temporary HF_HOME


def test_the_cache_menu_lists_and_opens_a_cached_model(qtbot, make_window, hf_home):  # noqa: F811
    w = make_window(source="the cat sat", target="", model="en-hi")
    menu = w.findChild(QMenu, "hf_cache_menu")
    menu.aboutToShow.emit()
    texts = [a.text() for a in menu.actions()]
    assert texts == ["someone/tiny-bert  (bert)"]  # the mamba folder is not a family that opens
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


def _open_dialog(qtbot, w):
    from app.panels.input_bar import OPEN_ITEM
    from app.panels.open_model_dialog import OpenModelDialog

    w.input_bar.model_combo.activated.emit(w.input_bar.model_combo.findData(OPEN_ITEM))  # the list's Open… entry
    dialog = w.findChild(OpenModelDialog, "openModelDialog")
    assert dialog is not None and dialog.isVisible()
    return dialog


def test_the_open_dialog_lists_the_cached_models_and_opens_one_by_id(qtbot, make_window, hf_home):  # noqa: F811
    w = make_window(source="the cat sat", target="", model="en-hi")
    dialog = _open_dialog(qtbot, w)
    items = [dialog.cached.item(i).text() for i in range(dialog.cached.count())]
    assert items == ["someone/tiny-bert  (bert)"]  # the mamba folder is not a family that opens
    dialog.cached.setCurrentRow(0)
    assert dialog.spec() == "someone/tiny-bert"
    dialog.buttons.button(dialog.buttons.StandardButton.Open).click()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.current_result() is not None, w.message_text()
    assert w.current_result().bundle.name == "someone/tiny-bert"
    assert w.input_bar.model_combo.currentText() == "someone/tiny-bert"  # listed by its id, not its snapshot hash
    w.input_bar.fill_models(["someone/tiny-bert", "someone/not-here"])  # a later launch keeps what is still cached
    combo = w.input_bar.model_combo
    assert combo.findData("someone/tiny-bert") >= 0 and combo.findData("someone/not-here") < 0


def test_an_uncached_id_typed_in_the_open_dialog_says_how_to_get_it(qtbot, make_window, hf_home):  # noqa: F811
    w = make_window(source="the cat sat", target="", model="en-hi")
    dialog = _open_dialog(qtbot, w)
    dialog.spec_edit.setText("someone/not-here")
    dialog.spec_edit.returnPressed.emit()
    qtbot.waitUntil(lambda: not w.is_busy() and "someone/not-here" in w.message_text(), timeout=60_000)
    text = w.message_text()
    assert "not in the local Hugging Face cache" in text and "hf download someone/not-here" in text
    assert "Traceback" not in text and "\n" not in text
