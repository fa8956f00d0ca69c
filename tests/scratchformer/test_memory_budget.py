"""The memory budget: a run that would need more is refused with one sentence before it starts; the estimate
is an upper bound of what a lazy trace holds."""

from __future__ import annotations

import pytest

from scratchformer import UserError
from scratchformer.cli import main
from scratchformer.loading.bundle import load_model
from scratchformer.loading.memory import check_budget, estimate_run


@pytest.fixture(scope="module")
def blog():
    return load_model("blog", "cpu")


@pytest.mark.parametrize(("model", "n_words"), [("paper", 60), ("blog", 3), ("en-hi", 12)])
def test_the_estimate_bounds_what_the_trace_holds(model, n_words):
    bundle = load_model(model, "cpu")
    words = ("the girl eats an apple " * 20).split()[:n_words]
    inputs = bundle.prepare(" ".join(words), " ".join(words[: n_words // 2]))
    _, trace = bundle.run(inputs, keep_output=False)
    estimate = bundle.memory_estimate(inputs)
    assert trace.stored_bytes() <= estimate.held
    assert estimate.output == 0 and bundle.memory_estimate(inputs, keep_output=True).output > 0


def test_a_run_over_the_budget_is_one_sentence_with_a_suggestion(blog):
    inputs = blog.prepare("machine learning using PyTorch", "")
    with pytest.raises(UserError, match=r"more than the .* budget: use a shorter text \(this one has \d+ tokens\)"):
        blog.run(inputs, budget=10 * 2**20)
    _, trace = blog.run(inputs, budget=64 * 2**30)  # a budget it fits in: runs
    assert len(trace) > 0


def test_windows_over_the_budget_suggest_fewer_windows():
    estimate = estimate_run(load_model("paper", "cpu").config, 8, 512, 512, 300 * 2**20)
    with pytest.raises(UserError, match="use fewer windows \\(this run has 8\\)"):
        check_budget(estimate, 2**30, 8, 512)
    check_budget(estimate, 8 * 2**30, 8, 512)  # fits: no error


def test_trace_command_refuses_a_run_over_its_budget(tmp_path, capsys):
    text = tmp_path / "long.txt"
    text.write_text("the model reads every token of this sentence " * 40, encoding="utf-8")
    rc = main(["trace", "--model", "paper", "--text-file", str(text), "--seq-len", "128", "--batch", "4",
               "--memory-budget", "0.5"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "budget" in err and "fewer windows" in err
    assert main(["trace", "--model", "blog", "--source", "hi", "--memory-budget", "-1"]) == 2
    assert "--memory-budget must be a positive" in capsys.readouterr().err
