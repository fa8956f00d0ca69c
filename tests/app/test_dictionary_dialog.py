"""Run › Train a dictionary…: an SAE of a step of the run's model, trained off the UI thread with progress, written
to a folder and attached to the run when done; Cancel stops it with nothing attached; a bad corpus is one sentence
in the dialog (issue 44)."""

from __future__ import annotations

import threading

import pytest

from scratchformer.features.folder import load

STEP = "decoder.1.add_norm3.out"
WAIT_MS = 120_000


@pytest.fixture
def dialog(qtbot, en_hi, tmp_path):
    d = en_hi.train_dictionary_dialog()
    qtbot.addWidget(d)
    d.step.setCurrentText("encoder.1.add_norm2.out")
    assert "encoder.1.add_norm2.out" in d.out.text()  # the default folder follows the step
    d.step.setCurrentText(STEP)
    d.width_box.setValue(32)
    d.k_box.setValue(4)
    d.tokens_box.setValue(2000)
    d.out.setText(str(tmp_path / "sae"))
    return d


def test_a_dictionary_trains_off_the_ui_thread_and_is_attached(qtbot, en_hi, dialog, monkeypatch, tmp_path):
    import app.panels.dictionary_dialog as module

    threads, news = [], []
    real = module.train_dictionary
    monkeypatch.setattr(module, "train_dictionary",
                        lambda *a, **k: threads.append(threading.current_thread()) or real(*a, **k))
    monkeypatch.setattr(dialog, "_progressed", lambda *a: news.append(a))
    assert dialog.corpus.text() == "task:en-hi"  # a bundled task's model reads its own task
    dialog.train_button.click()
    qtbot.waitUntil(lambda: dialog.figures is not None or bool(dialog.status.styleSheet()), timeout=WAIT_MS)
    assert dialog.figures is not None, dialog.status.text()
    assert threads and threading.main_thread() not in threads
    assert {what for what, *_ in news} == {"reading activations", "training"}
    assert "FVU" in dialog.status.text() and "attached" in dialog.status.text()
    assert load(tmp_path / "sae").info.at == STEP
    qtbot.waitUntil(lambda: not en_hi.is_busy(), timeout=WAIT_MS)
    assert en_hi.dictionaries == [str(tmp_path / "sae")]
    assert en_hi.current_trace().find(f"{STEP}.dict.features") is not None


def test_cancel_stops_training_and_attaches_nothing(qtbot, en_hi, dialog):
    dialog.tokens_box.setValue(200_000)
    dialog.train_button.click()
    qtbot.waitUntil(lambda: dialog.progress.value() > 0, timeout=WAIT_MS)
    dialog.cancel_button.click()
    assert "Cancelled" in dialog.status.text() and not dialog.cancel_button.isVisible()
    qtbot.waitUntil(lambda: not dialog.jobs.busy(), timeout=WAIT_MS)
    assert en_hi.dictionaries == [] and dialog.figures is None


def test_a_bad_corpus_is_one_sentence_in_the_dialog(qtbot, dialog):
    dialog.corpus.setText("task:nope")
    dialog.train_button.click()
    qtbot.waitUntil(lambda: not dialog.jobs.busy(), timeout=WAIT_MS)
    text = dialog.status.text()
    assert "no bundled task 'nope'" in text and "Traceback" not in text and "\n" not in text
    assert dialog.train_button.isEnabled()
