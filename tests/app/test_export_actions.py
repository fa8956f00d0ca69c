"""The window's export actions against a small fake window that implements the export contract."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QMainWindow

import app.export.actions as actions
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata import heads_grid, step_heatmap


class FakeView:
    def __init__(self, window):
        self.window = window

    def current_heatmaps(self):
        w = self.window
        return heads_grid(w.trace, w.current_step(), w.current_batch())

    def view_title(self):
        return "Heads · " + self.window.current_step().title


class FakeWindow(QMainWindow):
    def __init__(self, bundle, trace):
        super().__init__()
        self.bundle, self.trace = bundle, trace
        self.step_name = "decoder.0.cross_attn.weights"
        self.view = FakeView(self)
        self.messages: list[tuple[str, bool]] = []

    def current_trace(self):
        return self.trace

    def current_bundle(self):
        return self.bundle

    def current_step(self):
        return self.trace[self.step_name] if self.trace is not None else None

    def current_batch(self):
        return 0

    def current_head(self):
        return 0

    def current_view(self):
        return self.view

    def show_message(self, text):
        self.messages.append((text, False))

    def show_error(self, text):
        self.messages.append((text, True))


@pytest.fixture(scope="module")
def run():
    bundle = load_model("blog")
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch", "the answer"))
    return bundle, trace


@pytest.fixture
def window(qtbot, run, tmp_path, monkeypatch):
    monkeypatch.setenv("SCRATCHFORMER_SETTINGS", str(tmp_path / "settings.ini"))
    w = FakeWindow(*run)
    qtbot.addWidget(w)
    return w


@pytest.fixture
def answers(monkeypatch):
    """Scripted dialog answers: set answers['path'], ['folder'], ['formats'], ['confirm']."""
    given: dict = {"confirm": True, "asked": []}

    def save(window, caption, suggested, filters):
        given["asked"].append(("save", suggested, filters))
        return given.get("path")

    def confirm(window, title, text):
        given["asked"].append(("confirm", text))
        return given["confirm"]

    monkeypatch.setattr(actions, "ask_save_path", save)
    monkeypatch.setattr(actions, "ask_folder", lambda w, c, s: given.get("folder"))
    monkeypatch.setattr(actions, "ask_formats", lambda w: given.get("formats"))
    monkeypatch.setattr(actions, "confirm", confirm)
    return given


def test_view_png_writes_what_is_shown_and_remembers_the_folder(window, answers, tmp_path):
    answers["path"] = str(tmp_path / "heads")  # no extension: the action's format is added
    path = actions.handle(window, "view_png")
    assert path == tmp_path / "heads.png"
    img = QImage(str(path))
    assert img.width() > 200 and img.height() > 100
    assert window.messages[-1] == (f"Wrote {path} ({path.stat().st_size / 1e3:.1f} kB).", False)
    assert actions.last_folder() == str(tmp_path)
    # The next dialog starts in the remembered folder, named after the step.
    answers["path"] = None
    assert actions.handle(window, "view_svg") is None
    assert answers["asked"][-1][1] == str(tmp_path / "decoder.0.cross_attn.weights.fake.svg")


def test_extension_picks_the_format_and_replacing_asks_first(window, answers, tmp_path):
    answers["path"] = str(tmp_path / "plot.pdf")
    path = actions.handle(window, "view_png")  # chosen from the PNG item, but named .pdf: a PDF
    assert path.read_bytes().startswith(b"%PDF")
    before = path.read_bytes()
    answers["confirm"] = False
    assert actions.handle(window, "view_pdf") is None
    assert answers["asked"][-1][0] == "confirm" and "already exists" in answers["asked"][-1][1]
    assert path.read_bytes() == before
    answers["path"] = str(tmp_path / "plot.gif")  # not an image format we write: the action's .png is added
    assert actions.handle(window, "view_png") == tmp_path / "plot.gif.png"
    answers["path"] = str(tmp_path / "plot.npz")  # a tensor format is not a picture
    with pytest.raises(UserError, match=r"plot.npz cannot be saved here; use one of: .png, .svg, .pdf"):
        actions.handle(window, "view_png")


def test_export_all_attention_with_progress_and_index(window, answers, tmp_path, qtbot):
    answers.update(formats=["png", "csv"], folder=str(tmp_path / "maps"))  # missing: we agree to create it
    job = actions.handle(window, "all_attention")
    qtbot.waitUntil(lambda: job.result is not None or job.error is not None, timeout=30_000)
    assert job.error is None and not job.result.cancelled
    index = json.loads((tmp_path / "maps" / "index.json").read_text(encoding="utf-8"))
    assert len(index["files"]) == 6 * 2
    files = sorted(p.name for p in (tmp_path / "maps").iterdir())
    assert "decoder_cross_attn_layer01_head02.png" in files and "encoder_self_attn_layer01_head01.csv" in files
    assert "Wrote 12 files" in window.messages[-1][0]


def test_cancel_stops_early_and_the_index_lists_only_what_was_written(window, answers, tmp_path, qtbot):
    answers.update(formats=["svg"], folder=str(tmp_path))
    job = actions.handle(window, "all_attention")
    job.cancel()  # before the first tick: nothing written
    qtbot.waitUntil(lambda: job.result is not None, timeout=10_000)
    assert job.result.cancelled and len(job.result.files) < 6
    assert not list(tmp_path.glob("*.svg")) or len(list(tmp_path.glob("*.svg"))) == len(job.result.files)
    assert window.messages[-1][0].startswith("Cancelled after")


def test_tensors_current_npz_and_all_as_csv(window, answers, tmp_path, qtbot, run):
    _, trace = run
    answers["path"] = str(tmp_path / "cross.npz")
    files = actions.handle(window, "tensor_current")
    with np.load(files[0]) as z:
        np.testing.assert_array_equal(z["decoder.0.cross_attn.weights"], trace["decoder.0.cross_attn.weights"].tensor)
    answers["path"] = str(tmp_path / "all" / "t.csv")
    job = actions.handle(window, "tensors_all")
    qtbot.waitUntil(lambda: job.result is not None or job.error is not None, timeout=60_000)
    assert job.error is None
    assert (tmp_path / "all" / "t.encoder.0.self_attn.weights.head2.csv").is_file()
    assert (tmp_path / "all" / "index.csv").is_file()


def test_clipboard_gets_the_rendered_view(window, answers):
    actions.handle(window, "clipboard")
    image = QGuiApplication.clipboard().image()
    assert not image.isNull() and image.width() > 200
    assert window.messages[-1][0].startswith("Copied the plot to the clipboard")


def test_errors_are_one_sentence(window, answers, tmp_path):
    window.trace = None
    with pytest.raises(UserError, match="Run the model first"):
        actions.handle(window, "view_png")
    window.trace = load_model("blog").run(load_model("blog").prepare("hi", "x"))[1]
    answers["path"] = str(tmp_path / "missing" / "deeper" / "a.png")
    with pytest.raises(UserError, match="Neither the folder"):
        actions.handle(window, "view_png")
    answers["path"] = str(tmp_path / ("x" * 300 + ".png"))
    with pytest.raises(UserError, match="not a valid file name"):
        actions.handle(window, "view_png")


def test_a_single_heatmap_view_exports_its_own_title(window, answers, tmp_path, run):
    _, trace = run
    hm = step_heatmap(trace, "encoder.0.self_attn.weights", 0, 1)
    window.view.current_heatmaps = lambda: [hm]
    answers["path"] = str(tmp_path / "one.svg")
    path = actions.handle(window, "view_svg")
    assert hm.title in path.read_text(encoding="utf-8")
