"""Exporting one attention map over training: the series (one frame per snapshot, then the final model), the
animation (GIF, APNG) and the grid of small multiples (PNG, SVG, PDF), and `scratchformer export --snapshots`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageChops

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.exporting.animation import LAST_FRAME_MS, encode_animation, plan_snapshot_export
from scratchformer.exporting.job import ExportRun
from scratchformer.exporting.snapshots import snapshot_series
from scratchformer.loading.bundle import load_model, snapshots_of
from scratchformer.plotdata import aligned_head

SOURCE = "3 1 4 1 5"


@pytest.fixture(scope="module")
def series():
    return snapshot_series("reverse", SOURCE)


def _frames(path) -> list[Image.Image]:
    with Image.open(path) as im:
        out = []
        for i in range(im.n_frames):
            im.seek(i)
            out.append(im.convert("RGB"))
        return out


def test_series_has_a_frame_per_snapshot_and_the_final_model(series):
    snaps = snapshots_of("reverse")
    assert len(series.frames) == len(snaps) + 1
    assert [f.step for f in series.frames[:-1]] == [s.step for s in snaps]
    assert [f.loss for f in series.frames[:-1]] == [s.valid_loss for s in snaps]
    final = series.frames[-1]
    assert final.final and final.spec == "reverse" and final.step == snaps[-1].step  # trained to the last snapshot
    assert final.caption.startswith("final · step ") and "valid loss" in final.caption
    assert series.frames[0].caption == f"step {snaps[0].step} · valid loss {snaps[0].valid_loss:.2f}"
    # the Training tab's default: last decoder layer's cross-attention, the most aligned head of the last snapshot
    bundle = load_model(snaps[-1].spec)
    _, trace = bundle.run(bundle.prepare_run(SOURCE))
    assert (series.attention_type, series.layer) == ("decoder.cross_attn", 1)
    assert series.head == aligned_head(trace)
    # each frame's output is that model's greedy output; the final one reverses the digits, the first does not
    assert final.output == "5 1 4 1 3" and series.frames[0].output != final.output
    first, last = series.frames[0].heatmap.values, final.heatmap.values
    assert first.shape != last.shape or not np.allclose(first, last)
    assert np.allclose(last.sum(axis=1), 1.0, atol=1e-4)  # attention rows: probabilities over the source


def test_every_frame_reads_the_final_translation_so_rows_line_up():
    series = snapshot_series("en-hi", "the girl eats an apple")
    final = series.frames[-1]
    assert series.reads == final.output and final.output  # the final model's own translation ...
    assert f"every frame reads the final model's translation: {final.output}" in series.input_text
    rows = ["<s>", *final.output.split()]
    for frame in series.frames:  # ... is every frame's decoder input: same rows, same labels
        assert frame.heatmap.values.shape == final.heatmap.values.shape
        assert list(frame.heatmap.row_labels) == rows
    # while each snapshot's output line is what it writes on its own: the first snapshot not yet the translation
    assert series.frames[0].output != final.output
    # and the guided head is the default: its map goes from spread out to one source word per row
    peaks = [frame.heatmap.values.max(axis=1).mean() for frame in series.frames]
    assert series.head == 0 and peaks[0] < 0.5 < 0.8 < peaks[-1]


def test_grid_captions_never_run_into_the_next_map(qapp):
    from app.export.render import layout
    from scratchformer.exporting.snapshots import grid_columns, grid_figure

    assert [grid_columns(n) for n in (1, 5, 6, 7)] == [1, 5, 3, 4]
    series = snapshot_series("en-hi", "we are friends")
    lay = layout(grid_figure(series))
    assert lay.cols == len(series.frames)  # five frames: one row, wide like a slide
    assert all(lay.col_w >= p.row_w + p.title_w for p in lay.panels)


def test_animation_and_grid_files_for_reverse(series, tmp_path, qapp):
    from app.export.render import frames_renderer, renderer

    tasks = plan_snapshot_export(series, tmp_path, ["gif", "apng", "png", "svg", "pdf"], frames_renderer(1.0))
    result = ExportRun(tasks, tmp_path, renderer(1.0)).run()
    stem = series.stem()
    assert stem == f"reverse-cross-attention-L2-H{series.head + 1}"
    n = len(series.frames)
    for fmt in ("gif", "apng"):
        path = tmp_path / f"{stem}.{fmt}"
        frames = _frames(path)
        assert len(frames) == n
        assert len({f.size for f in frames}) == 1
        assert ImageChops.difference(frames[0], frames[-1]).getbbox() is not None  # the map changes
        assert all(ImageChops.difference(a, b).getbbox() for a, b in zip(frames, frames[1:]))  # no frame repeats
        with Image.open(path) as im:
            assert im.info.get("loop") == 0
            im.seek(n - 1)
            assert im.info["duration"] == LAST_FRAME_MS  # the final model is held longer
    with Image.open(tmp_path / f"{stem}-grid.png") as im:
        assert im.format == "PNG" and getattr(im, "n_frames", 1) == 1
    svg = (tmp_path / f"{stem}-grid.svg").read_text(encoding="utf-8")
    for frame in series.frames:
        assert f"step {frame.step}" in svg and frame.caption.split(" · ")[-1] in svg
    assert (tmp_path / f"{stem}-grid.pdf").read_bytes().startswith(b"%PDF")
    index = json.loads((tmp_path / "index.json").read_text(encoding="utf-8"))
    rows = {r["format"]: r for r in index["files"]}
    assert set(rows) == {"gif", "apng", "png", "svg", "pdf"} and rows["gif"]["head"] == series.head + 1
    assert len(result.files) == 5


def test_animation_frames_must_match_in_size():
    a, b = np.zeros((4, 5, 3), np.uint8), np.zeros((5, 5, 3), np.uint8)
    with pytest.raises(ValueError):
        encode_animation([a, b], "gif")


def test_choices_out_of_range_are_one_sentence():
    with pytest.raises(UserError, match="Head 9 does not exist; this model has heads 1 to 4"):
        snapshot_series("copy", "1 2", head=8)
    with pytest.raises(UserError, match="blog has no training snapshots"):
        snapshot_series("blog", "hello")


def test_cli_exports_snapshots_and_counts_layer_and_head_from_one(tmp_path, capsys, qapp):
    # qapp: the pytest-qt QApplication, so the command's renderer does not make a QGuiApplication that later
    # widget tests in this process would trip over
    out = tmp_path / "out"
    argv = ["export", "--snapshots", "--model", "reverse", "--source", SOURCE, "--attention", "self",
            "--layer", "1", "--head", "2", "--format", "apng,svg", "--scale", "1", "--out", str(out)]
    assert main(argv) == 0
    stem = "reverse-self-attention-L1-H2"
    assert len(_frames(out / f"{stem}.apng")) == len(snapshots_of("reverse")) + 1
    svg = (out / f"{stem}-grid.svg").read_text(encoding="utf-8")
    assert "Encoder self-attention, layer 1, head 2" in svg
    assert "7 frames" in capsys.readouterr().out
    assert main(argv) == 2  # no silent overwrite
    assert "already" in capsys.readouterr().err


def test_cli_refuses_a_model_without_snapshots_in_one_sentence(tmp_path, capsys):
    rc = main(["export", "--snapshots", "--model", "blog", "--source", "hello world", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.count("\n") == 0 and "Traceback" not in err and "no training snapshots" in err
    assert main(["export", "--model", "reverse", "--source", SOURCE, "--head", "1", "--out", str(tmp_path)]) == 2
    assert "--snapshots" in capsys.readouterr().err
