"""Token trajectories: every token's vector at every point of the residual stream, on the two principal
components of all of them (or of one chosen point's), drawn as one path per token — a dot per sublayer, the
token's name at its last dot. Hovering a dot names it (token and step); a click goes to that step.

Numbers: scratchformer.analyses.trajectory (the PCA, off the UI thread); paths: scratchformer.plotdata.trajectory;
CSV: scratchformer.plotdata.trajectory too.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QComboBox, QLabel

from scratchformer.plotdata import abbreviate
from scratchformer.plotdata.trajectory import TrajectoryPlot, trajectory_csv, trajectory_paths

from .analysis_base import AnalysisView

NEAR_PX = 9.0  # a hover or click this close to a dot (in pixels) is on it
LABEL_CHARS = 12
APART = 32  # up to this many paths each get a colour, a start marker and a label of their own (3 items each);
# more (a long text: 512 tokens) are drawn as one line item and one dot item per stack, so drawing stays a few
# items however long the input, and a hover names any dot
DOTS = 3000  # with more vertices than this, the paths are drawn as lines alone (a hover still finds each vertex)


class TrajectoryView(AnalysisView):
    title = "Trajectories"
    tooltip = "Every token's path through the layers' residual stream, on one PCA; click a dot to go to its step"
    explains = "trajectory"
    empty_text = "Run a model to follow its tokens through the layers."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.bar.addWidget(QLabel("PCA fitted on"))
        self.fit_box = QComboBox()
        self.fit_box.setToolTip("Which vectors the two principal components are fitted on: all points of the "
                                "stream, or one point's (every point is then projected onto its axes)")
        self.fit_box.addItem("all points", None)
        self.fit_box.activated.connect(lambda _i: self.recompute())
        self.bar.addWidget(self.fit_box)
        self.finish_bar()
        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setMouseTracking(True)
        self.layout_.addWidget(self.plot, 1)
        self.hover_label = QLabel(" ")
        self.hover_label.setStyleSheet("color: #333;")
        self.layout_.addWidget(self.hover_label)
        self.paths: TrajectoryPlot | None = None
        self._xy = np.zeros((0, 2))  # every drawn dot's (x, y), and below the (path, vertex) of each
        self._which: list[tuple[int, int]] = []
        self._items: list = []  # the line items drawn: one per path (a few paths) or one per stack (many)
        self._current = pg.ScatterPlotItem(size=15, pen=pg.mkPen("#d62728", width=2), brush=pg.mkBrush(0, 0, 0, 0))
        self._current.setZValue(10)
        self.plot.scene().sigMouseMoved.connect(self._hovered)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.show_body(False, self.empty_text)

    def show_body(self, shown: bool, text: str = "") -> None:
        super().show_body(shown, text)
        self.plot.setVisible(shown)
        self.hover_label.setVisible(shown)

    # --- computing and drawing -------------------------------------------------------------------------------

    def request(self, result) -> tuple:
        return (id(result), self.main.current_batch(), self.fit_box.currentData())

    def compute(self, result, key: tuple, job):
        from scratchformer.analyses import trajectory  # loaded with the view's first use, not at launch

        value = trajectory.compute(result.bundle, result.trace, batch=key[1], fit_on=key[2])
        value.drawn = trajectory_paths(value)  # the paths too are made here, off the UI thread
        return value

    def refresh(self) -> None:
        super().refresh()
        self._mark_current()  # the step changed, not the run: only the ring around its dots moves

    def draw(self, value) -> None:
        self._fill_fit_box(value)
        self.paths = paths = value.drawn
        self.plot.clear()
        item = self.plot.getPlotItem()
        item.setLabel("bottom", paths.x_title)
        item.setLabel("left", paths.y_title)
        item.setTitle(paths.title, size="10pt")
        both = len({p.stack for p in paths.paths}) > 1
        self._xy, self._which = paths.xy, paths.which  # every dot, for hover and click (made in the job)
        self._items = []
        if len(paths.paths) <= APART:
            self._draw_apart(paths, both)
        else:
            self._draw_together(paths, both)
        self.plot.addItem(self._current)
        self.plot.enableAutoRange()
        self.plot.getPlotItem().getViewBox().updateAutoRange()  # the range now, not on a later paint: hover reads it
        shares = ", ".join(f"PC{k + 1} {v:.1%}" for k, v in enumerate(value.explained_variance))
        fitted = f"the vectors of {value.fit_on}" if value.fit_on else "every vector of every point"
        text = (f"{len(paths.paths)} token paths through {len(value.points)} points. The two components explain "
                f"{shares} (together {sum(value.explained_variance):.1%}) of the variance of {fitted}. A triangle "
                "marks each path's start (the embeddings); hover a dot to name it, click it to go to its step.")
        if len(paths.paths) > APART:
            text += (f" With more than {APART} paths they share one colour per stack and carry no labels: hover a "
                     "dot to name its token.")
        if both:
            text += " Dashed: the encoder's tokens; solid: the decoder's."
        self.caption.setText(" ".join([text, *value.notes]))
        self._mark_current()
        self.main.refresh_explanation()

    def _draw_apart(self, paths, both: bool) -> None:
        """A few paths: each in its own hue, with its start marked and its token written at its end."""
        for i, path in enumerate(paths.paths):
            colour = pg.intColor(i, hues=max(len(paths.paths), 1), maxValue=210, sat=230)  # one hue per token
            dashed = both and path.stack == "encoder"
            pen = pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            line = pg.PlotDataItem(path.xs, path.ys, pen=pen, symbol="s" if dashed else "o", symbolSize=6,
                                   symbolBrush=colour, symbolPen=None)  # fmt: skip
            self.plot.addItem(line)
            self._items.append(line)
            start = pg.ScatterPlotItem([path.xs[0]], [path.ys[0]], size=10, symbol="t", brush=pg.mkBrush("w"),
                                       pen=pg.mkPen(colour, width=1.5))  # the embeddings: where the path starts
            self.plot.addItem(start)
            label = pg.TextItem(abbreviate(path.token, LABEL_CHARS), color=colour, anchor=(0, 1))
            label.setPos(path.xs[-1], path.ys[-1])
            self.plot.addItem(label)

    def _draw_together(self, paths, both: bool) -> None:
        """Many paths: per stack one line item (paths apart by NaN breaks), one item of dots, one of starts."""
        for stack, colour in (("encoder", (31, 119, 180)), ("decoder", (214, 39, 40))):
            mine = [p for p in paths.paths if p.stack == stack]
            if not mine:
                continue
            xs = np.concatenate([np.append(np.asarray(p.xs, np.float64), np.nan) for p in mine])  # (Σ(len+1),)
            ys = np.concatenate([np.append(np.asarray(p.ys, np.float64), np.nan) for p in mine])
            dashed = both and stack == "encoder"
            pen = pg.mkPen((*colour, 70), width=1, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            line = pg.PlotDataItem(xs, ys, pen=pen, connect="finite")
            self.plot.addItem(line)
            self._items.append(line)
            if len(self._xy) <= DOTS:  # thousands of dots cost more to paint than they show: the lines bend there
                self.plot.addItem(pg.ScatterPlotItem(xs[np.isfinite(xs)], ys[np.isfinite(ys)], size=4, pen=None,
                                                     brush=pg.mkBrush(*colour, 150)))  # fmt: skip
            self.plot.addItem(pg.ScatterPlotItem([p.xs[0] for p in mine], [p.ys[0] for p in mine], size=8, symbol="t",
                                                 brush=pg.mkBrush("w"), pen=pg.mkPen(colour, width=1)))  # fmt: skip

    def _fill_fit_box(self, value) -> None:
        names = [None, *value.points]
        if [self.fit_box.itemData(i) for i in range(self.fit_box.count())] == names:
            return
        chosen = self.fit_box.currentData()
        self.fit_box.blockSignals(True)
        self.fit_box.clear()
        self.fit_box.addItem("all points", None)
        for name, label in zip(value.points, value.labels):
            self.fit_box.addItem(label, name)
        self.fit_box.setCurrentIndex(max(0, self.fit_box.findData(chosen)))
        self.fit_box.blockSignals(False)

    def _mark_current(self) -> None:
        """A ring around the dots of the window's current step, when it is a point of the stream."""
        step = self.main.current_step()
        if self.paths is None or step is None or self.value is None:
            self._current.setData([], [])
            return
        here = self.paths.steps == step.name  # (n,) one numpy pass on each step, whatever the number of paths
        self._current.setData(self._xy[here, 0], self._xy[here, 1])

    # --- hover and click -----------------------------------------------------------------------------------------

    def vertex_at(self, scene_pos) -> tuple[int, int] | None:
        """(path, vertex) of the dot nearest a scene position, if within NEAR_PX pixels (one numpy pass over
        every dot, so a hover stays quick with thousands of them)."""
        if self.paths is None or not self.plot.isVisible() or not len(self._xy):
            return None
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        at = vb.mapSceneToView(scene_pos)
        px, py = vb.viewPixelSize()  # data units per pixel, across and up
        if not (px > 0 and py > 0):
            return None
        d = np.hypot((self._xy[:, 0] - at.x()) / px, (self._xy[:, 1] - at.y()) / py)  # (n,) in pixels
        k = int(np.argmin(d))
        return self._which[k] if d[k] < NEAR_PX else None

    def vertex_point(self, path: int, vertex: int) -> QPoint:
        """Where a dot is drawn, in the plot widget's coordinates (for a click in tests and by keyboard users)."""
        p = self.paths.paths[path]
        vb = self.plot.getPlotItem().getViewBox()
        return self.plot.mapFromScene(vb.mapViewToScene(QPointF(p.xs[vertex], p.ys[vertex])))

    def _hovered(self, scene_pos) -> None:
        found = self.vertex_at(scene_pos)
        if found is None:
            self.hover_label.setText(" ")
            return
        path = self.paths.paths[found[0]]
        text = f"{path.hover(found[1])}  ·  {path.steps[found[1]]}"
        self.hover_label.setText(text)
        self.main.show_hover(text)

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        found = self.vertex_at(event.scenePos())
        if found is not None:
            self.main.go_to_step(self.paths.paths[found[0]].steps[found[1]])

    # --- export and explanation -------------------------------------------------------------------------------

    def csv_text(self) -> str:
        return trajectory_csv(self.value) if self.value is not None else ""

    def current_chart(self):
        return self.plot if self.value is not None else None

    def view_title(self) -> str:
        return self.paths.title if self.paths is not None and self.value is not None else self.title

    def explain_facts(self) -> dict:
        if self.value is None:
            return {}
        share = float(np.sum(self.value.explained_variance))
        return {"trajectory": f"Here the two components keep {share:.1%} of the variance."}
