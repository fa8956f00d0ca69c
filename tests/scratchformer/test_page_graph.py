"""The interactive page carries the attribution graph (issue 45): `export --format html --graph` writes the
window's picture of the graph (plotdata.graph_layout) with every drawn node's numbers and the core's pruning at each
position of the page's slider, and the page draws it in a real browser, offline."""

from __future__ import annotations

import pytest

from scratchformer.cli import main
from scratchformer.graph import build_graph
from scratchformer.graph.influence import prune
from scratchformer.loading.bundle import load_model
from scratchformer.page import read_page
from scratchformer.page.graph import EDGE_THRESHOLD, THRESHOLDS, page_graph
from tests.scratchformer.chromium import NOT_INSTALLED, Browser, find_chromium

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def built():
    bundle = load_model("en-hi")
    result = build_graph(bundle, bundle.prepare_run(SOURCE))
    return result, page_graph(result)


def test_each_slider_position_keeps_what_the_core_keeps_at_that_threshold(built):
    result, G = built
    g = result.graph
    ids = [n.id for n in g.nodes]
    drawn = {i: node for i, node in enumerate(G["nodes"])}
    at = {level["threshold"]: level for level in G["levels"]}
    assert list(at) == list(THRESHOLDS) and G["levels"][G["default"]]["threshold"] == 0.8
    assert G["total"] == len(g.nodes)
    for t, level in at.items():
        kept = prune(g, t, EDGE_THRESHOLD)
        # the drawn nodes of a level are the core's kept nodes at that threshold
        assert {drawn[i]["id"] for i in level["nodes"]} == {ids[j] for j in range(len(ids)) if bool(kept.nodes[j])}
        assert level["kept_influence"] == pytest.approx(kept.kept_influence, abs=1e-3)
        for k in level["edges"]:  # an edge a level keeps joins two nodes it keeps
            s, d, _w, _b = G["edges"][k]
            assert s in level["nodes"] and d in level["nodes"]
    sizes = [len(at[t]["nodes"]) for t in THRESHOLDS]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]  # a wider share keeps more
    logit = G["nodes"][G["logit"]]
    assert logit["kind"] == "logit" and f"logit {float(g.real[-1]):.4g}" in logit["text"]
    assert len(ids) > len(G["nodes"])  # the page draws the pruned graph, not every node


def test_the_page_keeps_the_edges_at_the_graph_views_edge_threshold(built):
    result, G = built
    g = result.graph
    narrow = page_graph(result, edge_threshold=0.6)
    assert narrow["edge_threshold"] == 0.6 and G["edge_threshold"] == EDGE_THRESHOLD
    drawn = [n["id"] for n in narrow["nodes"]]
    ids = {n.id: i for i, n in enumerate(g.nodes)}
    for level in narrow["levels"]:
        kept = prune(g, level["threshold"], 0.6)
        edges = {(drawn[s], drawn[d]) for s, d, _w, _b in (narrow["edges"][k] for k in level["edges"])}
        want = {(a, b) for a in drawn for b in drawn if bool(kept.edges[ids[b], ids[a]])}
        assert edges == want
    assert sum(len(x["edges"]) for x in narrow["levels"]) < sum(len(x["edges"]) for x in G["levels"])


def test_the_export_writes_the_graph_into_the_page_and_refuses_it_elsewhere(tmp_path, capsys):
    out = tmp_path / "page"
    assert main(["export", "--model", "en-hi", "--source", SOURCE, "--format", "html", "--graph", "--out",
                 str(out)]) == 0  # fmt: skip
    index, _ = read_page((out / "page.html").read_text(encoding="utf-8"))
    assert index["graph"]["nodes"] and index["graph"]["title"].startswith("Attribution graph of “लड़की”")
    capsys.readouterr()
    for extra, expected in ((["--format", "png", "--graph"], "add --format html"),
                            (["--format", "html", "--transcoders", str(tmp_path)], "add --graph")):  # fmt: skip
        assert main(["export", "--model", "en-hi", "--source", SOURCE, "--out", str(tmp_path / "x"), *extra]) == 2
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1


@pytest.mark.skipif(find_chromium() is None, reason=NOT_INSTALLED)
def test_the_page_draws_the_graph_prunes_it_with_the_slider_and_says_a_nodes_numbers(built, tmp_path):
    from scratchformer.loading.bundle import load_model as load
    from scratchformer.page import page_data, write_page

    result, G = built
    bundle = load("en-hi")
    inputs = bundle.prepare_run(SOURCE)
    _, trace = bundle.run(inputs, keep_output=False)
    path = tmp_path / "page.html"
    write_page(path, page_data(bundle, trace, inputs, graph=G))
    with Browser() as b:
        b.open(path)
        b.wait_for("document.body.dataset.ready === '1'")
        b.evaluate("(() => { const d = document.getElementById('sf-graph-box'); d.open = true;"
                   " d.scrollIntoView(); })()")  # fmt: skip
        b.wait_for("document.getElementById('sf-graph').dataset.nodes !== undefined")
        default = G["levels"][G["default"]]
        assert int(b.evaluate("document.getElementById('sf-graph').dataset.nodes")) == len(default["nodes"])
        b.evaluate("(() => { const s = document.getElementById('sf-graph-threshold'); s.value = '5';"
                   " s.dispatchEvent(new Event('input')); })()")  # fmt: skip
        assert int(b.evaluate("document.getElementById('sf-graph').dataset.nodes")) == len(G["levels"][5]["nodes"])
        assert "95 %" in b.evaluate("document.getElementById('sf-graph-share').textContent")
        x, y = b.centre_of(f"#sf-graph [data-node='{G['logit']}']")
        b.hover(x, y)
        said = b.evaluate("document.getElementById('sf-graph-readout').textContent")
        assert said == G["nodes"][G["logit"]]["text"] and "Strongest incoming contributions" in said
        assert b.requests == []  # nothing left the page
