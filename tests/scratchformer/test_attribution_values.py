"""Attribution's parts worked out by hand: where Integrated Gradients places its path points (the midpoint rule on a
partition half even, half following f's change), the sum and difference reported for completeness, the JSON and
text it prints, and the one sentence of each refusal."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scratchformer.analyses import attribute
from scratchformer.errors import UserError


def test_a_linear_path_gets_evenly_spread_points():
    """f(α) = α changes evenly: the partition is even, the points are the midpoints (k + ½)/N, weights 1/N."""
    alphas, weights = attribute.path_points(lambda a: np.asarray(a), 4)
    np.testing.assert_allclose(alphas, [0.125, 0.375, 0.625, 0.875], atol=1e-12)
    np.testing.assert_allclose(weights, [0.25] * 4, atol=1e-12)


def test_a_jump_gets_half_the_pieces():
    """f jumps from 0 to 1 at α = 0.3. The grid cell holding the jump is cut until it is 1/16/8⁸ wide, and it
    carries half of the share (0.5·Δf/ΣΔf); the rest is 0.5·dα. With 4 pieces the cumulative share reaches 0.25
    and 0.5 inside the jump (0.5·0.3 = 0.15 before it, 0.65 after), and 0.75 at 0.3 + 0.1/0.5 = 0.5: breaks
    0, 0.3, 0.3, 0.5, 1."""
    calls = []

    def f_at(a):
        calls.append(len(a))
        return (np.asarray(a) >= 0.3).astype(float)

    alphas, weights = attribute.path_points(f_at, 4)
    np.testing.assert_allclose(alphas, [0.15, 0.3, 0.4, 0.75], atol=1e-4)
    np.testing.assert_allclose(weights, [0.3, 0.0, 0.2, 0.5], atol=1e-4)
    assert calls == [17] + [7] * 8  # an even grid of 4·4 + 1, then 8 rounds cutting one cell in 8


def test_a_cell_is_cut_only_when_it_holds_more_than_one_piece_of_the_change():
    """The rule is "more than 1/steps of f's total change": with one piece, a cell holding the whole jump holds
    exactly 1/1 of it and is left alone; with two pieces the same cell holds more than 1/2 and is cut."""
    for steps, want_calls in ((1, [5]), (2, [9] + [7] * 8)):
        calls = []

        def f_at(a, calls=calls):
            calls.append(len(a))
            return (np.asarray(a) >= 0.3).astype(float)

        attribute.path_points(f_at, steps)
        assert calls == want_calls, steps


def test_the_points_do_not_depend_on_the_units_of_f():
    """Half the pieces follow f's *share* of its total change: f in other units (×3, or shifted) gives the same
    points as the unit jump of test_a_jump_gets_half_the_pieces."""
    unit = attribute.path_points(lambda a: (np.asarray(a) >= 0.3).astype(float), 4)
    for f in (lambda a: 3.0 * (np.asarray(a) >= 0.3), lambda a: 7.0 - 0.25 * (np.asarray(a) >= 0.3)):
        got = attribute.path_points(f, 4)
        np.testing.assert_allclose(got[0], unit[0], atol=1e-12)
        np.testing.assert_allclose(got[1], unit[1], atol=1e-12)


def test_a_flat_path_is_spread_evenly():
    alphas, weights = attribute.path_points(lambda a: np.zeros(len(a)), 2)
    np.testing.assert_allclose(alphas, [0.25, 0.75])
    np.testing.assert_allclose(weights, [0.5, 0.5])


def _result(source):
    return attribute.Attribution("ig", 2, 7, "x", source, torch.tensor([0.5, -0.25]), -1.0, -3.0, 8, "pad",
                                 ["a", "b"], ["<s>", "c"], asked_steps=8, max_steps=1024)  # fmt: skip


def test_completeness_compares_the_sum_with_f_input_minus_f_baseline():
    a = _result(torch.tensor([1.0, 0.25]))
    assert a.total == pytest.approx(1.5) and a.delta == pytest.approx(2.0)
    assert _result(None).total == pytest.approx(0.25)


def test_the_dictionary_and_the_text_report():
    a = _result(torch.tensor([1.0, 0.25]))
    assert json.loads(json.dumps(a.to_dict())) == {
        "method": "ig", "position": 2, "token": {"id": 7, "token": "x"}, "source": [1.0, 0.25],
        "target": [0.5, -0.25], "completeness": {"sum": 1.5, "delta": 2.0, "f_input": -1.0, "f_baseline": -3.0},
        "steps": 8, "asked_steps": 8, "max_steps": 1024, "baseline": "pad", "source_tokens": ["a", "b"],
        "target_tokens": ["<s>", "c"]}  # fmt: skip
    assert attribute.text_report(a).split("\n") == [
        "log P(“x”) at decoder position 2: -1.0000 (Integrated Gradients, 8 steps, pad baseline)",
        "source:",
        "  a                +1.0000",
        "  b                +0.2500",
        "decoder input:",
        "  <s>              +0.5000",
        "  c                -0.2500",
        "completeness: attributions sum to +1.5000; f(input) − f(baseline) = +2.0000",
    ]
    g = _result(None)
    g.method = "grad-input"
    assert g.to_dict()["steps"] is None and g.to_dict()["source"] is None
    assert g.to_dict()["asked_steps"] is None and g.to_dict()["max_steps"] is None
    assert attribute.text_report(g).split("\n")[:2] == [
        "log P(“x”) at decoder position 2: -1.0000 (gradient × input, pad baseline)", "decoder input:"]  # fmt: skip


def test_requests_that_cannot_be_answered_are_refused_in_one_sentence():
    bundle = SimpleNamespace(config=SimpleNamespace(has_decoder=True))
    with pytest.raises(UserError, match=r"^Unknown method 'shap'; choose ig or grad-input\.$"):
        attribute.check_request(bundle, 3, 0, "shap", 8)
    with pytest.raises(UserError, match=r"^Position -1 is beyond the decoder input: it has 3 positions, 0 to 2\.$"):
        attribute.check_request(bundle, 3, -1, "ig", 8)
    attribute.check_request(bundle, 3, 2, "ig", 1)  # the last position, one step
    attribute.check_request(bundle, 3, 0, "grad-input", 0)  # steps mean nothing to gradient × input


def test_the_command_line_options_are_checked_before_the_model_loads(capsys, model_never_opened):
    """--position is required, --method and --baseline have fixed choices, and IG's --steps must be at least 1;
    all refused by the command line itself, before a model is opened."""
    import re

    from scratchformer.cli import main

    base = ["attribute", "--model", "en-hi", "--source", "the girl eats"]
    for extra, says in ((["--method", "ig"], "the following arguments are required: --position"),
                        (["--position", "1", "--method", "shap"], r"invalid choice: 'shap' \(choose from '?ig'?"),
                        (["--position", "1", "--baseline", "mean"], r"invalid choice: 'mean' \(choose from '?zero'?")):
        with pytest.raises(SystemExit) as exit_:
            main([*base, *extra])
        assert exit_.value.code == 2 and re.search(says, capsys.readouterr().err), extra
    assert main([*base, "--position", "1", "--steps", "0"]) == 2
    assert capsys.readouterr().err.strip() == "scratchformer: Integrated Gradients needs at least 1 step, not 0."


def test_the_command_runs_ig_with_the_steps_and_item_asked_for(capsys, tmp_path):
    """--steps 1 is allowed for IG, --steps 0 means nothing to gradient × input; --item 2 attributes the second
    window of a batch; the table and the JSON (Hindi kept as itself) both come out."""
    from scratchformer.cli import main
    from scratchformer.loading.bundle import load_model

    text = tmp_path / "two.txt"
    text.write_text("the girl eats an apple the boy reads a book", encoding="utf-8")
    args = ["attribute", "--model", "en-hi", "--text-file", str(text), "--seq-len", "4", "--batch", "2",
            "--position", "0"]  # fmt: skip
    assert main([*args, "--steps", "1", "--max-steps", "1", "--item", "2", "--json"]) == 0
    raw = capsys.readouterr().out
    out = json.loads(raw)
    bundle = load_model("en-hi")
    inputs = bundle.prepare_windows(text.read_text(encoding="utf-8"), 4, 2)
    _, trace = bundle.run(inputs)
    want = attribute.compute(bundle, inputs, trace, 0, "ig", 1, batch=1, max_steps=1)
    assert (out["steps"], out["asked_steps"], out["max_steps"]) == (1, 1, 1)
    assert out["source_tokens"] == trace.source_tokens[1]
    np.testing.assert_allclose(out["source"], want.source.numpy(), rtol=1e-4, atol=1e-6)
    assert any(ord(ch) > 127 for ch in out["token"]["token"]) and "\\u" not in raw
    assert main([*args, "--method", "grad-input", "--steps", "0"]) == 0
    table = capsys.readouterr().out.split("\n")
    assert table[0].startswith("log P(“") and "(gradient × input, zero baseline)" in table[0]
    assert table[1] == "source:" and table[-2].startswith("completeness: attributions sum to ")
