"""An attribution graph drawn with pyqtgraph (scratchformer.plotdata.graph_layout.GraphLayout): a few items however
large the graph — one line item per edge colour and width (connect='pairs': thousands of edges in one item), one
scatter item per node kind — so a graph of thousands of nodes draws in a few tens of milliseconds.

Hovering finds the nearest node by one numpy pass (in pixels); a click (Ctrl: add or remove) and a rubber band
(Shift- or Ctrl-drag) select nodes, a click beside a node but on an edge picks that edge; a plain drag pans and the
wheel zooms. The labels and the token axis are chosen
again for the scale shown, a moment after the view stops moving, so they never overlap.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetricsF
from PySide6.QtWidgets import QGraphicsRectItem, QGraphicsView

from scratchformer.plotdata import abbreviate
from scratchformer.plotdata.graph_layout import NODE_RGB, SYMBOLS, GraphLayout, label_box, place_labels

NEAR_PX = 5.0  # a hover or click this far outside a marker (in pixels) is still on it
LABELS = 60  # labels shown at most
RELABEL_MS = 80  # labels and ticks are chosen again this long after the view stops moving
PANEL_FILL, PANEL_EDGE = (246, 247, 250), (205, 210, 220)
TICK_CHARS = 8  # a token on the axis is abbreviated to this many characters (its full text: hover its embedding)


class GraphBox(pg.ViewBox):
    """A ViewBox whose Shift- or Ctrl-drag draws a rubber band that selects, instead of panning."""

    band_selected = Signal(object, bool)  # (QRectF in data units, add to the selection)

    def __init__(self) -> None:
        super().__init__()
        self.band = QGraphicsRectItem()
        self.band.setPen(pg.mkPen((40, 40, 40), width=1, style=Qt.PenStyle.DashLine))
        self.band.setBrush(pg.mkBrush(52, 101, 164, 40))
        self.band.setZValue(1e9)
        self.band.hide()
        self.addItem(self.band, ignoreBounds=True)

    def mouseDragEvent(self, ev, axis=None) -> None:  # noqa: N802 (pyqtgraph name)
        mods = ev.modifiers()
        if ev.button() == Qt.MouseButton.LeftButton and mods & (Qt.KeyboardModifier.ShiftModifier |
                                                                Qt.KeyboardModifier.ControlModifier):  # fmt: skip
            ev.accept()
            a, b = self.mapSceneToView(ev.buttonDownScenePos()), self.mapSceneToView(ev.scenePos())
            rect = QRectF(a, b).normalized()
            if ev.isFinish():
                self.band.hide()
                self.band_selected.emit(rect, bool(mods & Qt.KeyboardModifier.ControlModifier))
            else:
                self.band.setRect(rect)
                self.band.show()
            return
        super().mouseDragEvent(ev, axis)


class GraphPlot(pg.PlotWidget):
    """The graph; empty until draw(layout). Signals carry indices of drawn nodes (layout order)."""

    hovered = Signal(int)  # -1: off every node
    clicked = Signal(int, bool)  # (node or -1, Ctrl held)
    edge_clicked = Signal(int)  # an edge (index into the layout's edges) clicked where there is no node
    banded = Signal(object, bool)  # (nodes inside the band, add to the selection)

    def __init__(self) -> None:
        self.box = GraphBox()
        super().__init__(viewBox=self.box)
        self.setBackground("w")
        # one rectangle around what changed: with the default (each changed rectangle apart), labels moving after a
        # zoom made a clip of a hundred rectangles, and drawing the edges through it took 300 ms instead of 30
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.BoundingRectViewportUpdate)
        self.setMouseTracking(True)
        self.setMenuEnabled(False)
        item = self.getPlotItem()
        item.hideButtons()
        for side in ("left", "bottom"):
            item.getAxis(side).setPen(pg.mkPen(120, 120, 120))
            item.getAxis(side).setTextPen(pg.mkPen(60, 60, 60))
        item.getAxis("left").setStyle(autoExpandTextSpace=False, tickTextWidth=40)
        self.box.band_selected.connect(self._band)
        self.graph: GraphLayout | None = None
        self.selected: set[int] = set()
        self._panels: list = []
        self._edges: list[pg.PlotCurveItem] = []
        self._nodes: dict[str, pg.ScatterPlotItem] = {}
        self._ring = pg.ScatterPlotItem(pen=pg.mkPen(20, 20, 20, width=2), brush=pg.mkBrush(0, 0, 0, 0), symbol="o")
        self._ring.setZValue(20)
        self.addItem(self._ring)
        self.picked_edge = -1  # the edge drawn picked (layout edge index), -1 for none
        self._edge_mark = pg.PlotCurveItem(pen=pg.mkPen(20, 20, 20, width=3))
        self._edge_mark.setZValue(15)  # over every edge (their z: their widths), under the nodes
        self.addItem(self._edge_mark)
        self._labels: list[pg.TextItem] = []
        self.shown_labels: list[int] = []  # the nodes whose labels are shown now
        self._tick_px = 0.0  # the widest token label on the axis, in pixels
        self._font = QFont(self.font())
        self._font.setPointSizeF(max(8.5, self._font.pointSizeF()))
        self._relabel = QTimer(self)
        self._relabel.setObjectName("scratchformer-graph-labels")
        self._relabel.setSingleShot(True)
        self._relabel.setInterval(RELABEL_MS)
        self._relabel.timeout.connect(self.place_labels)
        self._closed = False
        self.box.sigRangeChanged.connect(self._range_changed)
        self.scene().sigMouseMoved.connect(self._moved)
        self.scene().sigMouseClicked.connect(self._clicked)

    # --- drawing ---------------------------------------------------------------------------------------------------

    def clear_graph(self) -> None:
        """Nothing drawn."""
        self.graph = None
        self.selected = set()
        for item in self._panels:
            self.removeItem(item)
        self._panels = []
        for curve in self._edges:
            curve.setData([], [])
        for dots in self._nodes.values():
            dots.setData([], [])
        self._ring.setData([], [])
        self.pick_edge(-1)
        for label in self._labels:
            label.hide()
        self.shown_labels = []
        self.getPlotItem().getAxis("bottom").setTicks([[]])
        self.getPlotItem().getAxis("left").setTicks([[]])

    def draw(self, layout: GraphLayout, keep_range: bool = False) -> None:
        """Draw `layout` (the UI thread's part: the numbers were made in a job); `keep_range` keeps the zoom."""
        self.clear_graph()
        self.graph = layout
        for p in layout.panels:
            rect = QGraphicsRectItem(QRectF(p.x0, p.y0, p.x1 - p.x0, p.y1 - p.y0))
            rect.setPen(pg.mkPen(PANEL_EDGE, width=1))
            rect.setBrush(pg.mkBrush(*PANEL_FILL))
            rect.setZValue(-10)
            title = pg.TextItem(p.title, color=(90, 90, 90), anchor=(0, 1))
            title.setFont(self._font)
            title.setPos(p.x0, p.y0)
            title.setZValue(-5)
            for item in (rect, title):
                self.addItem(item, ignoreBounds=True)
                self._panels.append(item)
        batches = layout.edge_batches()
        while len(self._edges) < len(batches):
            # each edge its own line (QPainter.drawLines): one path of thousands of wide, translucent segments took
            # 10–50× as long to stroke (Qt outlines the whole path so that overlaps are not blended twice)
            curve = pg.PlotCurveItem(connect="pairs", skipFiniteCheck=True)
            curve.setSegmentedLineMode("on")
            self._edges.append(curve)
            self.addItem(curve)
        for curve, batch in zip(self._edges, batches):
            curve.setData(batch.xy[:, 0], batch.xy[:, 1], connect="pairs", pen=pg.mkPen(QColor(*batch.rgba),
                                                                                        width=batch.width))
            curve.setZValue(batch.width)
        for curve in self._edges[len(batches):]:
            curve.setData([], [])
        kinds = np.array(layout.kinds)
        for kind, rgb in NODE_RGB.items():
            dots = self._nodes.get(kind)
            if dots is None:
                dots = pg.ScatterPlotItem(symbol=SYMBOLS[kind], brush=pg.mkBrush(*rgb), pen=pg.mkPen("w", width=1))
                dots.setZValue(10)
                self._nodes[kind] = dots
                self.addItem(dots)
            mine = kinds == kind
            dots.setData(layout.x[mine], layout.y[mine], size=np.round(layout.size[mine]))
        self._show_ring()
        x0, x1, y0, y1 = layout.bounds()
        if not keep_range:
            self.box.setRange(xRange=(x0, x1), yRange=(y0, y1 + 0.35), padding=0.02)
        left = self.getPlotItem().getAxis("left")
        fm = QFontMetricsF(left.style.get("tickFont") or self.font())
        left.setStyle(tickTextWidth=int(max(fm.horizontalAdvance(name) for _, name in layout.rows)) + 6)
        left.setTicks([[(y, name) for y, name in layout.rows]])
        self._tick_px = max(QFontMetricsF(self.font()).horizontalAdvance(abbreviate(t, TICK_CHARS))
                            for _, t in layout.columns) + 10 if layout.columns else 0.0  # fmt: skip
        self.place_labels()

    def select(self, nodes: set[int]) -> None:
        self.selected = {i for i in nodes if self.graph is not None and 0 <= i < len(self.graph)}
        self._show_ring()

    def pick_edge(self, k: int) -> None:
        """Mark edge k of the layout (-1: none) with a dark line over it."""
        lay = self.graph
        self.picked_edge = k if lay is not None and 0 <= k < len(lay.edge_source) else -1
        if self.picked_edge < 0:
            self._edge_mark.setData([], [])
            return
        s, t = int(lay.edge_source[k]), int(lay.edge_target[k])
        self._edge_mark.setData([lay.x[s], lay.x[t]], [lay.y[s], lay.y[t]])

    def _show_ring(self) -> None:
        lay = self.graph
        chosen = sorted(self.selected) if lay is not None else []
        if not chosen:
            self._ring.setData([], [])
            return
        self._ring.setData(lay.x[chosen], lay.y[chosen], size=np.round(lay.size[chosen]) + 8)

    def place_labels(self) -> None:
        """Labels that fit at the scale shown (the most influential first), and every token the axis has room for."""
        lay = self.graph
        if lay is None:
            return
        px, py = self.box.viewPixelSize()  # data units per pixel, across and up
        if not (px > 0 and py > 0 and math.isfinite(px) and math.isfinite(py)):
            return
        fm = QFontMetricsF(self._font)
        (vx0, vx1), (vy0, vy1) = self.box.viewRange()
        char_w, line_h = fm.averageCharWidth() * px, fm.height() * py
        self.shown_labels = place_labels(lay, char_w, line_h, py, LABELS, (vx0, vx1, vy0, vy1))
        while len(self._labels) < len(self.shown_labels):
            label = pg.TextItem("", color=(20, 20, 20), anchor=(0.5, 0.5), fill=pg.mkBrush(255, 255, 255, 200))
            label.setFont(self._font)
            label.textItem.document().setDocumentMargin(0)  # the box is the text's: it stays clear of the marker
            label.setZValue(30)
            self._labels.append(label)
            self.addItem(label, ignoreBounds=True)
        for label, i in zip(self._labels, self.shown_labels):
            x0, x1, y0, y1 = label_box(lay, i, char_w, line_h, py)
            label.setText(lay.labels[i])
            label.setPos((x0 + x1) / 2, (y0 + y1) / 2)
            label.show()
        for label in self._labels[len(self.shown_labels):]:
            label.hide()
        every = max(1, math.ceil(self._tick_px * px))  # columns per shown token: their labels never overlap
        ticks = [(x, abbreviate(t, TICK_CHARS)) for k, (x, t) in enumerate(lay.columns) if k % every == 0]
        self.getPlotItem().getAxis("bottom").setTicks([ticks])

    def _range_changed(self, *_args) -> None:
        if not self._closed:
            self._relabel.start()

    def shutdown(self) -> None:
        self._closed = True
        self._relabel.stop()

    # --- finding nodes -----------------------------------------------------------------------------------------------

    def node_at(self, scene_pos) -> int:
        """The drawn node under a scene position (within its marker and NEAR_PX), nearest first; -1 for none."""
        lay = self.graph
        if lay is None or not len(lay):
            return -1
        if not self.box.sceneBoundingRect().contains(scene_pos):
            return -1
        at = self.box.mapSceneToView(scene_pos)
        px, py = self.box.viewPixelSize()
        if not (px > 0 and py > 0):
            return -1
        d = np.hypot((lay.x - at.x()) / px, (lay.y - at.y()) / py)  # (m,) in pixels
        k = int(np.argmin(d))
        return k if d[k] <= lay.size[k] / 2 + NEAR_PX else -1

    def edge_at(self, scene_pos) -> int:
        """The drawn edge nearest a scene position, within NEAR_PX of its line (index into the layout's edges); -1
        for none. One numpy pass over the edges, in pixels."""
        lay = self.graph
        if lay is None or not len(lay.edge_source) or not self.box.sceneBoundingRect().contains(scene_pos):
            return -1
        at = self.box.mapSceneToView(scene_pos)
        px, py = self.box.viewPixelSize()
        if not (px > 0 and py > 0):
            return -1
        ax, ay = (lay.x[lay.edge_source] - at.x()) / px, (lay.y[lay.edge_source] - at.y()) / py  # (e,) each
        dx, dy = (lay.x[lay.edge_target] - at.x()) / px - ax, (lay.y[lay.edge_target] - at.y()) / py - ay
        along = np.clip(-(ax * dx + ay * dy) / np.maximum(dx * dx + dy * dy, 1e-12), 0.0, 1.0)  # nearest point
        d = np.hypot(ax + along * dx, ay + along * dy)  # (e,) pixels from the point to each edge
        k = int(np.argmin(d))
        return k if d[k] <= NEAR_PX else -1

    def edge_point(self, k: int) -> QPoint:
        """The middle of edge k, in this widget's coordinates (for clicks in tests)."""
        s, t = int(self.graph.edge_source[k]), int(self.graph.edge_target[k])
        mid = QPointF(float(self.graph.x[s] + self.graph.x[t]) / 2, float(self.graph.y[s] + self.graph.y[t]) / 2)
        return self.mapFromScene(self.box.mapViewToScene(mid))

    def node_point(self, i: int) -> QPoint:
        """Where node i is drawn, in this widget's coordinates (for clicks in tests and by keyboard users)."""
        scene = self.box.mapViewToScene(QPointF(float(self.graph.x[i]), float(self.graph.y[i])))
        return self.mapFromScene(scene)

    def nodes_in(self, rect: QRectF) -> list[int]:
        lay = self.graph
        if lay is None:
            return []
        inside = ((lay.x >= rect.left()) & (lay.x <= rect.right()) & (lay.y >= rect.top()) & (lay.y <= rect.bottom()))
        return np.flatnonzero(inside).tolist()

    def _moved(self, scene_pos) -> None:
        self.hovered.emit(self.node_at(scene_pos))

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        ctrl = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        node = self.node_at(event.scenePos())
        edge = self.edge_at(event.scenePos()) if node < 0 and not ctrl else -1
        if edge >= 0:
            self.edge_clicked.emit(edge)
            return
        self.clicked.emit(node, ctrl)

    def _band(self, rect: QRectF, add: bool) -> None:
        self.banded.emit(self.nodes_in(rect), add)
