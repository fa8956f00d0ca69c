"""QK attributions (issue 45): one head's score split into query-node × key-node products of the graph's nodes,
exact: the terms sum to the score the model computed, and removing a node moves the score by its share."""

from __future__ import annotations

import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.graph import build_graph
from scratchformer.graph.qk import _query_key, parse_qk, split_score
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_graph_inputs import llama_set  # noqa: F401 - random transcoders for llama-tiny

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def en_hi_graph():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run(SOURCE)
    yield bundle, inputs, build_graph(bundle, inputs)
    torch.set_num_threads(before)


def _model_score(bundle, inputs, attention: str, head: int, query: int, key: int) -> float:
    _, trace = bundle.run(inputs)
    return float(trace[f"{attention}.scaled_scores"].tensor[0, head, query, key])


@pytest.mark.parametrize("attention", ["decoder.1.cross_attn", "decoder.0.self_attn", "encoder.1.self_attn"])
def test_the_terms_sum_to_the_models_own_score(en_hi_graph, attention):
    bundle, inputs, result = en_hi_graph
    split = split_score(result.replacement_model, result.graph, attention, 1, top=None)
    assert split.total == pytest.approx(split.score, abs=1e-9)
    assert split.score == pytest.approx(_model_score(bundle, inputs, attention, 1, split.query, split.key), abs=1e-4)
    pattern = result.replacement_model.patterns[attention][0, 1, split.query]
    assert split.key == int(pattern.argmax()) and split.weight == pytest.approx(float(pattern.max()))
    # the query nodes' shares, the key nodes' products with the query's biases and the biases alone: the score
    with_q0 = sum(t for a, _, t in split.pairs if a == "bias")
    assert sum(t for _, t in split.by_query) + with_q0 + split.bias_term == pytest.approx(split.total, abs=1e-9)
    assert [abs(t) for _, _, t in split.pairs] == sorted((abs(t) for _, _, t in split.pairs), reverse=True)


def test_across_the_cross_attention_removing_a_node_moves_the_score_by_its_share(en_hi_graph):
    """Encoder nodes reach only the keys and decoder nodes only the queries of the first layer's cross-attention
    (a later one's queries have read the encoder too), so zeroing one moves the score by exactly its share."""
    _, _, result = en_hi_graph
    rep, g = result.replacement_model, result.graph
    attention = "decoder.0.cross_attn"
    split = split_score(rep, g, attention, 0, top=None)
    mod = rep.model.get_submodule(attention)
    by_key, by_query = dict(split.by_key), dict(split.by_query)
    index = {node.id: i for i, node in enumerate(g.nodes)}
    checked = {"encoder": 0, "decoder": 0}
    for node_id in [n for n, _ in split.by_key[:3]] + [n for n, _ in split.by_query[:3]]:
        node = g.nodes[index[node_id]]
        leaves = rep.leaves(1)
        if node.kind == "feature":
            act = rep.active[node.step]
            j = int(((act.pos == node.position) & (act.feat == node.feature)).nonzero()[0, 0])
            leaves.feat[node.step][0, j] = 0.0
        elif node.kind == "error":
            leaves.err[node.step][0, node.position] = 0.0
        else:
            leaves.emb[node.side][0, node.position] = 0.0
        q, k, _ = _query_key(rep, mod, leaves, 0, split.query, split.key)
        moved = split.score - float(q[0] @ k[0]) / mod.d_head**0.5
        share = by_key[node_id] if node.side == "encoder" else by_query[node_id]
        assert moved == pytest.approx(share, abs=1e-9), node_id
        checked[node.side] += 1
    assert checked["encoder"] and checked["decoder"]


def test_a_rotary_grouped_query_model_splits_exactly(llama_set):  # noqa: F811 - the fixture
    bundle, root = llama_set
    inputs = bundle.prepare_run("3 1 4 1 5")
    result = build_graph(bundle, inputs, root)
    split = split_score(result.replacement_model, result.graph, "decoder.1.self_attn", 3, key=2, top=None)
    assert split.query == result.graph.position and split.key == 2
    assert split.total == pytest.approx(split.score, abs=1e-9)
    _, trace = bundle.run(inputs)
    model = float(trace["decoder.1.self_attn.scaled_scores"].tensor[0, 3, split.query, 2])
    assert split.score == pytest.approx(model, abs=1e-4)


@pytest.mark.parametrize("args, expected", [
    (("decoder.9.cross_attn", 0), "has no attention named 'decoder.9.cross_attn'; it has encoder.0.self_attn"),
    (("decoder.1.cross_attn", 9), "has heads 0 to 3"),
    (("decoder.1.cross_attn", 0, 7), "has query positions 0 to"),
    (("decoder.1.cross_attn", 0, 0, 40), "has key positions 0 to 5"),
])  # fmt: skip
def test_bad_heads_and_positions_are_one_sentence(en_hi_graph, args, expected):
    _, _, result = en_hi_graph
    with pytest.raises(UserError, match=expected.replace("(", r"\(")):
        split_score(result.replacement_model, result.graph, *args)


def test_the_spec_reads_a_head_and_its_positions():
    assert parse_qk("decoder.1.cross_attn.head0@2,3") == ("decoder.1.cross_attn", 0, 2, 3)
    assert parse_qk(" encoder.0.self_attn.head3 ") == ("encoder.0.self_attn", 3, None, None)
    with pytest.raises(UserError, match="write ATTENTION.headH"):
        parse_qk("decoder.1.cross_attn:0")


def test_the_command_prints_the_split_beside_the_graph(capsys):
    import json

    from scratchformer.cli import main

    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--qk", "decoder.1.cross_attn.head0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (qk,) = out["qk"]
    # en-hi writing its own translation: the graph explains position 0, and so does the split by default
    assert (qk["attention"], qk["head"], qk["query"]) == ("decoder.1.cross_attn", 0, 0)
    assert qk["total"] == pytest.approx(qk["score"], abs=1e-9) and len(qk["pairs"]) == 12
    assert all(p["query"].startswith(("dec.", "bias")) for p in qk["pairs"])  # queries come from the decoder
    assert all(p["key"].startswith(("enc.", "bias")) for p in qk["pairs"])  # keys from the encoder
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--qk", "decoder.1.cross_attn.head0@0,1"]) == 0
    text = capsys.readouterr().out
    assert "the score of query 0 against key 1" in text and "Largest key-side shares" in text
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--qk", "decoder.1.cross_attn.head9"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "scratchformer: decoder.1.cross_attn has heads 0 to 3."
