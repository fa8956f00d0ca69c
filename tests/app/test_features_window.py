"""The Features view on en-hi with a dictionary attached (Run › Attach dictionary…): the run gains the dictionary's
steps, the view lists each token's strongest features as the trace holds them, a click makes the cards off the UI
thread and shows the feature's card, the card exports as PNG/SVG/PDF and the table as CSV (one row per token),
clamping a feature to 0 reruns the run with Compare on it, and a folder that is no dictionary or one of another
width is one sentence in the status bar, never a traceback."""

from __future__ import annotations

import csv

import pytest
import torch

from app.views.compare_view import CompareView
from app.views.features_view import FeaturesView
from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.folder import save
from tests.app.test_views import show

STEP = "decoder.1.add_norm3.out"
WAIT_MS = 120_000


def _dictionary(tmp_path, d_in=128, name="dict"):
    d = Dictionary(d_in, 32, "topk", 4, info=DictionaryInfo(STEP, STEP, "en-hi"))
    d.reset_parameters(torch.Generator().manual_seed(0))
    return save(d, tmp_path / name)


@pytest.fixture
def attached_window(qtbot, en_hi, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = _dictionary(tmp_path)
    en_hi.attach_dictionary(str(folder))
    qtbot.waitUntil(lambda: not en_hi.is_busy(), timeout=WAIT_MS)
    assert en_hi.current_trace().find(f"{STEP}.dict.features") is not None, en_hi.message_text()
    return en_hi, folder


def _card(qtbot, w) -> FeaturesView:
    view = show(w, FeaturesView)
    view.max_inputs = 12  # a short corpus: the test reads the card's numbers, not a large sample
    qtbot.waitUntil(lambda: view.table.rowCount() > 0, timeout=WAIT_MS)
    item = view.table.item(1, 2)
    rect = view.table.visualItemRect(item)
    from PySide6.QtCore import Qt

    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: view.card.plot is not None, timeout=WAIT_MS)
    return view


def test_the_view_lists_the_traces_features_and_shows_a_card_after_a_click(qtbot, attached_window, tmp_path):
    w, _folder = attached_window
    view = _card(qtbot, w)
    f = w.current_trace()[f"{STEP}.dict.features"].tensor[0]  # (T, d_sae)
    assert view.table.rowCount() == f.shape[0] == len(w.current_trace().target_tokens[0])
    strongest = int(f[1].argmax())
    assert view.table.item(1, 2).data(0x0100) == strongest  # Qt.UserRole: the feature the cell names
    assert view.feature == strongest and view.card.plot.title == f"Feature {strongest}"
    assert view.card.height() > 300 and view.status.text().startswith("Cards over 12 inputs")
    view.grab().save(str(tmp_path / "features_view.png"))
    view.card.grab().save(str(tmp_path / "feature_card.png"))
    # exports: the card in three formats, the table with one row per token
    for ext, magic in (("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")):
        written = view.export_card(str(tmp_path / f"card.{ext}"))
        assert open(written, "rb").read(5).startswith(magic)
    assert b"Feature" in (tmp_path / "card.svg").read_bytes()
    rows = list(csv.reader(open(view.export_csv(str(tmp_path / "features.csv")), encoding="utf-8")))
    assert len(rows) == 1 + f.shape[0] and rows[2][2] == str(strongest)


def test_clamping_a_feature_reruns_with_compare(qtbot, attached_window):
    w, _folder = attached_window
    view = _card(qtbot, w)
    feature = view.feature
    view.clamp_zero.click()
    qtbot.waitUntil(lambda: not w.is_busy() and bool(w.current_result().request.clamps), timeout=WAIT_MS)
    result = w.current_result()
    assert result.before is not None, w.message_text()
    assert float(result.trace[f"{STEP}.dict.features"].tensor[0, :, feature].abs().max()) == 0.0
    assert float(result.before[f"{STEP}.dict.features"].tensor[0, 1, feature]) > 0  # before: unclamped
    assert w.go_to_step(f"{STEP}.dict.features")
    compare = show(w, CompareView)
    assert compare.comparison is not None  # Compare reads the clamp as it reads any intervention


@pytest.mark.parametrize("kind", ["not a dictionary", "another width"])
def test_a_bad_folder_is_one_sentence(qtbot, en_hi, tmp_path, kind):
    if kind == "not a dictionary":
        folder = tmp_path / "notes"
        folder.mkdir()
        (folder / "readme.txt").write_text("hello")
    else:
        folder = _dictionary(tmp_path, d_in=64)
    en_hi.attach_dictionary(str(folder))
    qtbot.waitUntil(lambda: not en_hi.is_busy(), timeout=WAIT_MS)
    message = en_hi.message_text()
    assert message.startswith("The dictionary was not attached:")
    assert "Traceback" not in message and "\n" not in message
    assert ("holds no cfg.json" in message) if kind == "not a dictionary" else ("vectors of 64 numbers" in message)
    assert en_hi.dictionaries == []  # left out: the next run is the plain one
    view = show(en_hi, FeaturesView)
    assert view.empty.isVisible()


def test_the_bundled_dictionary_attaches_from_the_run_menu(qtbot, en_hi):
    """en-hi ships an SAE of its last decoder layer: Run › Attach the bundled dictionary needs no folder."""
    from scratchformer.features.bundled import bundled_saes

    action = next(a for a in en_hi.menuBar().actions() if a.text() == "&Run")
    entry = next(a for a in action.menu().actions() if a.text() == "Attach the &bundled dictionary")
    entry.trigger()
    qtbot.waitUntil(lambda: not en_hi.is_busy(), timeout=WAIT_MS)
    assert en_hi.dictionaries == [str(bundled_saes("en-hi")[0])]
    assert en_hi.current_trace().find(f"{STEP}.dict.features") is not None, en_hi.message_text()
