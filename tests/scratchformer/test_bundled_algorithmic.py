"""The bundled copy/reverse/sort models: they load by name, decode fresh digit strings correctly, and (copy,
reverse) have a cross-attention head that points at the gold source token. Trained without guided alignment,
so that head learned where to look on its own."""

from __future__ import annotations

import functools

import pytest

from scratchformer.loading.bundle import PRESETS, bundled_models, default_model_name, load_model, model_names
from scratchformer.running.decoding import greedy
from scratchformer.tasks.algorithmic import generate_task
from scratchformer.training.evaluation import evaluate

TASKS = ("copy", "reverse", "sort")
# Hand-written sources (not drawn from the task's generator); lengths 3 to 12, repeats included.
SOURCES = ("3 1 4 1 5", "7 7 0", "9 8 7 6 5 4 3 2 1 0", "2 0 2 5 1 1 9 4 0 6 3 8", "5 5 5 5")
EXPECTED = {
    "copy": lambda digits: digits,
    "reverse": lambda digits: digits[::-1],
    "sort": sorted,
}


@functools.cache
def _load(name: str):
    return load_model(name)


@pytest.fixture(params=TASKS)
def bundle(request):
    return _load(request.param)


def _translate(bundle, source: str) -> str:
    ids = greedy(bundle, bundle.encode_source(source), max_len=bundle.config.max_len)
    return " ".join(bundle.tgt_tokenizer.token_strings(ids))


def test_bundled_algorithmic_models_are_listed_after_the_default():
    names = model_names()
    assert default_model_name() == "en-hi"
    assert names[0] == "en-hi"
    bundled = names[: len(bundled_models())]
    assert set(TASKS) <= set(bundled)
    assert names[len(bundled) :] == list(PRESETS)


def test_worked_examples():
    assert _translate(_load("reverse"), "3 1 4 1 5") == "5 1 4 1 3"
    assert _translate(_load("sort"), "3 1 4 1 5") == "1 1 3 4 5"
    assert _translate(_load("copy"), "3 1 4 1 5") == "3 1 4 1 5"


def test_decodes_fresh_sequences(bundle):
    assert bundle.name in TASKS and bundle.config.name == bundle.name
    assert bundle.config.extra["task"] == bundle.name
    assert "guided_alignment" not in bundle.config.extra  # the attention was learned, not supervised
    for source in SOURCES:
        expected = " ".join(EXPECTED[bundle.name](source.split()))
        assert _translate(bundle, source) == expected, source


# Not sort: its gold alignment among equal digits (stable order) is a convention the model need not follow.
@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_best_cross_attention_head_finds_the_gold_token(name):
    bundle = _load(name)
    pairs = generate_task(name, 16, seed=2024)  # a seed that is not the splits' (0)
    result = evaluate(bundle, pairs, "fresh", alignment_only=True)
    assert result.n_words == sum(len(p.alignment) for p in pairs)
    _, _, accuracy = result.best_head
    assert accuracy >= 0.9
