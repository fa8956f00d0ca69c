"""The Trajectories view: every token's path drawn at the core's PCA coordinates, the explained variance stated,
a hover naming the dot, a click going to its step, the fit-on choice, and the exports (PNG, SVG, PDF, CSV)."""

from __future__ import annotations

import csv
import io

import numpy as np
from PySide6.QtCore import Qt

from app.views.trajectory_view import TrajectoryView
from scratchformer.analyses import trajectory
from tests.app.conftest import run_and_wait

SOURCE = "the girl eats an apple"


def _shown(qtbot, make_window):
    w = make_window(source=SOURCE, target="", model="en-hi")
    run_and_wait(qtbot, w)
    view = next(v for v in w.views if isinstance(v, TrajectoryView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: not view.is_busy() and view.value is not None, timeout=30_000)
    return w, view


def _drawn(view) -> list[tuple[np.ndarray, np.ndarray]]:
    return [line.getData() for line in view._items]


def test_paths_are_the_cores_coordinates(qtbot, make_window):
    w, view = _shown(qtbot, make_window)
    core = trajectory.compute(w.current_bundle(), w.current_trace())
    src, tgt = len(w.current_trace().source_tokens[0]), len(w.current_trace().target_tokens[0])
    drawn = _drawn(view)
    assert len(drawn) == src + tgt  # one path per source token and per decoder-input token
    encoder = [i for i, s in enumerate(core.stacks) if s == "encoder"]
    decoder = [i for i, s in enumerate(core.stacks) if s == "decoder"]
    for j in range(src):  # the encoder's paths come first, a vertex per encoder point
        xs, ys = drawn[j]
        np.testing.assert_allclose(xs, [core.coords[i][j, 0] for i in encoder], rtol=1e-9)
        np.testing.assert_allclose(ys, [core.coords[i][j, 1] for i in encoder], rtol=1e-9)
    for j in range(tgt):
        xs, ys = drawn[src + j]
        np.testing.assert_allclose(xs, [core.coords[i][j, 0] for i in decoder], rtol=1e-9)
    share = f"{core.explained_variance[0]:.1%}"
    assert share in view.caption.text() and share in view.plot.getPlotItem().getAxis("bottom").labelText

    # hover names the dot; a click on it goes to its step
    path, vertex = src + 1, 3
    at = view.vertex_point(path, vertex)
    view._hovered(view.plot.mapToScene(at))
    name = core.points[decoder[vertex]]
    assert name in view.hover_label.text() and view.paths.paths[path].token in view.hover_label.text()
    qtbot.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=at)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=30_000)
    assert w.current_step().name == name
    assert len(view._current.data) == tgt  # the current step's dots are ringed

    # fitting on one step: the core's projection onto that step's axes
    fit = core.points[encoder[-1]]
    view.fit_box.setCurrentIndex(view.fit_box.findData(fit))
    view.fit_box.activated.emit(view.fit_box.currentIndex())
    qtbot.waitUntil(lambda: not view.is_busy() and view.value is not None and view.value.fit_on == fit,
                    timeout=30_000)
    refit = trajectory.compute(w.current_bundle(), w.current_trace(), fit_on=fit)
    np.testing.assert_allclose(_drawn(view)[0][0], [refit.coords[i][0, 0] for i in encoder], rtol=1e-9)


def test_trajectories_export(qtbot, make_window, tmp_path, monkeypatch):
    from app.export import actions

    w, view = _shown(qtbot, make_window)
    for fmt in ("png", "svg", "pdf"):
        target = tmp_path / f"paths.{fmt}"
        monkeypatch.setattr(actions, "ask_save_path", lambda *_a, t=target: str(t))
        w.request_export(f"view_{fmt}")
        assert target.exists() and target.stat().st_size > 1000, w.message_text()
    assert (tmp_path / "paths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "paths.pdf").read_bytes()[:5] == b"%PDF-"
    assert "<svg" in (tmp_path / "paths.svg").read_text()
    rows = list(csv.DictReader(io.StringIO(view.save_csv(tmp_path / "paths.csv").read_text())))
    core = view.value
    assert len(rows) == sum(len(t) for t in core.tokens)
    assert abs(float(rows[0]["pc1"]) - core.coords[0][0, 0]) < 1e-6 and rows[0]["token"] == core.tokens[0][0]


def test_many_paths_are_drawn_as_a_few_items_and_still_named_on_hover(qtbot, make_window, monkeypatch):
    """A long input (hundreds of tokens) must not add three plot items per token on the UI thread: past APART
    paths, each stack is one line item (paths apart by NaN breaks), and a hover still finds any dot."""
    from app.views import trajectory_view

    monkeypatch.setattr(trajectory_view, "APART", 4)  # en-hi's 11 paths count as many
    w, view = _shown(qtbot, make_window)
    core = view.value
    assert len(view._items) == 2  # the encoder's paths and the decoder's, one item each
    xs, ys = view._items[0].getData()
    encoder = [i for i, s in enumerate(core.stacks) if s == "encoder"]
    src = len(core.tokens[encoder[0]])
    expected = np.concatenate([np.append([core.coords[i][j, 0] for i in encoder], np.nan) for j in range(src)])
    np.testing.assert_allclose(xs, expected, rtol=1e-9)  # NaN where one token's path ends and the next begins
    assert len(view.plot.getPlotItem().items) <= 8  # lines, dots and starts per stack, and the current-step ring
    assert "share one colour per stack" in view.caption.text()
    path, vertex = src + 2, 1  # a decoder token's dot
    view._hovered(view.plot.mapToScene(view.vertex_point(path, vertex)))
    assert view.paths.paths[path].token in view.hover_label.text()
