"""`scratchformer experiment NAME` prints a table, and with --json the result itself. Each table is checked line by
line against the layout the command promises, built here from the experiment's own JSON: a 28-character label
column after two spaces, 14-character number columns, four significant figures (two, in exponent form, below one
thousandth), a dash where there is no number. The options are checked to reach the controls they name."""

from __future__ import annotations

import json

import pytest

from scratchformer.cli import main
from scratchformer.experiments import run_experiment

# the number and row formats are pinned character by character in the first test; the others use them to
# say which value goes where
from scratchformer.experiments.command import _num as cell
from scratchformer.experiments.command import _row as row
from scratchformer.experiments.command import text_report
from scratchformer.loading.bundle import load_model
from scratchformer.loading.model_bundle import ModelBundle

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def head(r: dict) -> list[str]:
    return [f"{r['experiment']} on {r['model']}: {r['claim']}", f"source: {r['source']}"]


def test_the_layout_written_out_character_by_character():
    r = {"experiment": "norm", "model": "m", "claim": "c", "source": "s", "summary": "S.", "notes": ["n."],
         "layernorm": {"change_from_other_items": 0.0, "padding_shift": 0.0},
         "batchnorm": {"change_from_other_items": 0.123456, "padding_shift": 0.00012345}}  # fmt: skip
    assert text_report(r).split("\n") == [
        "norm on m: c",
        "source: s",
        "  " + " " * 28 + "    other item" + "       padding",
        "  LayerNorm" + " " * 19 + " " * 13 + "0" + " " * 13 + "0",
        "  BatchNorm" + " " * 19 + " " * 8 + "0.1235" + " " * 6 + "1.23e-04",
        "note: n.",
        "S.",
    ]
    r = {"experiment": "order", "model": "m", "claim": "c", "source": "s", "summary": "S.", "shuffled_tokens": ["b"],
         "with_pe": {"max_diff_after_unpermuting": 12345.6, "max_diff_in_place": None},
         "without_pe": {"max_diff_after_unpermuting": -2.5e-5, "max_diff_in_place": 1e-3}}  # fmt: skip
    assert (cell(None), cell(1e-3), cell(-2.5e-5), cell("x")) == ("—", "0.001", "-2.50e-05", "x")
    assert row("ab", "c") == "  ab" + " " * 26 + " " * 13 + "c"
    assert text_report(r).split("\n")[2:5] == [
        "  " + " " * 28 + "      put back" + "      in place",
        "  with positional encoding    " + " " * 5 + "1.235e+04" + " " * 13 + "—",
        "  without it" + " " * 18 + " " * 5 + "-2.50e-05" + " " * 9 + "0.001",
    ]


def test_scaling_mask_order_and_norm_tables(en_hi):
    r = run_experiment("scaling", en_hi, SOURCE, d_k=16)
    m = r["model_qk"]
    stats = lambda s: (cell(s["max_weight"]), cell(s["entropy"]), cell(s["mean_abs_gradient"]))  # noqa: E731
    assert text_report(r).split("\n") == [
        *head(r),
        row(f"random q, k ({r['samples']}×{r['keys']})", "max weight", "entropy", "|∂softmax|"),
        *[row(f"d_k {x['d_k']:>4}  {side}", *stats(x[side])) for x in r["rows"] for side in ("unscaled", "scaled")],
        f"the model's own q and k ({m['attention']}, d_k {m['d_k']}, {m['heads']} heads):",
        row("unscaled", *stats(m["unscaled"])),
        row("scaled", *stats(m["scaled"])),
        r["summary"],
    ]
    assert [x["d_k"] for x in r["rows"]] == [8, 16, 64, 512]
    r = run_experiment("mask", en_hi, SOURCE)
    assert text_report(r).split("\n") == [
        *head(r),
        row("", "max change from a later token"),
        row("with the causal mask", cell(r["with_mask"]["max_change_from_future"])),
        row("without it", cell(r["without_mask"]["max_change_from_future"])),
        "decoder input: " + " ".join(r["decoder_tokens"]),
        r["summary"],
    ]
    r = run_experiment("order", en_hi, SOURCE, seed=2)
    rows = [(k, label) for k, label in (("with_pe", "with positional encoding"), ("without_pe", "without it"))]
    assert text_report(r).split("\n") == [
        *head(r),
        row("", "put back", "in place"),
        *[row(label, cell(r[k]["max_diff_after_unpermuting"]), cell(r[k]["max_diff_in_place"])) for k, label in rows],
        "shuffled source: " + " ".join(r["shuffled_tokens"]),
        r["summary"],
    ]
    r = run_experiment("norm", en_hi, SOURCE)
    assert text_report(r).split("\n") == [
        *head(r),
        row("", "other item", "padding"),
        *[row(label, cell(r[k]["change_from_other_items"]), cell(r[k]["padding_shift"]))
          for k, label in (("layernorm", "LayerNorm"), ("batchnorm", "BatchNorm"))],  # fmt: skip
        r["summary"],
    ]


def test_teacher_forcing_and_temperature_tables(en_hi):
    r = run_experiment("teacher_forcing", en_hi, SOURCE)
    n = len(r["reference"]["tokens"])
    marked = lambda k: [f"{t}{'' if ok else ' ✗'}" for t, ok in zip(r[k]["predicted"], r[k]["correct"])]  # noqa: E731
    assert not all(r["free_running"]["correct"])  # so a ✗ shows
    assert text_report(r).split("\n") == [
        *head(r),
        f"snapshot: {r['snapshot']['spec']}; reference: {r['reference']['text']}",
        row("position", *[str(i) for i in range(1, n + 1)]),
        row("reference", *r["reference"]["tokens"]),
        row(f"teacher forcing ({r['teacher_forced']['accuracy']:.0%})", *marked("teacher_forced")),
        row(f"free-running ({r['free_running']['accuracy']:.0%})", *marked("free_running")),
        row("by snapshot", "teacher", "free"),
        *[row(f"step {s['step']}", cell(s["teacher_forced"]), cell(s["free_running"])) for s in r["snapshots"]],
        r["summary"],
    ]
    # a model without snapshots: no snapshot rows, and the note saying what was decoded instead
    alone = ModelBundle(en_hi.model, en_hi.src_tokenizer, en_hi.tgt_tokenizer, "en-hi copy", "preset")
    r = run_experiment("teacher_forcing", alone, SOURCE)
    lines = text_report(r).split("\n")
    assert r["snapshots"] == [] and not any(line.startswith("  by snapshot") for line in lines)
    assert lines[-2:] == [f"note: {r['notes'][0]}", r["summary"]] and len(r["notes"]) == 1
    r = run_experiment("temperature", en_hi, SOURCE, temperature=2.0, seed=5)
    t = r["next_token"]
    assert text_report(r).split("\n") == [
        *head(r),
        row("T = 2", "entropy", "top p"),
        row("next token", cell(t["entropy"]), cell(t["top_probability"])),
        row("at T = 1", cell(r["at_1"]["entropy"]), cell(r["at_1"]["top_probability"])),
        "top tokens: " + ", ".join(f"{x['token']} {x['p']:.3f}" for x in t["top"]),
        f"greedy:  {r['greedy']['text']}",
        f"sampled: {r['sampled']['text']}  (seed 5)",
        r["summary"],
    ]


def test_the_command_prints_the_table_or_the_json_of_the_controls_it_was_given(en_hi, capsys):
    args = ["experiment", "norm", "--model", "en-hi", "--source", SOURCE, "--seed", "3"]
    assert main(args) == 0
    assert capsys.readouterr().out == text_report(run_experiment("norm", en_hi, SOURCE, seed=3)) + "\n"
    for name, options, controls in [
        ("scaling", ["--d-k", "16", "--seed", "3"], {"d_k": 16, "seed": 3}),
        ("temperature", ["--temperature", "2.5", "--position", "1", "--seed", "4"],
         {"temperature": 2.5, "position": 1, "seed": 4}),
        ("teacher-forcing", ["--snapshot", "64", "--target", "लड़की सेब खाती है"], {"snapshot": 64}),
    ]:  # fmt: skip
        assert main(["experiment", name, "--model", "en-hi", "--source", SOURCE, *options, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert {k: out["controls"][k] for k in controls} == controls, name
    assert out["target"] == "लड़की सेब खाती है" and out["snapshot"]["step"] == 64
    # the source given, else the model's first example; the JSON keeps the Hindi readable, not \u-escaped
    assert en_hi.examples()[0].source != "we are friends"
    assert main(["experiment", "mask", "--model", "en-hi", "--source", "we are friends", "--json"]) == 0
    text = capsys.readouterr().out
    assert json.loads(text)["source"] == "we are friends" and json.loads(text)["decoder_tokens"][1] in text
    assert main(["experiment", "mask", "--model", "en-hi", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == en_hi.examples()[0].source


def test_an_option_of_another_experiment_is_refused_with_this_ones_controls(capsys):
    assert main(["experiment", "mask", "--model", "en-hi", "--source", SOURCE, "--d-k", "8"]) == 2
    assert capsys.readouterr().err.strip() == ("scratchformer: --d-k does not apply to the mask experiment; its "
                                               "controls are seed.")  # fmt: skip
    assert main(["experiment", "teacher_forcing", "--model", "en-hi", "--source", SOURCE, "--seed", "1"]) == 2
    assert capsys.readouterr().err.strip() == ("scratchformer: --seed does not apply to the teacher_forcing "
                                               "experiment; its controls are snapshot.")  # fmt: skip
    assert main(["experiment", "temperature", "--model", "en-hi", "--source", SOURCE, "--snapshot", "1"]) == 2
    assert capsys.readouterr().err.strip() == ("scratchformer: --snapshot does not apply to the temperature "
                                               "experiment; its controls are temperature, seed, position.")  # fmt: skip
