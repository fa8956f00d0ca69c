"""The edges' backward passes carry only the decoder positions their targets read (scratchformer.graph.packing):
the edges stay what full rows give, on an encoder-decoder and on a grouped-query decoder with a sliding window,
every target is read once from a row long enough for it, and a decoder that is not causal is never packed."""

from __future__ import annotations

import pytest
import torch

from scratchformer.graph import build_graph
from scratchformer.graph import replacement as replacement_module
from scratchformer.graph.attribution import rows
from scratchformer.graph.packing import Packing, deal, target_groups
from scratchformer.loading.bundle import load_model
from tests.scratchformer.graph_fixtures import one_thread  # noqa: F401 - one PyTorch thread
from tests.scratchformer.test_graph_architectures import random_variant


@pytest.fixture(scope="module")
def cases():
    en_hi = load_model("en-hi")
    long_text = "the old man sees the thirsty teacher and the girl eats an apple"
    llama, sets = random_variant(load_model("llama-tiny"), dict(sliding_window=4))
    return {
        "encoder-decoder": build_graph(
            en_hi, en_hi.prepare_run(long_text, "बूढ़ा आदमी प्यासे शिक्षक को देखता है"), prune=False
        ),  # fmt: skip
        "grouped-query decoder, sliding window": build_graph(
            llama, llama.prepare_run("3 1 4 1 5 9 2 6 5 3"), sets, prune=False
        ),  # fmt: skip
    }


def read(result, batch: int, packed: bool) -> tuple[torch.Tensor, list[list[int]]]:
    """Every target's incoming edges, and the rows' lengths of each packed pass made on the way."""
    rep, g = result.replacement_model, result.graph
    made, original = [], Packing.of

    def spy(lengths, length, device):
        made.append(list(lengths))
        return original(lengths, length, device)

    saved = rep.packable
    rep.packable = packed and saved
    replacement_module.Packing.of = spy
    try:
        return rows(rep, list(range(g.n_features + 1)), g.position, g.token_id, batch=batch), made
    finally:
        replacement_module.Packing.of = original
        rep.packable = saved


@pytest.mark.parametrize("case", ["encoder-decoder", "grouped-query decoder, sliding window"])
def test_packed_rows_give_the_edges_of_full_rows(cases, case):
    result = cases[case]
    g = result.graph
    assert result.replacement_model.packable
    packed, made = read(result, 16, True)
    full, none = read(result, 16, False)
    assert not none and len(made) == 1
    t = result.replacement_model.lengths()["decoder"]
    assert sum(made[0]) < 0.8 * len(made[0]) * t  # the rows carried well under every position
    assert float((packed - full).abs().max()) < 1e-12
    built = g.adjacency[[*range(g.n_features), g.logit_index]][:, : g.logit_index]  # read in the default batch
    assert float((packed - built).abs().max()) < 1e-12


def test_targets_on_the_encoder_alone_read_the_edges_of_full_rows(cases):
    result = cases["encoder-decoder"]
    g = result.graph
    encoder = [i for i, n in enumerate(g.nodes[: g.n_features]) if n.side == "encoder"][:40]
    edges = rows(result.replacement_model, encoder, g.position, g.token_id)
    assert float((edges - g.adjacency[encoder][:, : g.logit_index]).abs().max()) < 1e-12


def test_every_target_is_read_once_from_a_row_long_enough():
    gen = torch.Generator().manual_seed(0)
    parts = sorted(torch.randint(0, 5, (150,), generator=gen).tolist()) + [5]  # five layers' features, the logit
    positions = torch.randint(-1, 12, (151,), generator=gen).tolist()  # −1: an encoder feature
    positions[-1] = 11
    plan = deal(target_groups(parts, 32), positions, 32, 12)
    seen = sorted(i for one in plan.passes for _, i in one)
    assert seen == list(range(151))
    for one in plan.passes:
        assert len({b for b, _ in one}) == len(one) <= plan.rows <= 32  # one target a row in each pass
        assert all(plan.lengths[b] > positions[i] for b, i in one)
    assert max(plan.lengths) <= 12 and plan.lengths == sorted(plan.lengths)
    assert sum(plan.lengths) < 0.7 * plan.rows * 12


def test_small_groups_join_so_no_pass_reads_a_handful():
    assert target_groups([0] * 40 + [1] * 3 + [2] * 30 + [3], 32) == [0] * 40 + [1] * 3 + [1] * 30 + [1]
    assert target_groups([0, 0, 1], 32) == [0, 0, 0]  # one group: nothing before it to join
    plan = deal([0] * 40 + [1] * 31, list(range(40)) + list(range(31)), 32, 40)
    assert len(plan.passes) == 3 and plan.rows == 31  # 40 targets in two passes of 20, 31 in one


def test_a_decoder_that_is_not_causal_is_not_packed(cases):
    rep = cases["grouped-query decoder, sliding window"].replacement_model
    name = next(n for n in rep.patterns if n.startswith("decoder") and "self" in n)
    saved = rep.patterns[name]
    rep.patterns[name] = saved.clone()
    rep.patterns[name][0, 0, 0, -1] = 0.5  # the first position reads the last
    try:
        assert not rep._causal_decoder()
    finally:
        rep.patterns[name] = saved
    assert rep._causal_decoder()
