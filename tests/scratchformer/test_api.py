"""The Python API (`import scratchformer as sf`): a run reads like `trace --json --values`, its analyses return what
the commands' --json prints, plots draw the exporters' figures, and mistakes are one sentence or a KeyError."""

import json
import math
import re

import pytest
import torch

import scratchformer as sf
from scratchformer.cli import main

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def run():
    return sf.run("en-hi", SOURCE)


def cli_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _as_float(v):
    if isinstance(v, list):
        return [_as_float(x) for x in v]
    return float(v)  # "-inf" / "inf" / "nan" strings read back as floats


def test_every_step_equals_trace_json_values(run, capsys):
    out = cli_json(capsys, "trace", "--model", "en-hi", "--source", SOURCE, "--json", "--values")
    assert [r.name for r in run.steps] == [s["name"] for s in out["steps"]]
    assert out["translation"] == run.translation and run.translation
    for row, step in zip(run.steps, out["steps"]):
        assert (row.kind, list(row.shape), list(row.dims), row.title) == (
            step["kind"], step["shape"], step["dims"], step["title"])
        expected = torch.tensor(_as_float(step["values"]), dtype=torch.float64)
        got = run[row.name].to(torch.float64)
        assert got.shape == expected.shape
        assert torch.equal(torch.isinf(got), torch.isinf(expected)), row.name
        finite = torch.isfinite(expected)
        assert torch.allclose(got[finite], expected[finite], rtol=1e-6, atol=1e-7), row.name
    assert run.tokens["source"] == out["source_tokens"][0]


def test_analyses_return_what_the_commands_print(run, capsys):
    common = ("--model", "en-hi", "--source", SOURCE, "--json")
    assert run.lens() == cli_json(capsys, "lens", *common)
    assert run.rollout("flow") == cli_json(capsys, "rollout", "--method", "flow", *common)
    derived = run.derive("decoder.1.cross_attn.weights", (0, 2, 1, 3))
    assert derived == cli_json(capsys, "derive", *common, "decoder.1.cross_attn.weights", "0", "2", "1", "3")
    assert math.isclose(derived["value"], float(run["decoder.1.cross_attn.weights"][0, 2, 1, 3]), rel_tol=1e-6)
    attributed = run.attribute(1, method="grad-input")
    assert attributed == cli_json(capsys, "attribute", "--position", "1", "--method", "grad-input", *common)
    assert run.experiment("mask") == cli_json(capsys, "experiment", "mask", *common)
    swept = run.sweep(corrupt_word="1=boy", per_position=True)
    assert swept == cli_json(capsys, "sweep", "--corrupt-word", "1=boy", "--per-position", *common)
    assert swept["clean"] != swept["corrupt"] and swept["heads"][0]["position"] is not None
    against = run.diff("en-hi@step-000032")
    assert against == cli_json(capsys, "diff", "--against", "en-hi@step-000032", *common)
    assert against["first_difference"] == "src_embed.lookup" and run.diff(run)["first_difference"] is None
    assert run.trajectory() == cli_json(capsys, "trajectory", *common)
    assert run.head_metrics(pairs=4) == cli_json(capsys, "head-metrics", "--model", "en-hi", "--pairs", "4", "--json")


def test_an_unknown_step_names_the_closest(run):
    with pytest.raises(KeyError) as err:
        run["encoder.0.self_attn.attn_weights"]
    assert "encoder.0.self_attn.weights" in str(err.value)
    assert run[3] is run.step("src_embed.positional_encoding").tensor
    with pytest.raises(KeyError, match="out of range"):
        run[len(run)]
    assert "encoder.0.self_attn.weights" in run and "nothing" not in run


def test_a_failed_run_raises_the_command_lines_sentence(capsys):
    with pytest.raises(sf.UserError) as err:
        sf.run("no-such-model-anywhere", SOURCE)
    assert main(["trace", "--model", "no-such-model-anywhere", "--source", SOURCE]) == 2
    assert capsys.readouterr().err.strip() == f"scratchformer: {err.value}"
    with pytest.raises(sf.UserError, match="sentence"):
        sf.run("en-hi", "   ")


def test_plot_draws_the_export_figure_with_token_labels(run):
    svg = run.plot("decoder.0.cross_attn.weights", head=None)._repr_svg_()
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "Head 1" in texts and "Head 4" in texts  # every head, as the export draws it
    for token in ("girl", "apple", "लड़की"):
        assert token in texts
    one = run.plot("decoder.0.cross_attn.weights", head=2)
    one_texts = re.findall(r"<text[^>]*>([^<]*)</text>", one._repr_svg_())
    assert "Head 1" not in one_texts and any("head 3" in t for t in one_texts)
    assert one._repr_png_().startswith(b"\x89PNG")
    default = re.findall(r"<text[^>]*>([^<]*)</text>", run.plot("decoder.0.cross_attn.weights")._repr_svg_())
    assert any("head 1" in t for t in default) and "Head 2" not in default  # DESIGN.md: head=0 by default
    no_heads = run.plot("encoder.0.add_norm1.out")  # a step without heads: head 0 is its one map
    assert len(no_heads.figure.heatmaps) == 1


def test_plot_save_and_its_mistakes(run, tmp_path):
    plot = run.plot("encoder.0.self_attn.weights", head=0)
    written = plot.save(tmp_path / "map.pdf")
    assert written.read_bytes().startswith(b"%PDF")
    with pytest.raises(sf.UserError, match="does not exist"):
        plot.save(tmp_path / "missing" / "map.png")
    with pytest.raises(sf.UserError, match="suffix"):
        plot.save(tmp_path / "map.jpg")
    with pytest.raises(sf.UserError, match="head 9 is out of range"):
        run.plot("encoder.0.self_attn.weights", head=9)
    with pytest.raises(sf.UserError, match="batch 1 is out of range"):
        run.plot("encoder.0.self_attn.weights", batch=1)


def test_the_steps_table_prints_and_explains(run):
    table = run.steps
    assert table.names[0] == "src_embed.tokens" and len(table) == len(run)
    assert "decoder.1.cross_attn.weights" in repr(table) and "<table>" in table._repr_html_()
    text = run.explain("encoder.0.self_attn.weights")
    assert "6 × 6" in text  # this run's six source positions, in the words


def test_a_typed_target_is_teacher_forcing():
    forced = sf.run("en-hi", SOURCE, target="लड़की सेब खाती है")
    assert forced.translation == ""
    assert forced.tokens["target"][1:] == ["लड़की", "सेब", "खाती", "है"]


def test_show_embeds_the_page_and_saves_it(run, tmp_path):
    from scratchformer.page import read_page

    view = run.show()
    inline = view._repr_html_()
    assert "<iframe srcdoc=" in inline  # beside a picture for notebooks that drop it (test_notebook_output.py)
    written = view.save(tmp_path / "run.html")
    index, _chunks = read_page(written.read_text(encoding="utf-8"))
    assert [s["name"] for s in index["steps"]] == run.steps.names
    assert index["input"]["translation"] == run.translation == "लड़की सेब खाती है"
    with pytest.raises(sf.UserError, match="html"):
        view.save(tmp_path / "run.txt")


def test_show_can_carry_the_attribution_graph(run):
    from scratchformer.page import read_page

    assert read_page(run.show().html())[0]["graph"] is None
    index, _chunks = read_page(run.show(graph=True).html())
    ids = {n["id"] for n in index["graph"]["nodes"]}
    default = index["graph"]["levels"][index["graph"]["default"]]
    assert {index["graph"]["nodes"][i]["id"] for i in default["nodes"]} == {n["id"] for n in run.graph()["nodes"]}
    assert ids >= {n["id"] for n in run.graph()["nodes"]}


def test_the_pages_derive_hint_repeats_the_run_as_it_was_opened_and_read(run):
    """The page's hint (`scratchformer derive <these options>`) must reopen the same model — a folder by its path,
    not its display name — and read the decoder input the same way."""
    from scratchformer.page import read_page

    start_only = sf.run("en-hi", SOURCE, start_only=True)
    index, _chunks = read_page(start_only.show().html())
    assert index["run_args"] == "--model en-hi --source 'the girl eats an apple' --start-only"
    opened = sf.Run(run.bundle, run.inputs, run.trace, SOURCE, spec="/models/my en-hi copy")
    index, _chunks = read_page(opened.show().html())
    assert index["run_args"].startswith("--model '/models/my en-hi copy' --source")
