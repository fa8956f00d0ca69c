"""Attribution graphs through transcoder features (issue 45) on en-hi with its bundled transcoder set: the local
replacement model is exact where it claims to be, the JSON is DESIGN.md's, and pruning keeps count."""

from __future__ import annotations

import json
import time

import pytest
import torch

from scratchformer.cli import main
from scratchformer.graph import build_graph
from scratchformer.graph.attribution import logit_without
from scratchformer.graph.influence import cutoff, total_effects
from scratchformer.loading.bundle import load_model
from tests.scratchformer.graph_fixtures import assert_exact, one_thread  # noqa: F401 - one PyTorch thread

SOURCE, TARGET = "the girl eats an apple", "लड़की सेब"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def result(en_hi):
    """The graph of the token after the typed target (teacher forcing), unpruned and pruned from one build."""
    return build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET))


def test_the_replacement_model_reproduces_the_logits(en_hi, result):
    g = result.graph
    assert g.logit_error < 1e-4  # every logit at the position, error nodes included
    rep = result.replacement_model
    with torch.no_grad():
        _, hidden = rep.forward(rep.leaves(1))
        inputs = en_hi.prepare_run(SOURCE, TARGET)
        real = en_hi.model(inputs.src, inputs.tgt)[0].double()  # (T, vocab)
        for p in range(hidden.shape[1]):  # every position before the explained one too
            assert float((rep.logits(hidden, p)[0] - real[p]).abs().max()) < 1e-4
    assert g.token_id == int(real[g.position].argmax())
    assert abs(float(g.real[g.logit_index]) - float(real[g.position, g.token_id])) < 1e-5


def test_each_targets_incoming_edges_and_bias_sum_to_its_value(result):
    g = result.graph
    sums = g.adjacency.sum(dim=1) + g.bias  # (n,)
    targets = [*range(g.n_features), g.logit_index]
    assert float((sums[targets] - g.real[targets]).abs().max()) < 1e-4  # the transcoder's pre, the model's logit
    assert float((sums[targets] - g.totals[targets]).abs().max()) < 1e-9  # exact in the replacement's own sums
    assert not bool(g.adjacency[g.n_features : g.logit_index].any())  # errors and embeddings have no inputs
    pre = g.real[: g.n_features]
    assert bool((pre > 0).all())  # active features: pre-activation = activation
    assert torch.allclose(g.values[: g.n_features], pre, atol=1e-5)


def test_removing_a_node_moves_the_logit_by_what_the_graph_says(result):
    g, rep = result.graph, result.replacement_model
    logit = float(g.totals[g.logit_index])
    effects = total_effects(g)
    worst_direct = worst_total = 0.0
    for i in range(g.logit_index):  # every feature, error and embedding node
        direct = logit - logit_without(rep, g, i, linear=False)  # the others held: the edge into the logit
        worst_direct = max(worst_direct, abs(direct - float(g.adjacency[g.logit_index, i])))
        total = logit - logit_without(rep, g, i, linear=True)  # features follow: direct + indirect
        worst_total = max(worst_total, abs(total - float(effects[i])))
    assert worst_direct < 1e-4 and worst_total < 1e-4
    # the indirect part is real: some node's total effect differs from its direct one
    assert float((effects[: g.logit_index] - g.adjacency[g.logit_index, : g.logit_index]).abs().max()) > 1e-3


def test_encoder_features_reach_decoder_features_through_the_cross_attention(result):
    g = result.graph
    crossing = [
        (t, s)
        for t in range(g.n_features)
        for s in range(g.n_features)
        if g.nodes[t].side == "decoder" and g.nodes[s].side == "encoder" and float(g.adjacency[t, s]) != 0
    ]
    assert crossing
    # a decoder feature reads no decoder position after its own (the decoder is causal)
    for t in range(g.n_features):
        for s in range(g.logit_index):
            a, b = g.nodes[t], g.nodes[s]
            if a.side == b.side == "decoder" and b.position > a.position:
                assert float(g.adjacency[t, s]) == 0.0


def test_the_json_is_designs(result):
    d = json.loads(json.dumps(result.to_dict(), ensure_ascii=False))
    assert set(d) == {"nodes", "edges", "logit", "scores", "pruned"}
    ids = [n["id"] for n in d["nodes"]]
    assert len(ids) == len(set(ids))
    for n in d["nodes"]:
        assert n["kind"] in ("embedding", "feature", "error", "logit") and n["side"] in ("encoder", "decoder")
        optional = {"feature", "activation"} if n["kind"] == "feature" else set()
        assert set(n) == {"id", "kind", "side", "layer", "position", "influence"} | optional
        assert isinstance(n["layer"], int) and isinstance(n["position"], int) and n["influence"] >= 0
    for e in d["edges"]:
        assert set(e) == {"source", "target", "weight"} and e["source"] in ids and e["target"] in ids
        assert e["weight"] != 0
    assert set(d["logit"]) == {"token", "id", "value"} and d["logit"]["token"] == result.graph.token
    assert set(d["scores"]) == {"replacement", "completeness"}
    assert all(0 <= v <= 1 for v in d["scores"].values())
    assert set(d["pruned"]) == {"nodes", "edges", "kept_influence"} and 0 < d["pruned"]["kept_influence"] <= 1


def test_pruning_keeps_the_logit_and_the_totals_add_up(en_hi, result):
    pruned = result.to_dict()
    full = build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET), prune=False).to_dict()
    assert full["pruned"] == {"nodes": 0, "edges": 0, "kept_influence": 1.0}
    assert len(pruned["nodes"]) + pruned["pruned"]["nodes"] == len(full["nodes"])
    assert len(pruned["edges"]) + pruned["pruned"]["edges"] == len(full["edges"])
    assert len(pruned["nodes"]) < len(full["nodes"]) and len(pruned["edges"]) < len(full["edges"])
    kinds = [n["kind"] for n in pruned["nodes"]]
    assert kinds.count("logit") == 1
    assert kinds.count("embedding") == sum(n["kind"] == "embedding" for n in full["nodes"])  # all kept
    kept = {n["id"] for n in pruned["nodes"]}
    assert {e["source"] for e in pruned["edges"]} | {e["target"] for e in pruned["edges"]} <= kept
    # every kept feature and error node has a way out, every kept feature a way in
    out = {e["source"] for e in pruned["edges"]}
    into = {e["target"] for e in pruned["edges"]}
    for n in pruned["nodes"]:
        if n["kind"] in ("feature", "error"):
            assert n["id"] in out
        if n["kind"] == "feature":
            assert n["id"] in into
    assert pruned["scores"] == full["scores"]  # the scores are the full graph's
    looser = build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET), node_threshold=0.95).to_dict()
    assert len(looser["nodes"]) >= len(pruned["nodes"])


def test_the_cutoff_is_the_smallest_of_the_largest_scores_that_make_up_the_share():
    scores = torch.tensor([[0.0, 5.0, 0.0], [3.0, 0.0, 2.0]])  # total 10
    assert cutoff(scores, 0.5) == 5.0 and cutoff(scores, 0.6) == 3.0 and cutoff(scores, 0.85) == 2.0
    assert cutoff(scores, 1.0) <= 2.0  # every score, however the sum rounds
    assert cutoff(torch.tensor([0.1] * 10 + [0.0]), 1.0) == 0.0  # the sum rounds short of 1: zeros kept too
    assert cutoff(torch.zeros(4), 0.5) == float("inf")


def test_a_capped_graph_folds_the_other_features_into_the_errors_and_stays_exact(en_hi):
    capped = build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET), max_features=20, prune=False)
    g = capped.graph
    assert g.n_features == 20 and capped.notes and "cap of 20" in capped.notes[0]
    assert g.logit_error < 1e-4
    sums = g.adjacency.sum(dim=1) + g.bias
    targets = [*range(g.n_features), g.logit_index]
    assert float((sums[targets] - g.real[targets]).abs().max()) < 1e-4


def test_the_default_position_is_the_first_generated_token(en_hi):
    inputs = en_hi.prepare_run(SOURCE, "")
    assert inputs.decoder_input == "generated"
    started = time.perf_counter()
    result = build_graph(en_hi, inputs)
    took = time.perf_counter() - started
    print(f"\nen-hi graph of one translated token: {took:.2f} s, {len(result.graph.nodes)} nodes")
    assert result.graph.position == 0 and result.graph.token_id == inputs.generated[0]
    assert result.graph.logit_error < 1e-4


def test_the_api_returns_what_the_command_prints(en_hi, capsys):
    import scratchformer as sf

    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--target", TARGET, "--position", "1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    got = sf.run("en-hi", SOURCE, TARGET).graph(position=1)
    assert json.loads(json.dumps(got, ensure_ascii=False)) == printed
    assert printed["logit"]["id"] == en_hi.tgt_tokenizer.encode(TARGET)[1]  # the model says सेब after लड़की
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--target", TARGET, "--position", "1", "--token",
                 "खाती", "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    got = sf.run("en-hi", SOURCE, TARGET).graph(position=1, token="खाती")
    assert json.loads(json.dumps(got, ensure_ascii=False)) == printed and printed["logit"]["token"] == "खाती"


def test_the_text_summary_names_the_logit_and_the_scores(capsys):
    assert main(["graph", "--model", "en-hi", "--source", SOURCE]) == 0
    out = capsys.readouterr().out
    assert "The logit of" in out and "Replacement score" in out and "Most influential nodes" in out


def test_any_tokens_logit_can_be_explained_and_stays_exact(en_hi, capsys):
    inputs = en_hi.prepare_run(SOURCE, TARGET)
    top = build_graph(en_hi, inputs)
    other = next(t for t in ("सेब", "खाती", "आदमी") if en_hi.tgt_tokenizer.token_id(t) != top.graph.token_id)
    wanted = en_hi.tgt_tokenizer.token_id(other)
    result = build_graph(en_hi, inputs, token=other, prune=False)
    g = result.graph
    assert g.token_id == wanted and g.token == other
    logits = result.replacement_model.full_pass(g.position).captured  # the model's own logits there
    assert abs(float(g.real[g.logit_index]) - float(logits[wanted])) < 1e-5
    sums = g.adjacency.sum(dim=1) + g.bias
    assert abs(float(sums[g.logit_index] - g.real[g.logit_index])) < 1e-4
    rank = int((logits > logits[wanted]).sum()) + 1
    assert any(f"logit of “{other}” (rank {rank} here" in n and top.graph.token in n for n in result.notes)
    assert build_graph(en_hi, inputs, token=wanted).to_dict() == build_graph(en_hi, inputs, token=other).to_dict()
    assert not build_graph(en_hi, inputs, token=top.graph.token_id).notes  # the top token: nothing to say
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--target", TARGET, "--token", other, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["logit"]["id"] == wanted
    for bad, said in (("zzz", "not in this model's vocabulary"), ("id:100000", "ids 0 to")):
        assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--token", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and "\n" not in err and "Traceback" not in err


def test_a_logit_difference_is_explained_exactly(en_hi, capsys):
    inputs = en_hi.prepare_run(SOURCE, TARGET)
    top = build_graph(en_hi, inputs).graph
    other = next(t for t in ("खाती", "सेब", "आदमी") if en_hi.tgt_tokenizer.token_id(t) != top.token_id)
    result = build_graph(en_hi, inputs, versus=other, prune=False, like_circuit_tracer=True)
    g, rep = result.graph, result.replacement_model
    logits = rep.full_pass(g.position).captured
    against = en_hi.tgt_tokenizer.token_id(other)
    assert g.token_id == top.token_id and g.versus_id == against
    assert abs(float(g.real[g.logit_index]) - float(logits[g.token_id] - logits[against])) < 1e-5
    assert_exact(result, every=9)
    one = build_graph(en_hi, inputs, prune=False, like_circuit_tracer=True).graph  # the same run, one logit
    assert torch.equal(one.adjacency[: g.n_features], g.adjacency[: g.n_features])  # only the logit's row moves
    made = result.to_dict()["logit"]
    assert made["versus"] == {"token": other, "id": against} and "demeaned" not in made  # the means cancel
    assert not any("demeaned" in n for n in result.notes)
    assert any(f"“{g.token}” − “{other}”" in n for n in result.notes)
    assert result.text().startswith(f"The logit difference “{g.token}” − “{other}”")
    from scratchformer.plotdata.graph_layout import layout_graph

    drawn = layout_graph(result, result.kept)  # the window's and the page's picture say so too
    assert f"“{g.token}” − “{other}”" in drawn.title and "the logit difference" in drawn.subtitle
    assert drawn.labels[drawn.kinds.index("logit")] == f"“{g.token}” − “{other}”"
    with pytest.raises(Exception, match="a logit difference needs two"):
        build_graph(en_hi, inputs, versus=top.token)
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--target", TARGET, "--versus", other, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["logit"]["versus"]["id"] == against
