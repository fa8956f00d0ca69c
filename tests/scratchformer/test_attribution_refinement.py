"""Integrated Gradients at its defaults is complete within 1 %: 64 points are the first answer, kept where they
already are within it; elsewhere the points are doubled until they are, or until the budget of points runs out,
and the answer says which happened."""

from __future__ import annotations

import json

import pytest
import torch

from scratchformer.analyses import attribute
from scratchformer.loading.bundle import load_model


@pytest.fixture(scope="module")
def first_example():
    """en-hi's first example as the window and the command line run it: the model's own translation behind <s>."""
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run(bundle.examples()[0].source, "", False)
    _, trace = bundle.run(inputs, keep_output=False)
    return bundle, inputs, trace


def _within(a, share):
    return abs(a.total - a.delta) <= share * abs(a.delta)


def test_the_defaults_are_complete_within_one_percent_at_every_position(first_example):
    bundle, inputs, trace = first_example
    refined = 0
    for position in range(trace["tgt_embed.tokens"].shape[-1]):
        got = attribute.compute(bundle, inputs, trace, position)
        assert _within(got, 0.01), (position, got.total, got.delta, got.steps)
        first = attribute.compute(bundle, inputs, trace, position, max_steps=attribute.DEFAULT_STEPS)
        assert first.steps == first.asked_steps == attribute.DEFAULT_STEPS == got.asked_steps
        if _within(first, 0.01):  # 64 points were enough: the fast first answer is the answer
            assert got.steps == 64 and torch.equal(got.target, first.target)
            assert got.steps_text() == "64 steps"
        else:  # doubled until within 1 %: 128, 256, …, each a power of two times 64, within the budget
            refined += 1
            assert got.steps in (128, 256, 512, 1024) and got.max_steps == attribute.MAX_STEPS
            assert got.steps_text() == f"{got.steps} steps, refined from 64 until within 1%"
            half = attribute.compute(bundle, inputs, trace, position, max_steps=got.steps // 2)
            assert not _within(half, 0.01)  # it stopped at the first doubling that was enough
    assert refined  # en-hi's first example needs more than 64 points somewhere (5 % off at 64 before)


def test_when_the_budget_runs_out_first_the_answer_says_how_far_from_complete_it_is(first_example):
    bundle, inputs, trace = first_example
    n = trace["tgt_embed.tokens"].shape[-1]
    short = [attribute.compute(bundle, inputs, trace, p, steps=2, max_steps=4) for p in range(n)]
    missed = [a for a in short if not _within(a, 0.01)]
    assert missed, "two to four points should leave some position more than 1 % from complete"
    for a in missed:
        assert (a.steps, a.asked_steps, a.max_steps) == (4, 2, 4) and not a.complete_enough
        assert a.steps_text() == f"4 steps, refined from 2 until the budget of 4 ran out {a.gap:.1%} from complete"
    same = attribute.compute(bundle, inputs, trace, 0, steps=8, max_steps=8)
    assert same.steps == 8 and same.steps_text() == "8 steps"  # a budget equal to the steps: no refinement


def test_a_budget_below_the_steps_asked_is_the_steps_asked(first_example):
    bundle, inputs, trace = first_example
    got = attribute.compute(bundle, inputs, trace, 1, steps=16, max_steps=4)
    assert (got.steps, got.asked_steps, got.max_steps) == (16, 16, 16)


def test_gradient_times_input_is_one_gradient_and_never_claims_completeness(first_example):
    bundle, inputs, trace = first_example
    got = attribute.compute(bundle, inputs, trace, 1, "grad-input")
    assert (got.steps, got.asked_steps, got.max_steps) == (1, 1, 1)
    assert not got.complete_enough and got.steps_text() == "one gradient"


def test_the_command_reports_the_steps_used_and_the_budget(capsys):
    from scratchformer.cli import main

    bundle = load_model("en-hi")
    source = bundle.examples()[0].source
    base = ["attribute", "--model", "en-hi", "--source", source]
    inputs = bundle.prepare_run(source, "", False)
    _, trace = bundle.run(inputs, keep_output=False)
    position = next(p for p in range(trace["tgt_embed.tokens"].shape[-1])
                    if attribute.compute(bundle, inputs, trace, p).steps > 64)  # fmt: skip
    want = attribute.compute(bundle, inputs, trace, position)
    assert main([*base, "--position", str(position), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["steps"], out["asked_steps"], out["max_steps"]) == (want.steps, 64, 1024)
    gap = abs(out["completeness"]["sum"] - out["completeness"]["delta"])
    assert gap <= 0.01 * abs(out["completeness"]["delta"])
    assert main([*base, "--position", str(position), "--max-steps", "64"]) == 0
    first = capsys.readouterr().out.split("\n")[0]
    assert "(Integrated Gradients, 64 steps, zero baseline)" in first
    assert main([*base, "--position", str(position)]) == 0
    first = capsys.readouterr().out.split("\n")[0]
    assert f"(Integrated Gradients, {want.steps} steps, refined from 64 until within 1%, zero baseline)" in first


def test_each_try_that_falls_short_is_reported_and_a_cancel_stops_the_work(first_example):
    bundle, inputs, trace = first_example
    position = next(p for p in range(trace["tgt_embed.tokens"].shape[-1])
                    if attribute.compute(bundle, inputs, trace, p).steps > 64)  # fmt: skip
    news: list = []
    got = attribute.compute(bundle, inputs, trace, position, progress=lambda s, g: news.append((s, g)))
    tries = [64 * 2**i for i in range(len(news))]
    assert [s for s, _ in news] == tries and got.steps == 2 * tries[-1]  # every try before the last
    assert all(g > 0.01 for _, g in news)  # each fell short of 1 %
    asked: list = []
    assert attribute.compute(bundle, inputs, trace, position, cancelled=lambda: asked.append(1) or True) is None
    assert len(asked) == 1  # stopped at the first batch of path points
    news.clear()
    stop_after_first = attribute.compute(bundle, inputs, trace, position, progress=lambda s, g: news.append(s),
                                         cancelled=lambda: bool(news))  # fmt: skip
    assert stop_after_first is None and news == [64]
