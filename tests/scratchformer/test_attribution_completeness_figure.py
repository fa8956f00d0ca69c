"""Integrated Gradients' "% from complete", 100 · |Σ attributions − Δ| / |Δ| with Δ = f(input) − f(baseline),
computed here by hand in float64 from the attributions and the two log-probabilities an answer returns, and
compared with every place the figure is given: the answer's gap, the steps text (the command's first line, the
window's caption), each try the refinement reports as falling short, and the command line's text and JSON."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from scratchformer.analyses import attribute
from scratchformer.cli import main
from scratchformer.loading.bundle import load_model

RAN_OUT = re.compile(r"until the budget of (\d+) ran out (\d+\.\d)% from complete$")


@pytest.fixture(scope="module")
def first_example():
    bundle = load_model("en-hi")
    source = bundle.examples()[0].source
    inputs = bundle.prepare_run(source, "", False)
    _, trace = bundle.run(inputs, keep_output=False)
    return bundle, inputs, trace, source


def positions(trace) -> range:
    return range(trace["tgt_embed.tokens"].shape[-1])


def percent_from_complete(source, target, f_input: float, f_baseline: float) -> float:
    """The figure by hand: the attributions summed in float64, against f(input) − f(baseline)."""
    total = float(np.sum(np.asarray(target, dtype=np.float64)))
    if source is not None:
        total += float(np.sum(np.asarray(source, dtype=np.float64)))
    delta = float(np.float64(f_input) - np.float64(f_baseline))
    return 100.0 * abs(total - delta) / abs(delta)


def shown_as(figure: str, percent: float) -> None:
    """A figure printed to one decimal is the hand computation rounded (half a unit of the last digit apart)."""
    assert abs(float(figure) - percent) <= 0.05 + 1e-9, (figure, percent)


@pytest.fixture(scope="module")
def short_budget(first_example):
    """Two points, doubled once to four: most positions stay far from complete."""
    bundle, inputs, trace, _ = first_example
    return [attribute.compute(bundle, inputs, trace, p, steps=2, max_steps=4) for p in positions(trace)]


def test_the_gap_is_the_missed_share_of_f_input_minus_f_baseline(short_budget):
    for a in short_budget:
        hand = percent_from_complete(a.source, a.target, a.f_input, a.f_baseline)
        assert a.delta == pytest.approx(a.f_input - a.f_baseline, rel=1e-12)
        assert a.gap == pytest.approx(hand / 100, rel=1e-6, abs=1e-9)
        assert a.complete_enough == (hand <= 1.0 or abs(a.total - a.delta) <= attribute.ABSOLUTE_TOLERANCE)


def test_the_steps_text_gives_the_figure_in_percent(short_budget):
    far = [a for a in short_budget if not a.complete_enough]
    hands = [percent_from_complete(a.source, a.target, a.f_input, a.f_baseline) for a in far]
    assert far and max(hands) > 5  # far enough off that a wrong denominator or a lost ×100 shows
    for a, hand in zip(far, hands):
        found = RAN_OUT.search(a.steps_text())
        assert found, a.steps_text()
        assert found.group(1) == "4"
        shown_as(found.group(2), hand)


def test_each_try_that_falls_short_reports_its_own_figure(first_example):
    """The refinement's reports (the window's "missed completeness by …") against the same number of points run
    on its own and measured by hand."""
    bundle, inputs, trace, _ = first_example
    told: list[tuple[int, float]] = []
    for p in positions(trace):
        attribute.compute(bundle, inputs, trace, p, steps=4, max_steps=16, progress=lambda s, g: told.append((s, g)))
        if told:
            break
    assert told, "four to sixteen points should fall short somewhere"
    for steps, gap in told:
        alone = attribute.compute(bundle, inputs, trace, p, steps=steps, max_steps=steps)
        hand = percent_from_complete(alone.source, alone.target, alone.f_input, alone.f_baseline)
        assert gap == pytest.approx(hand / 100, rel=1e-6)
        assert hand > 100 * attribute.TOLERANCE  # it fell short: that is why it was reported


def test_the_command_lines_text_and_json_agree_with_the_hand_figure(first_example, short_budget, capsys):
    _, _, trace, source = first_example
    position = next(a.position for a in short_budget if not a.complete_enough)
    base = ["attribute", "--model", "en-hi", "--source", source, "--position", str(position), "--steps", "2",
            "--max-steps", "4"]  # fmt: skip
    assert main([*base, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    c = out["completeness"]
    hand = percent_from_complete(out["source"], out["target"], c["f_input"], c["f_baseline"])
    assert c["sum"] == pytest.approx(sum(out["source"]) + sum(out["target"]), rel=1e-6, abs=1e-9)
    assert c["delta"] == pytest.approx(c["f_input"] - c["f_baseline"], rel=1e-12)
    assert main(base) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    found = re.search(r"until the budget of 4 ran out (\d+\.\d)% from complete, zero baseline\)$", lines[0])
    assert found, lines[0]
    shown_as(found.group(1), hand)
    last = re.fullmatch(r"completeness: attributions sum to ([-+]\d+\.\d{4}); f\(input\) − f\(baseline\) = "
                        r"([-+]\d+\.\d{4})", lines[-1])  # fmt: skip
    assert last, lines[-1]
    assert float(last.group(1)) == pytest.approx(c["sum"], abs=5e-5)
    assert float(last.group(2)) == pytest.approx(c["delta"], abs=5e-5)
