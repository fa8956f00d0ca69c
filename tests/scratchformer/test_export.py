"""Exporting without Qt: which maps and steps, npz/csv contents, index, atomic writes, overwrite and errors."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.exporting import (
    ExportRun,
    atomic_write,
    attention_maps,
    check_name,
    plan_export,
    plan_tensors,
    prepare_folder,
    steps_for,
)
from scratchformer.exporting.job import parse_formats
from scratchformer.exporting.tensors import read_csv
from scratchformer.loading.bundle import load_model

SOURCE, TARGET = "machine learning using PyTorch", "the answer"


@pytest.fixture(scope="module")
def bundle():
    return load_model("blog")


@pytest.fixture(scope="module")
def trace(bundle):
    _, trace = bundle.run(bundle.prepare(SOURCE, TARGET))
    return trace


def test_attention_maps_cover_every_layer_head_and_type(trace):
    items = attention_maps(trace)
    # blog: 1 encoder + 1 decoder layer, 2 heads; encoder self, decoder self, cross.
    assert len(items) == 3 * 2
    assert len({i.filename for i in items}) == len(items)
    got = {(i.attention_type, i.layer, i.head) for i in items}
    types = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
    assert got == {(t, 1, h) for t in types for h in (1, 2)}
    s, t = len(trace.source_tokens[0]), len(trace.target_tokens[0])
    shapes = {i.attention_type: i.shape for i in items}
    assert shapes == {"encoder.self_attn": (s, s), "decoder.self_attn": (t, t), "decoder.cross_attn": (t, s)}
    cross = next(i for i in items if i.attention_type == "decoder.cross_attn" and i.head == 2)
    assert cross.filename == "decoder_cross_attn_layer01_head02"
    want = trace["decoder.0.cross_attn.weights"].tensor[0, 1].numpy()
    np.testing.assert_array_equal(cross.heatmap.values, want)
    assert cross.heatmap.row_labels == trace.target_tokens[0]
    assert cross.heatmap.col_labels == trace.source_tokens[0]


def test_steps_for_keywords_names_and_patterns(trace):
    assert [s.name for s in steps_for(trace, "attention")] == [s.name for s in trace.attention_steps()]
    assert len(steps_for(trace, ["all"])) == len(trace)
    picked = steps_for(trace, ["decoder.0.ffn.out", "encoder.0.self_attn.q"])
    assert [s.name for s in picked] == ["encoder.0.self_attn.q", "decoder.0.ffn.out"]  # trace order
    assert [s.name for s in steps_for(trace, ["*.cross_attn.weights"])] == ["decoder.0.cross_attn.weights"]
    with pytest.raises(UserError, match="No step of this run is called 'encoder.9.ffn.out'"):
        steps_for(trace, ["encoder.9.ffn.out"])
    with pytest.raises(UserError):
        steps_for(trace, [])


def test_parse_formats():
    assert parse_formats("png, svg,npz,png") == ["png", "svg", "npz"]
    with pytest.raises(UserError, match="Unknown export format 'gif'"):
        parse_formats("png,gif")


def test_npz_holds_the_trace_tensors_labels_and_dims(trace, tmp_path):
    steps = steps_for(trace, "all")
    result = ExportRun(plan_tensors(trace, tmp_path / "trace.npz", steps), tmp_path, index=False).run()
    assert result.files == [tmp_path / "trace.npz"]
    with np.load(tmp_path / "trace.npz") as z:  # no allow_pickle: everything is plain arrays
        assert list(z["steps"]) == trace.names()
        for s in trace:
            np.testing.assert_array_equal(z[s.name], s.tensor.numpy())
            assert z[s.name].dtype == s.tensor.numpy().dtype
            assert tuple(z[f"dims:{s.name}"]) == s.dims
            assert str(z[f"kind:{s.name}"]) == s.kind
        assert z["source_tokens"].tolist() == trace.source_tokens
        assert z["target_tokens"].tolist() == trace.target_tokens


def test_csv_round_trips_labels_and_values_including_minus_infinity(trace, tmp_path):
    step = trace["decoder.0.self_attn.masked_scores"]  # causal: −∞ above the diagonal
    tasks = plan_tensors(trace, tmp_path / "scores.csv", [step])
    ExportRun(tasks, tmp_path, index=False).run()
    for head in range(2):
        rows, cols, values = read_csv(tmp_path / f"scores.head{head + 1}.csv")
        assert rows == trace.target_tokens[0] and cols == trace.target_tokens[0]
        want = step.tensor[0, head].numpy()
        assert np.isneginf(want).any()
        np.testing.assert_array_equal(values, want)  # exact: float32 written as shortest round-trip text


def test_export_all_formats_without_qt_writes_index(trace, tmp_path):
    tasks = plan_export(trace, tmp_path, ["csv", "npz"], "attention")
    result = ExportRun(tasks, tmp_path).run()
    assert len(result.files) == 6 + 1
    index = json.loads((tmp_path / "index.json").read_text(encoding="utf-8"))
    assert [row["file"] for row in index["files"]] == [p.name for p in result.files]
    csv_rows = (tmp_path / "index.csv").read_text(encoding="utf-8").splitlines()
    assert csv_rows[0].startswith("file,format,step,kind,attention_type,layer,head")
    assert len(csv_rows) == 1 + len(result.files)
    row = next(r for r in index["files"] if r["file"] == "decoder_cross_attn_layer01_head02.csv")
    t, s = len(trace.target_tokens[0]), len(trace.source_tokens[0])
    assert (row["layer"], row["head"], row["attention_type"], row["rows"], row["cols"]) == (
        1, 2, "decoder.cross_attn", t, s)  # fmt: skip
    _, _, values = read_csv(tmp_path / row["file"])
    np.testing.assert_array_equal(values, trace["decoder.0.cross_attn.weights"].tensor[0, 1].numpy())
    with np.load(tmp_path / "attention.npz") as z:
        assert list(z["steps"]) == [s.name for s in trace.attention_steps()]


def test_steps_export_one_csv_per_head_and_vocab_columns_complete(bundle, trace, tmp_path):
    tasks = plan_export(trace, tmp_path, ["csv"], ["encoder.0.self_attn.q", "generator.logits"], 0,
                        bundle.tgt_tokenizer.token_strings)  # fmt: skip
    ExportRun(tasks, tmp_path).run()
    names = sorted(p.name for p in tmp_path.glob("*.csv") if p.name != "index.csv")
    assert names == ["encoder.0.self_attn.q.head1.csv", "encoder.0.self_attn.q.head2.csv", "generator.logits.csv"]
    rows, cols, values = read_csv(tmp_path / "generator.logits.csv")
    assert values.shape == (len(trace.target_tokens[0]), 50257)
    assert cols[50256] == "<|endoftext|>"
    np.testing.assert_array_equal(values, trace["generator.logits"].tensor[0].numpy())


def test_existing_files_are_not_overwritten_silently(trace, tmp_path):
    tasks = plan_export(trace, tmp_path, ["csv"], "attention")
    ExportRun(tasks, tmp_path).run()
    victim = tmp_path / "encoder_self_attn_layer01_head01.csv"
    victim.write_text("mine", encoding="utf-8")
    with pytest.raises(UserError, match=r"already holds 8 of the files .*--overwrite"):
        ExportRun(plan_export(trace, tmp_path, ["csv"], "attention"), tmp_path)
    assert victim.read_text(encoding="utf-8") == "mine"
    ExportRun(plan_export(trace, tmp_path, ["csv"], "attention"), tmp_path, overwrite=True).run()
    assert victim.read_text(encoding="utf-8").startswith("src_pos \\ src_pos,")


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".part")]


def test_atomic_write_leaves_no_partial_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "a.csv"

    def half_then_fail(f):
        f.write(b"half of it")
        raise RuntimeError("renderer crashed")

    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_fail)
    assert not target.exists() and _leftovers(tmp_path) == []
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_fail, overwrite=True)
    assert target.read_bytes() == b"old" and _leftovers(tmp_path) == []
    assert atomic_write(target, lambda f: f.write(b"new!"), overwrite=True) == 4
    assert target.read_bytes() == b"new!"
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # not the temporary file's private mode


def test_full_disk_is_one_sentence_and_leaves_nothing(tmp_path):
    def disk_full(f):
        f.write(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(UserError) as info:
        atomic_write(tmp_path / "map.png", disk_full)
    assert str(info.value) == f"The disk is full; nothing was written to {tmp_path / 'map.png'}."
    assert list(tmp_path.iterdir()) == []


def test_unwritable_folder_is_one_sentence(tmp_path, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", denied)  # root ignores chmod, so simulate the OS's answer
    with pytest.raises(UserError, match=r"^Cannot write to the folder .* \(permission denied\); choose another"):
        atomic_write(tmp_path / "x.csv", lambda f: None)
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(UserError, match="permission denied"):
        prepare_folder(tmp_path)


def test_invalid_names_and_missing_folders(tmp_path):
    for bad in ["", "a/b.png", "nul\0.png", "x" * 300 + ".png", "tab\there.png"]:
        with pytest.raises(UserError, match="is not a valid file name"):
            check_name(bad)
    check_name("लड़का 😀.png")
    made = prepare_folder(tmp_path / "new")
    assert made.is_dir()
    with pytest.raises(UserError, match="Neither the folder .* nor its parent .* exists"):
        prepare_folder(tmp_path / "missing" / "deeper")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file, not a folder"):
        prepare_folder(tmp_path / "file")


def test_cli_exports_tensors_headless_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "out"  # missing, but its parent exists: created
    argv = ["export", "--model", "blog", "--source", SOURCE, "--target", TARGET, "--out", str(out),
            "--format", "npz,csv", "--steps", "encoder.0.self_attn.weights", "decoder.*.cross_attn.weights"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert str(out.resolve()) in printed and "Wrote" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "decoder.0.cross_attn.weights.head1.csv", "decoder.0.cross_attn.weights.head2.csv",
        "encoder.0.self_attn.weights.head1.csv", "encoder.0.self_attn.weights.head2.csv",
        "index.csv", "index.json", "tensors.npz"]  # fmt: skip
    assert main(argv) == 2
    assert "already holds" in capsys.readouterr().err
    assert main(argv + ["--overwrite"]) == 0
    assert main(["export", "--model", "blog", "--source", SOURCE, "--out", str(tmp_path / "a" / "b")]) == 2
    assert "Neither the folder" in capsys.readouterr().err


def test_tensor_export_never_imports_qt(tmp_path):
    code = (
        "import sys; from scratchformer.cli import main; "
        f"rc = main(['export', '--model', 'blog', '--source', 'hello world', '--out', {str(tmp_path)!r}, "
        "'--format', 'npz,csv']); "
        "assert rc == 0, rc; "
        "bad = [m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph', 'app'))]; "
        "assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "attention.npz").is_file()


def test_a_parent_that_takes_no_new_folders_is_named(tmp_path, monkeypatch):
    """/proc on Linux answers mkdir with ENOENT although it exists: say so, not "does not exist"."""
    import errno as errno_module
    from pathlib import Path

    from scratchformer.errors import UserError
    from scratchformer.exporting.files import prepare_folder

    def refuse(self, *args, **kwargs):
        raise FileNotFoundError(errno_module.ENOENT, "No such file or directory")

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(UserError, match=f"Cannot create a folder in {tmp_path}"):
        prepare_folder(tmp_path / "new")


def test_the_index_explains_every_file_it_lists(bundle, trace, tmp_path):
    from scratchformer.explain import explain_step, explainer

    explain = explainer(trace, bundle.config, 0, bundle.tgt_tokenizer.token_strings)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ExportRun(plan_export(trace, tmp_path / "a", ["csv"], "attention", explain=explain), tmp_path / "a").run()
    rows = json.loads((tmp_path / "a" / "index.json").read_text(encoding="utf-8"))["files"]
    cross = next(r for r in rows if r["step"] == "decoder.0.cross_attn.weights")
    expected = explain_step(trace, "decoder.0.cross_attn.weights", bundle.config, 0, bundle.tgt_tokenizer.token_strings)
    assert cross["explanation"] == expected.text()
    assert "keys and values from the encoder output" in cross["explanation"]
    steps = ["encoder.0.self_attn.scaled_scores", "encoder.0.add_norm1.out"]
    ExportRun(plan_export(trace, tmp_path / "b", ["csv"], steps, explain=explain), tmp_path / "b").run()
    rows = json.loads((tmp_path / "b" / "index.json").read_text(encoding="utf-8"))["files"]
    assert all(r["explanation"] for r in rows) and any("d_k = 3" in r["explanation"] for r in rows)
