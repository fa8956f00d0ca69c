"""circuit-tracer's conventions in scratchformer's graphs (issue 45; benchmarks/bench_graph.py sets the two side by
side): the demeaned logit, embedding nodes of the token's vector alone, the first position held as a constant —
each still exact — and the two ways a pass reads the active features' rows give the same edges."""

from __future__ import annotations

import json

import pytest
import torch

from scratchformer.cli import main
from scratchformer.graph import build_graph
from scratchformer.graph.attribution import logit_without, rows
from scratchformer.graph.replacement import _pad
from scratchformer.graph.transcoders import open_set
from scratchformer.loading.bundle import load_model
from tests.scratchformer.graph_fixtures import one_thread  # noqa: F401 - one PyTorch thread

SOURCE, TARGET = "the girl eats an apple", "लड़की सेब"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def graphs(en_hi):
    inputs = en_hi.prepare_run(SOURCE, TARGET)
    return (build_graph(en_hi, inputs, prune=False), build_graph(en_hi, inputs, prune=False, demeaned=True),
            build_graph(en_hi, inputs, prune=False, like_circuit_tracer=True))  # fmt: skip


def keys(g) -> list[tuple]:
    return [(n.kind, n.side, n.layer, n.position, n.feature) for n in g.nodes]


def test_the_demeaned_logit_is_the_logit_minus_the_mean_logit(en_hi, graphs):
    raw, demeaned, _ = graphs
    g = demeaned.graph
    inputs = en_hi.prepare_run(SOURCE, TARGET)
    with torch.no_grad():
        logits = en_hi.model(inputs.src, inputs.tgt)[0, g.position].double()  # (vocab,)
    want = float(logits[g.token_id] - logits.mean())
    assert g.token_id == raw.graph.token_id  # the mean does not change which token is most likely
    assert abs(float(g.real[g.logit_index]) - want) < 1e-5
    assert abs(float(g.adjacency[g.logit_index].sum() + g.bias[g.logit_index]) - want) < 1e-5
    assert abs(float(g.totals[g.logit_index]) - float(g.adjacency[g.logit_index].sum() + g.bias[g.logit_index])) < 1e-9
    # the features' edges are the same; only the logit's row moves
    assert torch.equal(g.adjacency[: g.n_features], raw.graph.adjacency[: raw.graph.n_features])
    assert float((g.adjacency[g.logit_index] - raw.graph.adjacency[g.logit_index]).abs().max()) > 1e-3
    assert demeaned.to_dict()["logit"]["demeaned"] is True and "demeaned" not in raw.to_dict()["logit"]


def test_like_circuit_tracer_holds_the_first_position_and_the_positions(en_hi, graphs):
    _, demeaned, like = graphs
    g, rep = like.graph, like.replacement_model
    assert g.logit_error < 1e-4  # still the model's logits, the held parts included
    targets = [*range(g.n_features), g.logit_index]
    sums = g.adjacency.sum(dim=1) + g.bias
    assert float((sums[targets] - g.real[targets]).abs().max()) < 1e-4
    assert float((sums[targets] - g.totals[targets]).abs().max()) < 1e-9
    nodes = g.nodes
    assert not any(n.kind == "feature" and n.position == 0 for n in nodes)  # held: not nodes
    first_errors = [i for i, n in enumerate(nodes) if n.kind == "error" and n.position == 0]
    assert first_errors and not bool(g.adjacency[:, first_errors].any())  # there, as circuit-tracer's, but empty
    # an embedding node is the token's vector alone: removing it moves the logit by its edge, and by less than
    # removing token and position together does
    logit = float(g.totals[g.logit_index])
    for i, n in enumerate(nodes):
        if n.kind == "embedding":
            assert abs(logit - logit_without(rep, g, i, linear=False) - float(g.adjacency[g.logit_index, i])) < 1e-6
    embeddings = [i for i, n in enumerate(nodes) if n.kind == "embedding"]
    both = {k: i for i, k in enumerate(keys(demeaned.graph))}
    theirs = [both[k] for k in keys(g)]
    assert float((g.adjacency[g.logit_index, embeddings]
                  - demeaned.graph.adjacency[demeaned.graph.logit_index, [theirs[i] for i in embeddings]]).abs().max()
                 ) > 1e-3  # fmt: skip
    # between the nodes both graphs have (every feature past the first position, errors, the logit), the same
    # direct effects: holding other nodes constant changes no edge between these
    shared = [i for i, n in enumerate(nodes) if n.kind != "embedding"]
    a = g.adjacency[shared][:, shared]
    b = demeaned.graph.adjacency[[theirs[i] for i in shared]][:, [theirs[i] for i in shared]]
    rest = [i for i, n in enumerate(nodes) if not (n.kind == "error" and n.position == 0)]
    keep = torch.tensor([i in rest for i in shared])
    assert float((a - b)[keep][:, keep].abs().max()) < 1e-9


def test_the_padded_and_the_gathered_reading_of_the_features_agree(graphs):
    rep = graphs[0].replacement_model
    assert all(p is not None for p in rep._pads.values())  # en-hi's features spread evenly enough to pad
    n = sum(len(a.pos) for a in rep.active.values())
    targets = list(range(0, n + 1, 3)) + [n]
    padded = rows(rep, targets, graphs[0].graph.position, graphs[0].graph.token_id, batch=16)
    saved = rep._pads
    rep._pads = {s: None for s in saved}
    try:
        gathered = rows(rep, targets, graphs[0].graph.position, graphs[0].graph.token_id, batch=16)
    finally:
        rep._pads = saved
    assert float((padded - gathered).abs().max()) < 1e-12
    g = graphs[0].graph
    built = g.adjacency[[t if t < n else g.logit_index for t in targets]][:, : g.logit_index]  # built in batches of 64
    assert float((padded - built).abs().max()) < 1e-12


def test_one_crowded_position_falls_back_to_gathering(en_hi):
    d = next(iter(open_set(en_hi).values()))
    spread = torch.arange(10).repeat_interleave(3)  # 3 features at each of 10 positions
    made = _pad(d, spread, torch.arange(30), 10)
    assert made is not None and made[1].shape == (10, 3, d.d_in)
    assert made[0].tolist() == [0, 1, 2] * 10
    crowded = torch.cat([torch.zeros(40, dtype=torch.long), torch.arange(1, 10)])  # 40 at one position
    assert _pad(d, crowded, torch.arange(49), 10) is None
    assert _pad(d, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 10) is None


def test_the_command_takes_them(graphs, capsys):
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--target", TARGET, "--like-circuit-tracer",
                 "--no-prune", "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    assert printed["logit"]["demeaned"] is True
    assert printed["scores"]["replacement"] == pytest.approx(graphs[2].replacement, abs=1e-12)
    assert not any(n["kind"] == "feature" and n["position"] == 0 for n in printed["nodes"])
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--demeaned"]) == 0
    out = capsys.readouterr()
    assert "The demeaned logit (minus the mean logit) of" in out.out and "demeaned" in out.err


def test_the_replacement_copies_large_tables_once_and_leaves_the_model_alone(en_hi, graphs, monkeypatch):
    import scratchformer.graph.replacement as replacement

    before = {k: v.clone() for k, v in en_hi.model.state_dict().items()}
    monkeypatch.setattr(replacement, "BIG_TABLE", 1000)  # en-hi's tables are small: copy them the large way
    again = build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET), prune=False)
    assert torch.equal(again.graph.adjacency, graphs[0].graph.adjacency)
    rep = again.replacement_model
    assert all(p.dtype == torch.float64 and not p.requires_grad for p in rep.model.parameters())
    mine = {p.data_ptr() for p in en_hi.model.parameters()}
    assert not any(p.data_ptr() in mine for p in rep.model.parameters())  # copies, not the model's own tensors
    after = en_hi.model.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())


def test_a_float32_graph_is_the_float64_graph_to_float32_rounding_and_shares_the_weights(en_hi, graphs, capsys):
    inputs = en_hi.prepare_run(SOURCE, TARGET)
    fast = build_graph(en_hi, inputs, prune=False, precision="float32")
    exact = graphs[0].graph
    g = fast.graph
    assert fast.replacement_model.dtype == torch.float32 and g.adjacency.dtype == torch.float32
    assert keys(g) == keys(exact) and g.token_id == exact.token_id
    scale = exact.adjacency.abs().max(dim=1, keepdim=True).values.clamp_min(1e-12)  # each target's largest edge
    assert float(((g.adjacency.double() - exact.adjacency).abs() / scale).max()) < 1e-4
    assert g.logit_error < 1e-4 and abs(fast.replacement - graphs[0].replacement) < 1e-5
    targets = [*range(g.n_features), g.logit_index]
    sums = g.adjacency.sum(1) + g.bias
    assert float((sums[targets] - g.real[targets]).abs().max()) < 1e-4  # still closes to the model's own values
    mine = {p.data_ptr() for p in en_hi.model.parameters()}
    assert all(p.data_ptr() in mine and not p.requires_grad for p in fast.replacement_model.model.parameters())
    assert all(p.requires_grad == q.requires_grad for p, q in zip(en_hi.model.parameters(),
                                                                 load_model("en-hi").model.parameters()))  # fmt: skip
    assert main(["graph", "--model", "en-hi", "--source", SOURCE, "--target", TARGET, "--graph-precision", "float32",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["logit"]["id"] == exact.token_id
    with pytest.raises(Exception, match="float64 or float32"):
        build_graph(en_hi, inputs, precision="float16")


def test_the_vocabularys_two_logits_read_at_once_are_its_logits_one_by_one(graphs):
    rep, g = graphs[0].replacement_model, graphs[0].graph
    hidden = torch.randn(2, *rep.captured_hidden.shape, dtype=rep.dtype)
    with torch.no_grad():
        pair = rep.logits(hidden, g.position, pair=True)
        one_by_one = rep.logits(hidden, g.position)
    assert pair.shape == (2, one_by_one.shape[1]) and float((pair - one_by_one).abs().max()) < 1e-10
    full = rep.full_pass(g.position)
    assert full.logits.shape == full.captured.shape and int(full.captured.argmax()) == g.token_id


def test_a_build_leaves_pytorchs_threads_as_they_were(en_hi):
    before = torch.get_num_threads()
    seen = []
    torch.set_num_threads(2)
    try:
        build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET), progress=lambda *a: seen.append(torch.get_num_threads()))
        assert torch.get_num_threads() == 2 and set(seen) == {1}  # a small model is built on one thread
        seen.clear()
        build_graph(en_hi, en_hi.prepare_run(SOURCE, TARGET), threads=2,
                    progress=lambda *a: seen.append(torch.get_num_threads()))  # fmt: skip
        assert torch.get_num_threads() == 2 and set(seen) == {2}
    finally:
        torch.set_num_threads(before)
