"""Lesson 16's experiments: the toy model of superposition (Elhage et al. 2022) stores more features than it has
dimensions only when they are sparse; its plot data draws what it measured; the polysemantic neuron's numbers are
those of the model's own feed-forward activations, recomputed here sentence by sentence; the lesson reads both
results through {result:…} placeholders."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.experiments import polysemantic, run_experiment
from scratchformer.lessons import LessonError, lessons_dir, load_lesson
from scratchformer.lessons.check import Runs, check_lesson
from scratchformer.lessons.prepare import prepare_page
from scratchformer.plotdata.experiments import charts, maps
from scratchformer.recording.trace import tracing


@pytest.fixture(scope="module")
def runs():
    return Runs()


@pytest.fixture(scope="module")
def toy(runs):
    return run_experiment("superposition", runs.bundle("en-hi"), "", sparsity=0.9, seed=0)


@pytest.fixture(scope="module")
def neuron(runs):
    return run_experiment("polysemantic", runs.bundle("en-hi"), "")


def test_sparse_features_are_stored_in_superposition_and_dense_ones_are_not(toy):
    m, n = toy["dims"], toy["features"]
    assert (m, n) == (2, 5)
    dense, sparse = toy["dense"], toy["sparse"]
    w_dense, w_sparse = np.array(dense["W"]), np.array(sparse["W"])  # (m, n)
    stored = lambda w: int((np.linalg.norm(w, axis=0) > toy["threshold"]).sum())  # noqa: E731
    assert stored(w_dense) == dense["stored"] <= m  # dense: at most one feature per dimension
    assert stored(w_sparse) == sparse["stored"] > m  # sparse: more features than dimensions
    assert dense["stored_features"] == [1, 2]  # the two most important ones are the ones kept
    assert sparse["loss"] < dense["loss"]
    # the stored dense features sit on orthogonal columns; the sparse ones overlap and pay with interference
    assert dense["interference_max"] < 0.05 < 0.5 < sparse["interference_max"]
    assert max(sparse["b"]) < 0  # ReLU with a negative bias cuts off the small leaks


def test_the_numbers_are_those_of_w(toy):
    side = toy["sparse"]
    w = np.array(side["W"])  # (m, n)
    assert np.allclose(side["WtW"], w.T @ w)
    assert np.allclose(side["norms"], np.linalg.norm(w, axis=0))
    unit = w / np.linalg.norm(w, axis=0)
    i = 2
    by_hand = sum(float(unit[:, i] @ w[:, j]) ** 2 for j in range(w.shape[1]) if j != i)
    assert side["interference"][i] == pytest.approx(by_hand, rel=1e-6)


def test_the_plot_data_draws_the_columns_and_wtw_of_the_setting_shown(toy):
    for sparse, key in ((True, "sparse"), (False, "dense")):
        arrows, norms, interference = charts(toy, sparse)
        w = np.array(toy[key]["W"])
        assert arrows.square and len(arrows.series) == 5
        for i, s in enumerate(arrows.series):
            assert (s.x[0], s.y[0]) == (0.0, 0.0) and (s.x[1], s.y[1]) == pytest.approx(tuple(w[:, i]))
        assert norms.series[1].y == pytest.approx(toy["sparse"]["norms"])
        (gram,) = maps(toy, sparse)
        assert gram.shape == (5, 5) and np.allclose(gram.values, w.T @ w, atol=1e-6)
        assert f"sparsity {toy[key]['sparsity']:g}" in gram.title
    dropped = [i for i, v in enumerate(toy["dense"]["norms"]) if v <= toy["threshold"]]
    assert all(charts(toy, False)[2].series[0].y[i] == 0.0 for i in dropped)  # a dropped feature has no direction


def test_a_bad_sparsity_is_one_sentence(runs):
    with pytest.raises(UserError, match="sparsity must be between 0 and 0.99"):
        run_experiment("superposition", runs.bundle("en-hi"), "", sparsity=1.5)


def test_the_polysemantic_neuron_is_recomputed_from_the_model(runs, neuron):
    """The neuron's words and activations, recomputed from traced encoder passes over the sentences grouped by
    length (nothing padded, unlike the experiment's one padded batch)."""
    bundle = runs.bundle("en-hi")
    n = neuron["neuron"]
    best: dict[str, float] = {}
    by_length: dict[int, list[list[int]]] = {}
    for sentence in polysemantic.task_sentences(neuron["sentences"], 0):
        ids = bundle.encode_source(sentence)
        by_length.setdefault(len(ids), []).append(ids)
    for rows in by_length.values():  # sentences of one length together: nothing padded
        with torch.inference_mode(), tracing() as tracer:
            bundle.model.encode(torch.tensor(rows))
        hidden = next(s for s in tracer.steps if s.name == n["step"]).tensor  # (B, S, d_ff)
        for ids, acts in zip(rows, hidden[:, :, n["index"]].tolist()):
            for token, a in zip(bundle.src_tokenizer.token_strings(ids), acts):
                if token not in ("<s>", "</s>", "<pad>"):
                    best[token] = max(best.get(token, -np.inf), a)
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    top = [t for t, a in ranked[: polysemantic.TOP] if a >= polysemantic.HALF * ranked[0][1]]
    assert [t["token"] for t in n["top"]] == top
    assert [t["activation"] for t in n["top"]] == pytest.approx([best[t] for t in top], abs=1e-4)
    classes = polysemantic.word_classes()
    assert n["n_classes"] == len({classes[t] for t in top}) >= 3  # unrelated words: several classes in one neuron
    assert neuron["neurons"] == bundle.config.d_ff * bundle.config.n_encoder_layers
    assert f"neuron {n['index']}" in neuron["summary"]


def test_the_polysemantic_experiment_says_when_it_does_not_apply(runs):
    assert "open en-hi" in polysemantic.applies(runs.bundle("sort"))


def test_the_lesson_loads_checks_and_reads_the_live_results(runs, toy, neuron):
    lesson = load_lesson(lessons_dir() / "16-superposition.toml")
    assert lesson.id == "superposition" and all(p.question is not None for p in lesson.pages[:5])
    check_lesson(lesson, runs)
    values = runs.values(lesson.inputs(lesson.pages[0]))
    prepared = {n: prepare_page(lesson, n, values) for n in range(1, len(lesson.pages) + 1)}
    assert prepared[2].question.number == toy["dense"]["stored"]
    assert prepared[3].question.number == toy["sparse"]["stored"]
    assert prepared[5].question.number == neuron["neuron"]["n_classes"]
    assert f"neuron {neuron['neuron']['index']} of encoder layer {neuron['neuron']['layer']}" in prepared[5].text
    assert neuron["neuron"]["top"][0]["token"] in prepared[6].text
    assert "Run › Attach the bundled dictionary" in prepared[6].text and "Features view" in prepared[6].text
    assert neuron["separated_text"] in " ".join(prepared[6].text.split())  # the transcoder's features, live


def test_a_result_placeholder_needs_the_pages_experiment(tmp_path, runs):
    path = tmp_path / "bad.toml"
    path.write_text('id = "bad"\ntitle = "Bad"\n[[pages]]\ntitle = "No experiment"\ntext = "{result:sparse.stored}"\n',
                    encoding="utf-8")  # fmt: skip
    with pytest.raises(LessonError, match="give the page an 'experiment'"):
        check_lesson(load_lesson(path), runs)
    path.write_text('id = "bad"\ntitle = "Bad"\n[[pages]]\ntitle = "Wrong key"\nexperiment = "superposition"\n'
                    'text = "{result:sparse.nothing}"\n', encoding="utf-8")  # fmt: skip
    with pytest.raises(LessonError, match="has no 'sparse.nothing'"):
        check_lesson(load_lesson(path), runs)


def test_the_command_line_prints_both_settings(capsys):
    assert main(["experiment", "superposition", "--model", "en-hi", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["controls"]["sparsity"] == 0.9 and result["sparse"]["stored"] > result["dims"]
    assert main(["experiment", "superposition", "--model", "en-hi", "--sparsity", "0"]) == 0
    out = capsys.readouterr().out
    assert "sparsity 0: " in out and "interference" in out
    torch.manual_seed(0)  # nothing above depends on the global generator


def test_the_layers_transcoder_reads_the_neurons_words_as_its_own_features(runs, neuron):
    """The bundled transcoder of the neuron's feed-forward, attached to unpadded traced runs over the same sentences
    (scratchformer.features.attach, another path than the experiment's), gives each firing word the feature the
    lesson names, at the activation it names."""
    from scratchformer.features.attach import traced
    from scratchformer.features.bundled import bundled_transcoders
    from scratchformer.features.folder import load

    bundle = runs.bundle("en-hi")
    n = neuron["neuron"]
    ffn = n["step"].replace(".hidden", ".out")
    t = load(bundled_transcoders("en-hi") / ffn)
    best: dict[str, torch.Tensor] = {}
    for sentence in polysemantic.task_sentences(neuron["sentences"], 0):
        inputs = bundle.prepare(sentence, "")
        _, trace = traced(bundle, inputs, [t], keep_output=False)
        f = trace[f"{t.info.at}.dict.features"].tensor[0]  # (S, d_sae)
        for token, row in zip(trace.source_tokens[0], f):
            best[token] = torch.maximum(best[token], row) if token in best else row
    rows = neuron["separated"]
    assert [r["token"] for r in rows] == [t["token"] for t in n["top"]]
    for r in rows:
        assert r["feature"] == int(best[r["token"]].argmax())
        assert r["activation"] == pytest.approx(float(best[r["token"]].max()), abs=1e-4)
    assert neuron["n_features"] == len({r["feature"] for r in rows}) >= 2  # the neuron's words come apart
