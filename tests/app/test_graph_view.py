"""The Graph view (issue 45): en-hi's attribution graph built off the UI thread and drawn as the core returns it, a
hover that says a node's numbers, the Nodes and Edges sliders pruning the same graph again as the core prunes,
supernodes whose edges are their members' sums, Cancel drawing nothing, a feature's card and its step, exports that
decode (PNG, SVG, PDF, JSON), and bad input as one sentence. The QK panel: tests/app/test_graph_qk_view.py."""

from __future__ import annotations

import json
import threading
import time
import xml.etree.ElementTree as ET

import pytest
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QImage

from app.views.graph.view import GraphView
from app.views.step_view import StepView
from scratchformer.features.bundled import bundled_transcoders
from scratchformer.features.points import ffn_input
from scratchformer.graph.influence import prune
from tests.app.conftest import run_and_wait


def show_graph(qtbot, w, built: bool = True) -> GraphView:
    view = next(v for v in w.views if isinstance(v, GraphView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not w.is_busy() and not view.is_busy(), timeout=60_000)
    if built:
        assert view.built is not None, view.status.text()
    return view


def drawn_points(view: GraphView) -> int:
    return sum(len(dots.data) for dots in view.plot._nodes.values())


def record_threads(monkeypatch, module, name: str) -> list:
    """The threads `module.name` is called on from now on (it still does its work)."""
    threads, real = [], getattr(module, name)

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return threads


def one_sentence(text: str) -> None:
    assert text and "\n" not in text and "Traceback" not in text and text.endswith(".")


def test_the_graph_is_built_off_the_ui_thread_and_draws_the_nodes_the_core_returns(qtbot, en_hi, monkeypatch):
    import scratchformer.graph as graph

    real = graph.build_graph
    threads = record_threads(monkeypatch, graph, "build_graph")
    view = show_graph(qtbot, en_hi)
    assert threads and all(t is not threading.main_thread() for t in threads)
    result = en_hi.current_result()
    expected = real(result.bundle, result.inputs).to_dict()  # the command's graph of this run
    assert sorted(view.built.layout.ids) == sorted(n["id"] for n in expected["nodes"])
    assert drawn_points(view) == len(expected["nodes"])
    assert sum(len(c.xData) // 2 for c in view.plot._edges if c.xData is not None) == len(expected["edges"])
    assert f"“{expected['logit']['token']}”" in view.status.text() and "replacement score" in view.status.text()
    # a step change asks again and finds it built
    before = view.built
    en_hi.next_step()
    assert view.built is before and not view.is_busy()


def test_hovering_a_node_says_its_numbers(qtbot, en_hi):
    view = show_graph(qtbot, en_hi)
    lay = view.built.layout
    i = max((k for k in range(len(lay)) if lay.kinds[k] == "feature"), key=lambda k: lay.influence[k])
    node = view.built.result.graph.nodes[lay.members[i][0]]
    at = view.plot.node_point(i)
    view.plot._moved(view.plot.mapToScene(at))
    text = view.hover_text
    assert f"feature {node.feature}" in text and f"layer {node.layer}" in text and node.token in text
    assert f"activation {node.activation:.4g}" in text and f"influence {lay.influence[i]:.3f}" in text
    assert "Strongest incoming contributions" in text
    assert en_hi.hover_label.text() == text.splitlines()[0]
    # a click selects it: its text stays below the plot, and its card and step are a click away
    qtbot.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert view.selected == {lay.ids[i]} and view.details.text() == view.describe(i)
    assert view.card_button.isEnabled() and view.step_button.isEnabled()


def test_the_slider_prunes_the_same_graph_again_as_the_core_does(qtbot, en_hi):
    view = show_graph(qtbot, en_hi)
    result = view.built.result
    counts = {}
    for threshold in (0.6, 0.95, 0.8):
        view.set_threshold(threshold)
        qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
        assert view.built.result is result  # no new attribution: only the pruning
        kept = prune(result.graph, threshold, 0.98)
        want = sorted(result.graph.nodes[i].id for i in range(len(result.graph.nodes)) if bool(kept.nodes[i]))
        assert sorted(view.built.layout.ids) == want and drawn_points(view) == len(want)
        assert view.built.layout.edges_kept == int(kept.edges.sum())
        counts[threshold] = len(want)
    assert counts[0.6] < counts[0.8] < counts[0.95]


def test_the_edges_slider_prunes_the_edges_as_the_core_does_off_the_ui_thread(qtbot, en_hi, monkeypatch):
    import scratchformer.graph.influence as influence

    real = influence.prune
    threads = record_threads(monkeypatch, influence, "prune")
    view = show_graph(qtbot, en_hi)
    result = view.built.result
    view.set_threshold(0.9)
    edges = {}
    for edge_t in (0.6, 1.0, 0.85):
        t0 = time.perf_counter()
        view.set_edge_threshold(edge_t)
        assert time.perf_counter() - t0 < 0.1  # the slider only starts the wait; the pruning runs in a job
        assert view.edge_label.text() == f"{round(edge_t * 100)} %"
        qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
        assert view.built.result is result and view.built.edge_threshold == edge_t  # no new attribution
        kept = real(result.graph, 0.9, edge_t)
        n_edges = int(kept.edges.sum())
        assert view.built.layout.edges_kept == n_edges
        assert sum(len(c.xData) // 2 for c in view.plot._edges if c.xData is not None) == n_edges
        want = sorted(result.graph.nodes[i].id for i in range(len(result.graph.nodes)) if bool(kept.nodes[i]))
        assert sorted(view.built.layout.ids) == want
        all_edges = int((result.graph.adjacency != 0).sum())
        assert f"{len(want)} of {len(result.graph.nodes)} nodes kept" in view.status.text()
        assert f"{n_edges} of {all_edges} edges kept" in view.status.text()
        edges[edge_t] = n_edges
    assert edges[0.6] < edges[0.85] < edges[1.0]
    assert threads and all(t is not threading.main_thread() for t in threads)


def test_a_supernodes_edges_are_the_sums_of_its_members(qtbot, en_hi, monkeypatch):
    view = show_graph(qtbot, en_hi)
    view.set_threshold(0.95)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    plain = view.built.layout
    features = [i for i in range(len(plain)) if plain.kinds[i] == "feature"][:3]
    band = QRectF(QPointF(plain.x.min() - 1, plain.y.min() - 1), QPointF(plain.x.max() + 1, plain.y.max() + 1))
    view.plot._band(band, False)  # a Shift-drawn band around every node selects them all
    assert view.selected == set(plain.ids)
    view.select(features[:1])
    view.select(features[1:], add=True)  # as Ctrl-click or a Ctrl-drawn band adds
    assert view.selected == {plain.ids[i] for i in features}
    monkeypatch.setattr("app.views.graph.view.ask_name", lambda parent, suggested: "girl")
    view.group_button.click()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    lay = view.built.layout
    gi = lay.ids.index("group:girl")
    assert len(lay) == len(plain) - 2 and drawn_points(view) == len(lay)
    mine = set(features)
    for other in set(lay.ids) - {"group:girl"}:
        o_plain, o_lay = plain.ids.index(other), lay.ids.index(other)
        want = sum(w for s, t, w in zip(plain.edge_source, plain.edge_target, plain.edge_weight)
                   if s in mine and t == o_plain)  # fmt: skip
        got = sum(w for s, t, w in zip(lay.edge_source, lay.edge_target, lay.edge_weight) if s == gi and t == o_lay)
        assert got == pytest.approx(want, abs=1e-12), other
    assert view.selected == {"group:girl"} and "Supernode “girl”" in view.details.text()
    view.set_threshold(0.9)  # pruned again, the group stays
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    assert "group:girl" in view.built.layout.ids
    view.ungroup_button.click()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    assert "group:girl" not in view.built.layout.ids and view.groups == []
    assert view.group_selected("too few") is False and "Select two nodes" in view.status.text()


def test_cancel_draws_nothing(qtbot, en_hi, monkeypatch):
    import scratchformer.graph as graph

    real = graph.build_graph

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(graph, "build_graph", slow)
    view = next(v for v in en_hi.views if isinstance(v, GraphView))
    en_hi.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.cancel_button.isVisible(), timeout=10_000)
    view.cancel()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    assert view.built is None and drawn_points(view) == 0 and not view.progress.isVisible()
    assert view.status.text().startswith("Cancelled")
    view.build_button.click()  # and Build builds it
    qtbot.waitUntil(lambda: not view.is_busy() and view.built is not None, timeout=30_000)
    assert drawn_points(view) == len(view.built.layout)


def test_the_exports_write_png_svg_pdf_and_the_commands_json(qtbot, en_hi, tmp_path, monkeypatch):
    view = show_graph(qtbot, en_hi)
    png = view.export_picture(tmp_path / "g.png")
    image = QImage(str(png))
    assert not image.isNull() and image.width() > 400 and image.height() > 300
    svg = ET.parse(view.export_picture(tmp_path / "g.svg")).getroot()
    assert svg.tag.endswith("svg") and "Attribution graph" in (tmp_path / "g.svg").read_text(encoding="utf-8")
    pdf = view.export_picture(tmp_path / "g.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"%%EOF" in pdf[-32:]
    payload = json.loads(view.export_json(tmp_path / "g.json").read_text(encoding="utf-8"))
    assert payload == view.built.result.to_dict()  # what `scratchformer graph --json` prints for it
    assert set(payload) == {"nodes", "edges", "logit", "scores", "pruned"}
    # File › Export › Current view as … draws the same picture
    monkeypatch.setattr("app.export.actions.ask_save_path", lambda *a: str(tmp_path / "view.svg"))
    en_hi.request_export("view_svg")
    assert ET.parse(tmp_path / "view.svg").getroot().tag.endswith("svg"), en_hi.message_text()


def test_a_feature_has_its_card_and_its_step(qtbot, en_hi, tmp_path):
    from app.views.features_view import FeaturesView

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the girl eats an apple\nthe boy reads a book\nthe woman drinks water\n", encoding="utf-8")
    next(v for v in en_hi.views if isinstance(v, FeaturesView)).corpus_edit.setText(str(corpus))
    view = show_graph(qtbot, en_hi)
    lay = view.built.layout
    i = next(k for k in range(len(lay)) if lay.kinds[k] == "feature")
    node = view.built.result.graph.nodes[lay.members[i][0]]
    view.select([i])
    view.card_button.click()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=60_000)
    assert view.card.plot is not None and view.card.plot.title.endswith(str(node.feature)), view.status.text()
    assert view.card_scroll.isVisible()
    view.step_button.click()  # no dictionary attached: the step its transcoder reads
    assert en_hi.current_step().name == ffn_input(en_hi.current_bundle().model, node.step)
    assert isinstance(en_hi.current_view(), StepView)


def test_an_embedding_and_the_logit_go_to_their_steps(qtbot, en_hi):
    """An embedding node is the token + position its side's layers read (the last step of that embedding), the
    logit is the output layer's logits."""
    view = show_graph(qtbot, en_hi)
    lay = view.built.layout
    nodes = [view.built.result.graph.nodes[lay.members[k][0]] for k in range(len(lay))]
    src = next(k for k, n in enumerate(nodes) if n.kind == "embedding" and n.side == "encoder")
    view.select([src])
    assert view.step_button.isEnabled()
    view.step_button.click()
    assert en_hi.current_step().name == "src_embed.sum" and isinstance(en_hi.current_view(), StepView)
    view = show_graph(qtbot, en_hi)
    view.select([next(k for k, n in enumerate(nodes) if n.kind == "logit")])
    view.step_button.click()
    assert en_hi.current_step().name == "generator.logits"


def test_a_set_that_misses_a_layer_is_one_sentence(qtbot, en_hi, tmp_path):
    root = tmp_path / "set"
    root.mkdir()
    for sub in sorted(bundled_transcoders("en-hi").iterdir())[:-1]:  # every feed-forward but the last
        (root / sub.name).symlink_to(sub, target_is_directory=True)
    view = show_graph(qtbot, en_hi)
    view.use_transcoders(str(root))
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=30_000)
    text = view.status.text()
    one_sentence(text)
    assert "does not cover every feed-forward layer" in text and "is missing" in text
    assert view.built is None and drawn_points(view) == 0 and not view.plot.isVisible()


def test_a_model_with_no_transcoders_is_one_sentence(qtbot, ran_window):
    view = show_graph(qtbot, ran_window, built=False)
    one_sentence(view.status.text())
    assert "ships no transcoder set" in view.status.text() and "Transcoders…" in view.status.text()
    assert view.built is None and not view.is_busy()


def test_hover_and_click_on_nothing_say_nothing(qtbot, en_hi):
    view = show_graph(qtbot, en_hi)
    view.select([0])
    corner = QPoint(3, 3)
    view.plot._moved(view.plot.mapToScene(corner))
    assert view.plot.node_at(view.plot.mapToScene(corner)) == -1
    qtbot.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=corner)
    assert view.selected == set() and not view.card_button.isEnabled()


def test_the_attached_transcoders_are_read_and_a_feature_opens_its_features_step(qtbot, en_hi):
    folders = sorted(str(p) for p in bundled_transcoders("en-hi").iterdir())
    en_hi.dictionaries = list(folders)  # Run › Attach dictionary…, each transcoder of the set
    run_and_wait(qtbot, en_hi)
    assert en_hi.current_trace() is not None, en_hi.message_text()
    view = next(v for v in en_hi.views if isinstance(v, GraphView))
    en_hi.tabs.setCurrentWidget(view)
    attached = next(i for i in range(view.choice_combo.count()) if view.choice_combo.itemData(i).kind == "attached")
    view.choice_combo.setCurrentIndex(attached)
    view.refresh()
    qtbot.waitUntil(lambda: not view.is_busy() and view.built is not None, timeout=60_000)
    assert view.built.ask.choice.kind == "attached"
    from scratchformer.graph import build_graph

    result = en_hi.current_result()
    bundled = build_graph(result.bundle, result.inputs).to_dict()  # the same transcoders, read as the bundled set
    assert sorted(view.built.layout.ids) == sorted(n["id"] for n in bundled["nodes"])
    lay = view.built.layout
    i = next(k for k in range(len(lay)) if lay.kinds[k] == "feature")
    node = view.built.result.graph.nodes[lay.members[i][0]]
    view.select([i])
    view.step_button.click()
    step = f"{ffn_input(en_hi.current_bundle().model, node.step)}.dict.features"
    assert en_hi.current_step().name == step and isinstance(en_hi.current_view(), StepView)
    assert float(en_hi.current_trace()[step].tensor[0, node.position, node.feature]) == pytest.approx(
        node.activation, rel=1e-4)  # the graph's activation is the trace's


def test_a_run_with_an_ablated_head_is_graphed_as_it_ran(qtbot, en_hi):
    from scratchformer.graph import build_graph
    from scratchformer.patching.interventions import HeadChange

    show_graph(qtbot, en_hi)
    old = en_hi.current_result()
    change = HeadChange("decoder.1.cross_attn", 0, "zero")
    en_hi.interventions_panel.add(change)
    qtbot.waitUntil(lambda: not en_hi.is_busy() and en_hi.current_result() is not old, timeout=60_000)
    view = show_graph(qtbot, en_hi)
    assert "decoder.1.cross_attn.head0:zero" in view.status.text()
    result = en_hi.current_result()
    changed = build_graph(result.bundle, result.inputs, interventions=[change]).to_dict()
    assert view.built.result.to_dict() == changed != build_graph(result.bundle, result.inputs).to_dict()
    from app.views.graph.work import replacement_of

    rep = replacement_of(view.built)  # made again for the Why attention? panel: the same changed run's nodes
    assert float(rep.patterns["decoder.1.cross_attn"][0, 0].abs().max()) == 0.0  # the zeroed head reads nothing


def test_a_run_with_clamped_features_says_its_graph_does_not_read_them(qtbot, en_hi):
    from scratchformer.features.attach import Clamp
    from scratchformer.patching.interventions import HeadChange

    folders = sorted(str(p) for p in bundled_transcoders("en-hi").iterdir())
    en_hi.dictionaries = list(folders)
    step = ffn_input(en_hi.current_bundle().model, "decoder.1.ffn.out")
    en_hi.set_clamps([Clamp(step, 3, 5.0)])
    qtbot.waitUntil(lambda: not en_hi.is_busy() and bool(en_hi.current_result().request.clamps), timeout=60_000)
    view = show_graph(qtbot, en_hi)
    text = view.status.text()
    assert f"{step}:3=5" in text and "does not read" in text
    one_sentence(text.split("Note: ")[-1])
    en_hi.interventions_panel.add(HeadChange("decoder.1.cross_attn", 0, "zero"))  # with a head changed as well
    qtbot.waitUntil(lambda: not en_hi.is_busy() and bool(en_hi.current_trace().interventions)
                    and any(isinstance(i, HeadChange) for i in en_hi.current_trace().interventions), timeout=60_000)
    view = show_graph(qtbot, en_hi)
    assert "decoder.1.cross_attn.head0:zero" in view.status.text() and f"{step}:3=5" in view.status.text()
    assert view.built.ask.interventions == (HeadChange("decoder.1.cross_attn", 0, "zero"),)


def test_another_likely_tokens_logit_is_explained_when_picked(qtbot, en_hi):
    from scratchformer.graph import build_graph

    view = show_graph(qtbot, en_hi)
    likely = view.built.result.likely
    assert view.token_combo.count() == len(likely) >= 2 and view.token_combo.currentData() is None
    assert view.token_combo.currentText().startswith(f"“{likely[0][1]}”")
    tid, token, _p = likely[1]
    view.token_combo.setCurrentIndex(1)
    view.token_combo.activated.emit(1)  # as a pick by hand
    qtbot.waitUntil(lambda: not view.is_busy() and view.built.ask.token == tid, timeout=60_000)
    result = en_hi.current_result()
    assert view.built.result.to_dict() == build_graph(result.bundle, result.inputs, token=tid).to_dict()
    assert f"The logit of “{token}”" in view.status.text() and "rank 2 here" in view.status.text()
    assert view.token_combo.currentIndex() == 1  # the box still says which token is explained
    view.position_combo.setCurrentIndex(0)
    view.position_combo.activated.emit(0)  # another position: back to its most likely token
    qtbot.waitUntil(lambda: not view.is_busy() and view.built.ask.position == 0, timeout=60_000)
    assert view.built.ask.token is None and view.token_combo.currentData() is None


def test_a_logit_difference_is_explained_when_a_versus_token_is_picked(qtbot, en_hi):
    from scratchformer.graph import build_graph

    view = show_graph(qtbot, en_hi)
    likely = view.built.result.likely
    assert view.versus_combo.currentData() is None and view.versus_combo.count() == len(likely)  # —, then the others
    assert likely[0][0] not in [view.versus_combo.itemData(i) for i in range(view.versus_combo.count())]
    against, token = view.versus_combo.itemData(1), likely[1][1]
    view.versus_combo.setCurrentIndex(1)
    view.versus_combo.activated.emit(1)
    qtbot.waitUntil(lambda: not view.is_busy() and view.built.ask.versus == against, timeout=60_000)
    result = en_hi.current_result()
    assert view.built.result.to_dict() == build_graph(result.bundle, result.inputs, versus=against).to_dict()
    assert view.status.text().startswith(f"The logit difference “{likely[0][1]}” − “{token}” at decoder position")
    view.token_combo.setCurrentIndex(view.token_combo.findData(against))  # explain that token itself: no difference
    view.token_combo.activated.emit(view.token_combo.currentIndex())
    qtbot.waitUntil(lambda: not view.is_busy() and view.built.ask.token == against, timeout=60_000)
    assert view.built.ask.versus is None and view.versus_combo.currentData() is None
