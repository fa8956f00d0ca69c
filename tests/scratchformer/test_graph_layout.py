"""The attribution graph's picture as plot data (scratchformer.plotdata.graph_layout): nodes by position and layer
(an encoder-decoder's two sides apart, a decoder-only model's one), markers by influence, edges by weight and sign,
supernodes whose edges are their members' sums, labels that never overlap, and the JSON export the command's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.folder import save
from scratchformer.features.points import ffn_input, ffn_steps
from scratchformer.graph import build_graph
from scratchformer.graph.influence import prune
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata.graph_layout import (
    CELL_H,
    CELL_W,
    LOGIT_SIZE,
    NEGATIVE,
    POSITIVE,
    WIDTHS,
    Supernode,
    graph_payload,
    label_box,
    layout_graph,
    node_text,
    place_labels,
)
from tests.scratchformer.graph_fixtures import one_thread  # noqa: F401 - one PyTorch thread


@pytest.fixture(scope="module")
def result():
    """en-hi's graph of the token after a typed target (two source positions reach it through the cross-attention)."""
    bundle = load_model("en-hi")
    return build_graph(bundle, bundle.prepare_run("the girl eats an apple", "लड़की सेब"))


def test_nodes_sit_by_position_and_layer_on_two_sides(result):
    g, lay = result.graph, layout_graph(result)
    kept = result.kept_nodes()
    assert sorted(lay.ids) == sorted(g.nodes[i].id for i in kept) and len(lay) == len(kept)
    n_src = len(result.tokens["encoder"])
    enc, dec = lay.panels
    assert (enc.x0, enc.x1) == (-0.5, n_src - 0.5) and dec.x0 > enc.x1  # the decoder's panel right of the source's
    offset = dec.x0 + 0.5
    for i, nid in enumerate(lay.ids):
        n = g.nodes[lay.members[i][0]]
        column = n.position + (offset if n.side == "decoder" else 0.0)
        assert abs(lay.x[i] - column) <= CELL_W / 2 + 1e-9, nid
        assert abs(lay.y[i] - (n.layer + 1)) <= CELL_H / 2 + 1e-9, nid
        if n.kind in ("embedding", "logit"):
            assert (lay.x[i], lay.y[i]) == (column, n.layer + 1)  # one to a cell: at its centre
    logit = lay.ids.index(g.nodes[g.logit_index].id)
    assert lay.y[logit] == max(lay.y) == g.nodes[g.logit_index].layer + 1 and lay.size[logit] == LOGIT_SIZE
    assert [t for _, t in lay.columns] == result.tokens["encoder"] + result.tokens["decoder"]
    assert lay.rows[0] == (0.0, "embeddings") and lay.rows[-1][1].endswith("logit")
    # markers grow with influence
    others = [i for i in range(len(lay)) if lay.kinds[i] != "logit"]
    order = sorted(others, key=lambda i: lay.influence[i])
    assert np.all(np.diff(lay.size[order]) >= 0)
    assert lay.labels[lay.kinds.index("feature")].startswith("L")  # 'L1 F483'


def test_edges_are_the_kept_edges_with_width_by_weight_and_colour_by_sign(result):
    g, lay = result.graph, layout_graph(result)
    assert lay.edges_kept == len(lay.edge_weight) == int(result.kept.edges.sum())
    index = {n.id: i for i, n in enumerate(g.nodes)}
    for s, t, w in zip(lay.edge_source, lay.edge_target, lay.edge_weight):
        a, b = index[lay.ids[t]], index[lay.ids[s]]
        assert bool(result.kept.edges[a, b]) and w == float(g.adjacency[a, b])
    order = np.argsort(np.abs(lay.edge_weight))
    assert np.all(np.diff(lay.edge_bucket[order]) >= 0) and lay.edge_bucket.max() == len(WIDTHS) - 1
    batches = lay.edge_batches()
    assert sum(len(b.xy) // 2 for b in batches) == len(lay.edge_weight)
    assert {b.rgba[:3] for b in batches} <= {POSITIVE, NEGATIVE}
    for b in batches:  # each pair of points is one edge, from its source up to its target
        assert b.xy.shape[1] == 2 and len(b.xy) % 2 == 0
    assert [b.width for b in batches] == sorted(b.width for b in batches)  # weakest drawn first
    # a cap keeps the strongest
    everything = prune(g, 1.0, 1.0)
    capped = layout_graph(result, everything, max_edges=50)
    assert len(capped.edge_weight) == 50 and capped.edges_kept > 50
    strongest = np.sort(np.abs(layout_graph(result, everything).edge_weight))[-50:]
    assert np.allclose(np.sort(np.abs(capped.edge_weight)), strongest)


def test_a_supernodes_edges_are_the_sums_of_its_members(result):
    g = result.graph
    kept = prune(g, 0.95)
    plain = layout_graph(result, kept)
    s, t = next((s, t) for s, t in zip(plain.edge_source, plain.edge_target)
                if plain.kinds[t] == "feature" and plain.kinds[s] == "feature")  # an edge inside the group  # fmt: skip
    third = next(nid for nid, k in zip(plain.ids, plain.kinds) if k == "feature" and nid not in (plain.ids[s],
                                                                                                 plain.ids[t]))
    members = [plain.ids[s], plain.ids[t], third]
    grouped = layout_graph(result, kept, [Supernode("girl", tuple(members))])
    assert "group:girl" in grouped.ids and not set(members) & set(grouped.ids)
    assert len(grouped) == len(plain) - len(members) + 1
    gi = grouped.ids.index("group:girl")
    mine = {plain.ids.index(m) for m in members}
    assert grouped.influence[gi] == pytest.approx(sum(plain.influence[i] for i in mine))
    assert grouped.x[gi] == pytest.approx(np.mean([plain.x[i] for i in mine]))
    for other in set(grouped.ids) - {"group:girl"}:
        o_plain, o_grouped = plain.ids.index(other), grouped.ids.index(other)
        for into in (True, False):  # the group → other, and other → the group
            def joins(s, t, a, b, into=into):
                return (s in a and t == b) if into else (t in a and s == b)

            want = sum(w for s, t, w in zip(plain.edge_source, plain.edge_target, plain.edge_weight)
                       if joins(s, t, mine, o_plain))  # fmt: skip
            got = sum(w for s, t, w in zip(grouped.edge_source, grouped.edge_target, grouped.edge_weight)
                      if joins(s, t, {gi}, o_grouped))  # fmt: skip
            assert got == pytest.approx(want, abs=1e-12), (other, into)
    inside = sum(1 for s, t in zip(plain.edge_source, plain.edge_target) if s in mine and t in mine)
    assert inside > 0  # (the members' own edges are left out)
    assert "Supernode “girl”: 3 nodes" in node_text(result, kept, grouped, gi)


def test_labels_never_overlap_and_the_logit_is_labelled_first(result):
    lay = layout_graph(result, prune(result.graph, 1.0))
    char_w, line_h, unit_h = 0.05, 0.08, 0.004
    shown = place_labels(lay, char_w, line_h, unit_h, limit=40)
    assert shown[0] == lay.kinds.index("logit") and 0 < len(shown) <= 40
    boxes = [label_box(lay, i, char_w, line_h, unit_h) for i in shown]
    for a in range(len(boxes)):
        for b in range(a):
            x0, x1, y0, y1 = boxes[a]
            u0, u1, v0, v1 = boxes[b]
            assert not (x0 < u1 and u0 < x1 and y0 < v1 and v0 < y1), (lay.labels[shown[a]], lay.labels[shown[b]])
    # a box clears its marker
    for i in shown:
        x0, x1, y0, y1 = label_box(lay, i, char_w, line_h, unit_h)
        assert not (y0 <= lay.y[i] <= y1)


def test_hover_text_says_the_nodes_numbers(result):
    g, lay = result.graph, layout_graph(result)
    i = max((k for k in range(len(lay)) if lay.kinds[k] == "feature"), key=lambda k: lay.influence[k])
    node = g.nodes[lay.members[i][0]]
    text = node_text(result, result.kept, lay, i)
    assert f"feature {node.feature}" in text and f"layer {node.layer}" in text and node.token in text
    assert f"activation {node.activation:.4g}" in text and f"influence {lay.influence[i]:.3f}" in text
    row = g.adjacency[lay.members[i][0]]
    strongest = int(row.abs().argmax())
    assert f"{float(row[strongest]):+.4g}" in text.splitlines()[3]  # the strongest incoming contribution first


def test_the_json_export_is_the_commands(result):
    payload = graph_payload(result)
    assert payload == result.to_dict()
    kept = prune(result.graph, 0.6)
    lay = layout_graph(result, kept)
    payload = graph_payload(result, kept, [Supernode("a", tuple(lay.ids[:2]))])
    assert sorted(n["id"] for n in payload["nodes"]) == sorted(lay.ids)
    assert payload["supernodes"] == [{"name": "a", "members": lay.ids[:2]}]


def test_a_decoder_only_model_has_one_panel(tmp_path):
    bundle = load_model("llama-tiny")
    gen = torch.Generator().manual_seed(0)
    for step in ffn_steps(bundle.model):
        d = Dictionary(64, 96, "standard", info=DictionaryInfo(ffn_input(bundle.model, step), step, "llama-tiny",
                                                                  "transcoder"))  # fmt: skip
        d.reset_parameters(gen)
        save(d, tmp_path / step)
    result = build_graph(bundle, bundle.prepare_run("3 1 4 1 5"), tmp_path)
    lay = layout_graph(result)
    assert len(lay.panels) == 1 and lay.panels[0].x0 == -0.5
    assert [t for _, t in lay.columns] == result.tokens["decoder"]
    assert set(lay.kinds) <= {"feature", "error", "embedding", "logit"} and lay.kinds.count("logit") == 1
