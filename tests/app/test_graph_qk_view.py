"""The Graph view's QK panel (issue 45): why attention moved it. A picked edge that crosses positions opens the
panel at its target's position against its source's; the panel's rows add up to the score the core's split_score
returns, its largest products are the core's, and the rest row is exactly the products not listed; a term's node
selects that node; a head the core refuses is the core's one sentence; the split runs in a job."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt

from app.views.graph.work import QK_TOP
from scratchformer.errors import UserError
from scratchformer.graph import build_graph
from scratchformer.graph.qk import _attention, split_score
from tests.app.test_graph_view import one_sentence, show_graph


def crossing_edge(view) -> int:
    """A drawn edge from the source (encoder) to the decoder between two single nodes, which a click at its middle
    picks (no node or other edge nearer there)."""
    lay, plot = view.built.layout, view.plot
    nodes = view.built.result.graph.nodes
    for k in range(len(lay.edge_source)):
        s, t = int(lay.edge_source[k]), int(lay.edge_target[k])
        a, b = nodes[lay.members[s][0]], nodes[lay.members[t][0]]
        at = plot.mapToScene(plot.edge_point(k))
        if a.side == "encoder" and b.side == "decoder" and plot.node_at(at) < 0 and plot.edge_at(at) == k:
            return k
    raise AssertionError("no edge crosses from the source to the decoder")


def core_graph(view):
    """The core's own graph of the run the view explains (with its replacement model)."""
    ask = view.built.ask
    return build_graph(ask.bundle, ask.inputs, position=view.built.result.graph.position)


def test_an_edges_split_adds_up_to_the_cores_score_and_a_term_selects_its_node(qtbot, en_hi, tmp_path, monkeypatch):
    view = show_graph(qtbot, en_hi)
    view.set_threshold(0.95)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    lay, nodes = view.built.layout, view.built.result.graph.nodes
    k = crossing_edge(view)
    qtbot.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=view.plot.edge_point(k))
    source, target = nodes[lay.members[int(lay.edge_source[k])][0]], nodes[lay.members[int(lay.edge_target[k])][0]]
    assert view.edge == (source.id, target.id) and view.selected == set() and view.plot.picked_edge == k
    assert "crosses positions" in view.details.text()
    view.qk_button.click()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    made = view.qk_panel.made
    assert made is not None, view.status.text()
    s = made.split
    assert s.attention.endswith("cross_attn") and (s.query, s.key) == (target.position, source.position)
    core = core_graph(view)
    rep = core.replacement_model
    assert s.head == int(rep.patterns[s.attention][0, :, s.query, s.key].argmax())  # the strongest head there
    every = split_score(rep, core.graph, s.attention, s.head, s.query, s.key, top=None)
    listed = split_score(rep, core.graph, s.attention, s.head, s.query, s.key, top=QK_TOP)
    rows = view.qk_panel.rows()
    assert sum(r.term for r in rows if r.kind != "total") == pytest.approx(every.score, abs=1e-9)
    assert rows[-1].kind == "total" and rows[-1].term == pytest.approx(every.score, abs=1e-12)
    products = [r for r in rows if r.kind == "term"]
    assert [r.ids for r in products] == [(a, b) for a, b, _ in listed.pairs]
    assert [r.term for r in products] == pytest.approx([t for _, _, t in listed.pairs], abs=1e-12)
    (bias,) = [r for r in rows if r.kind == "bias"]
    (rest,) = [r for r in rows if r.kind == "rest"]
    assert bias.term == pytest.approx(every.bias_term, abs=1e-12)
    assert rest.term == pytest.approx(sum(t for *_, t in every.pairs[len(products):]), abs=1e-9)
    table = view.qk_panel.table
    assert table.rowCount() == len(rows) and table.item(len(rows) - 1, 0).text() == f"{every.score:+.4f}"
    # each side's shares add up to the score too
    view.qk_panel.mode_combo.setCurrentIndex(view.qk_panel.mode_combo.findData("key"))
    view.qk_panel.mode_combo.activated.emit(view.qk_panel.mode_combo.currentIndex())
    shares = view.qk_panel.rows()
    assert [r.ids[0] for r in shares if r.kind == "term"] == [b for b, _ in listed.by_key]
    assert sum(r.term for r in shares if r.kind != "total") == pytest.approx(every.score, abs=1e-9)
    assert table.columnCount() == 2 and table.rowCount() == len(shares)
    # clicking a drawn node's cell selects it in the graph
    row = next(i for i, r in enumerate(shares) if r.kind == "term" and lay.index_of(r.ids[0]) is not None)
    item = table.item(row, 1)
    table.scrollToItem(item)
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=table.visualItemRect(item).center())
    assert view.selected == {shares[row].ids[0]} and view.edge is None
    # the exports: the table as CSV, the split as the command's JSON
    monkeypatch.setattr("app.export.actions.ask_save_path", lambda *a: str(tmp_path / "qk.csv"))
    view._export_qk("csv")
    read = list(csv.reader(io.StringIO((tmp_path / "qk.csv").read_text(encoding="utf-8"))))
    assert read[0] == ["share", "key_node", "key_node_id"] and len(read) == len(shares) + 1
    assert sum(float(r[0]) for r in read[1:-1]) == pytest.approx(every.score, abs=1e-9)
    monkeypatch.setattr("app.export.actions.ask_save_path", lambda *a: str(tmp_path / "qk.json"))
    view._export_qk("json")
    payload = json.loads((tmp_path / "qk.json").read_text(encoding="utf-8"))
    want = listed.to_dict()
    assert set(payload) == set(want) | {"names"} and payload["score"] == pytest.approx(want["score"], abs=1e-12)
    assert [(p["query"], p["key"]) for p in payload["pairs"]] == [(p["query"], p["key"]) for p in want["pairs"]]
    assert [p["term"] for p in payload["pairs"]] == pytest.approx([p["term"] for p in want["pairs"]], abs=1e-12)
    named = {n for p in payload["pairs"] for n in (p["query"], p["key"])} - {"bias"}
    assert named <= set(payload["names"]) and all(payload["names"][n] for n in named)


def test_a_head_the_core_refuses_is_its_one_sentence(qtbot, en_hi, monkeypatch):
    view = show_graph(qtbot, en_hi)
    model = view.built.ask.bundle.model
    monkeypatch.setattr(model.get_submodule("decoder.1.cross_attn"), "softcap", 30.0)  # as Gemma 2 caps its scores
    with pytest.raises(UserError) as refused:
        _attention(SimpleNamespace(model=model), "decoder.1.cross_attn")
    view.select([])
    view.qk_button.click()  # nothing selected: the last cross-attention at the explained position
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    assert view.qk_panel.ask().attention == "decoder.1.cross_attn"
    assert view.status.text() == str(refused.value) and "soft-caps its scores" in view.status.text()
    one_sentence(view.status.text())
    assert view.qk_panel.made is None and view.qk_panel.table.rowCount() == 0
    # another attention splits (the replacement is made again for it)
    view.qk_panel.aim("decoder.1.self_attn", 0, view.built.result.graph.position, None)
    view.split_qk()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    assert view.qk_panel.made is not None and view.qk_panel.made.split.attention == "decoder.1.self_attn"


def test_the_split_runs_off_the_ui_thread_and_cancel_drops_it(qtbot, en_hi, monkeypatch):
    import scratchformer.graph.qk as qk
    import scratchformer.graph.replacement as replacement

    threads = []
    real_split, real_rep = qk.split_score, replacement.LocalReplacement

    def slow_split(*args, **kwargs):
        threads.append(threading.current_thread())
        time.sleep(0.5)
        return real_split(*args, **kwargs)

    def watched_rep(*args, **kwargs):
        threads.append(threading.current_thread())
        return real_rep(*args, **kwargs)

    monkeypatch.setattr(qk, "split_score", slow_split)
    monkeypatch.setattr(replacement, "LocalReplacement", watched_rep)
    view = show_graph(qtbot, en_hi)
    feature = next(i for i, kind in enumerate(view.built.layout.kinds) if kind == "feature")
    view.select([feature])
    node = view.selected_node()
    t0 = time.perf_counter()
    view.qk_button.click()
    assert time.perf_counter() - t0 < 0.1 and view.is_busy() and view.progress.isVisible()
    view.cancel()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    assert view.qk_panel.made is None and view.status.text() == "Cancelled."
    view.split_qk()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    s = view.qk_panel.made.split
    assert s.attention == f"{node.side}.{node.layer}.self_attn" and s.query == node.position  # the node's own
    assert threads and all(t is not threading.main_thread() for t in threads)
