"""`scratchformer graph`'s mistakes, each one sentence with exit status 2 (issue 45), and a decoder-only pre-norm
model (llama-tiny: RMSNorm, rotary positions, grouped-query attention, a gated feed-forward) as exact as en-hi."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from scratchformer.cli import main
from scratchformer.features.bundled import bundled_transcoders
from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.folder import save
from scratchformer.features.points import ffn_input, ffn_steps
from scratchformer.graph import build_graph
from scratchformer.graph.attribution import logit_without
from scratchformer.graph.influence import total_effects
from scratchformer.loading.bundle import load_model
from tests.scratchformer.graph_fixtures import one_thread  # noqa: F401 - one PyTorch thread

SOURCE = "the girl eats an apple"


def one_sentence(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and "Traceback" not in err and "\n" not in err
    assert err.startswith("scratchformer: ") and err.endswith(".")
    return err


def test_a_set_that_leaves_a_feed_forward_out_is_named(tmp_path, capsys):
    shipped = bundled_transcoders("en-hi")
    for name in ("encoder.0.ffn.out", "encoder.1.ffn.out", "decoder.0.ffn.out"):
        shutil.copytree(shipped / name, tmp_path / name)
    err = one_sentence(capsys, "graph", "--model", "en-hi", "--source", SOURCE, "--transcoders", str(tmp_path))
    assert "does not cover every feed-forward layer: decoder.1.ffn.out is missing" in err
    err = one_sentence(capsys, "graph", "--model", "en-hi", "--source", SOURCE,
                       "--dictionary", str(shipped / "encoder.0.ffn.out"))  # fmt: skip
    assert "encoder.1.ffn.out, decoder.0.ffn.out, decoder.1.ffn.out are missing" in err


def test_a_position_past_the_sequence(capsys):
    err = one_sentence(capsys, "graph", "--model", "en-hi", "--source", SOURCE, "--target", "लड़की", "--position", "9")
    assert "--position 9 is past the decoder input, which has positions 0 to 1" in err
    err = one_sentence(capsys, "graph", "--model", "en-hi", "--source", SOURCE, "--position", "-1")
    assert "from 0" in err


def test_a_graph_too_big_for_memory_says_the_cap(capsys):
    err = one_sentence(capsys, "graph", "--model", "en-hi", "--source", SOURCE, "--memory-budget", "0.0001")
    assert "more than the memory budget" in err and "--max-features" in err
    # under the cap the most influential features stay, with a note, and the graph is made
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--max-features", "12", "--json"]) == 0
    captured = capsys.readouterr()
    assert "cap of 12" in captured.err and "most influential" in captured.err
    assert json.loads(captured.out)["logit"]["token"]


def test_thresholds_and_models_without_a_decoder_are_refused(capsys):
    err = one_sentence(capsys, "graph", "--model", "en-hi", "--source", SOURCE, "--node-threshold", "1.5")
    assert "between 0 and 1" in err
    err = one_sentence(capsys, "graph", "--model", "llama-tiny", "--source", "3 1 4")
    assert "ships no transcoder set" in err


@pytest.fixture(scope="module")
def llama_set(tmp_path_factory):
    """Random ReLU transcoders, one per feed-forward of llama-tiny: a poor stand-in, but the replacement stays exact
    whatever the transcoders are (the error nodes carry what they miss)."""
    bundle = load_model("llama-tiny")
    root = tmp_path_factory.mktemp("llama") / "set"
    gen = torch.Generator().manual_seed(0)
    for step in ffn_steps(bundle.model):
        d = Dictionary(64, 96, "standard", info=DictionaryInfo(ffn_input(bundle.model, step), step, "llama-tiny",
                                                                  "transcoder"))  # fmt: skip
        d.reset_parameters(gen)
        with torch.no_grad():
            d.b_enc.fill_(-0.05)
        save(d, root / step)
    return bundle, root


def test_a_decoder_only_pre_norm_model_is_as_exact(llama_set):
    bundle, root = llama_set
    inputs = bundle.prepare_run("3 1 4 1 5")
    result = build_graph(bundle, inputs, root)
    g, rep = result.graph, result.replacement_model
    assert {n.side for n in g.nodes} == {"decoder"} and g.position == inputs.tgt.shape[1] - 1
    assert g.logit_error < 1e-4
    sums = g.adjacency.sum(dim=1) + g.bias
    targets = [*range(g.n_features), g.logit_index]
    assert float((sums[targets] - g.real[targets]).abs().max()) < 1e-4
    logit, effects = float(g.totals[g.logit_index]), total_effects(g)
    for i in range(0, g.logit_index, 7):  # a sample of nodes of every kind
        assert abs(logit - logit_without(rep, g, i, linear=False) - float(g.adjacency[g.logit_index, i])) < 1e-4
        assert abs(logit - logit_without(rep, g, i, linear=True) - float(effects[i])) < 1e-4


def test_the_command_reads_a_decoder_only_models_text_as_it_is(llama_set, capsys):
    _, root = llama_set
    argv = ["graph", "--model", "llama-tiny", "--source", "3 1 4", "--transcoders", str(root), "--json", "--no-prune"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert max(n["position"] for n in d["nodes"]) == 3  # <s> 3 1 4: the last position explained, nothing added
    assert d["pruned"]["nodes"] == 0


def test_a_build_says_how_far_it_got_and_stops_when_cancelled():
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run(SOURCE)
    heard = []
    result = build_graph(bundle, inputs, progress=lambda stage, done, total: heard.append((stage, done, total)))
    assert result is not None and heard
    n_targets = result.graph.n_features + 1
    assert all(stage == "reading the edges" and 0 <= done < total for stage, done, total in heard)
    assert any(total == n_targets for _, _, total in heard)
    asked = []

    def cancelled() -> bool:  # gives up at the second batch of edges
        asked.append(1)
        return len(asked) > 1

    assert build_graph(bundle, inputs, cancelled=cancelled) is None and len(asked) == 2
