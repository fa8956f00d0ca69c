"""A labelled heatmap that draws one scratchformer.plotdata.Heatmap (pyqtgraph's MatrixDisplay idiom).

One ImageItem of RGBA pixels shifted by half a cell (cells centre on integer ticks), y inverted so row 0 is at
the top, token tick labels abbreviated and thinned to what fits, a colour bar with the heatmap's explicit
levels, and a read-out of the cell under the mouse. −∞ cells get colormaps.MASKED_RGBA. No per-cell items:
a 512 × 512 map is one image.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QMenu, QSizePolicy, QVBoxLayout, QWidget

from scratchformer.plotdata import Heatmap, abbreviate, format_value

from .colormaps import MASKED_RGBA, colormap, heatmap_rgba

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False, background="w", foreground="#333")

EXPORT_ACTIONS = (
    ("Export this view as PNG…", "view_png"),
    ("Export this view as SVG…", "view_svg"),
    ("Export this view as PDF…", "view_pdf"),
    ("Copy this view to the clipboard", "clipboard"),
    ("Export the current tensor…", "tensor_current"),
)


def full_label(labels: list[str] | None, dim: str, i: int) -> str:
    if labels and 0 <= i < len(labels):
        return f"{labels[i]!r} ({dim} {i})"
    return f"{dim} {i}"


class HeatmapWidget(QWidget):
    """Draws a Heatmap; emits `hovered(text)` with the cell under the mouse and `clicked(row, col)`."""

    hovered = Signal(str)
    clicked = Signal(int, int)
    export_requested = Signal(str)

    def __init__(
        self,
        parent=None,
        compact: bool = False,
        show_title: bool = True,
        ticks: bool = True,
        colorbar: bool = True,
        square: bool = False,
    ) -> None:
        super().__init__(parent)
        self.compact = compact  # small multiples: no axis titles, no read-out line, thin colour bar
        self.ticks = ticks
        self.custom_ticks: tuple[list, list] | None = None  # ([(y, label)], [(x, label)]) instead of per-cell
        self.describe = None  # optional (row, col) -> str for the hover text
        self.heatmap: Heatmap | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.title_label = QLabel()
        self.title_label.setWordWrap(True)
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title_label.font()
        font.setBold(True)
        if compact:
            font.setPointSizeF(font.pointSizeF() * 0.9)
        self.title_label.setFont(font)
        self.title_label.setVisible(show_title)
        layout.addWidget(self.title_label)

        self.view = pg.GraphicsLayoutWidget()
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.view.ci.setContentsMargins(2, 2, 2, 2)
        self.plot = self.view.addPlot(row=0, col=0)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setDefaultPadding(0.0)
        self.plot.getViewBox().setBackgroundColor("#ffffff")
        self.square = square
        if square:  # cells stay square (thumbnails); otherwise the map fills the space
            self.plot.setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.colorbar = pg.ColorBarItem(
            values=(0.0, 1.0), colorMap=colormap("viridis"), interactive=False, width=10 if compact else 14,
            colorMapMenu=False,
        )
        if colorbar:
            self.view.addItem(self.colorbar, row=0, col=1)
        if not ticks:
            for name in ("left", "bottom"):
                self.plot.getAxis(name).setStyle(showValues=False, tickLength=0)
            self.plot.getAxis("bottom").setHeight(2)
            self.plot.getAxis("left").setWidth(2)
        tick_font = QFont()
        tick_font.setPointSizeF(8.5)
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setTickFont(tick_font)
        layout.addWidget(self.view, 1)

        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)
        self.readout.setVisible(not compact)
        self.readout.setStyleSheet("color: #444;")
        layout.addWidget(self.readout)
        self._last_cell: tuple[int, int] | None = None
        self._tick_key = None
        self._axis_names: tuple[str, str] | None = None
        self.plot.getViewBox().sigResized.connect(lambda _vb: self._apply_ticks())
        self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.view.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._show_menu)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._show_menu)

    # --- drawing ---------------------------------------------------------------------------------------------

    def set_heatmap(self, heatmap: Heatmap | None, reset_view: bool = True) -> None:
        """Draw a heatmap (None clears). Levels come from the heatmap, never from the image."""
        same_shape = self.heatmap is not None and heatmap is not None and self.heatmap.shape == heatmap.shape
        self.heatmap = heatmap
        if heatmap is None:
            self.image.clear()
            self.title_label.setText("")
            self.readout.setText(" ")
            return
        rows, cols = heatmap.values.shape
        self.image.setImage(heatmap_rgba(heatmap), autoLevels=False, levels=(0, 255))
        self.image.setRect(QRectF(-0.5, -0.5, cols, rows))
        self.colorbar.setColorMap(colormap(heatmap.colormap))
        self.colorbar.setLevels(values=heatmap.levels)
        self.title_label.setText(heatmap.title)
        self.title_label.setToolTip(f"{heatmap.title}\n{heatmap.subtitle}\n{heatmap.formula}".strip())
        if not self.compact and self._axis_names != (heatmap.row_dim, heatmap.col_dim):
            self._axis_names = (heatmap.row_dim, heatmap.col_dim)  # setLabel re-lays out the axis: only on change
            self.plot.setLabel("left", heatmap.row_dim)
            self.plot.setLabel("bottom", heatmap.col_dim)
        self._apply_ticks()
        vb = self.plot.getViewBox()
        if not self.square:  # limits would fight the locked aspect ratio
            vb.setLimits(xMin=-0.5, xMax=cols - 0.5, yMin=-0.5, yMax=rows - 0.5)
        if reset_view or not same_shape:
            vb.setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0.0)
        self.readout.setText(self._legend_text())

    def _legend_text(self) -> str:
        hm = self.heatmap
        if hm is None:
            return " "
        lo, hi = (format_value(v) for v in hm.levels)
        text = f"{hm.shape[0]} × {hm.shape[1]}; colour range {lo} … {hi}"
        if hm.masked is not None:
            text += "; grey = −∞ (masked)"
        return text + ". Hover a cell to read it."

    def _apply_ticks(self) -> None:
        hm = self.heatmap
        if hm is None or not self.ticks:
            return
        if self.custom_ticks is not None:
            if self._tick_key == id(hm):
                return
            self._tick_key = id(hm)
            self.plot.getAxis("left").setTicks([self.custom_ticks[0]])
            self.plot.getAxis("bottom").setTicks([self.custom_ticks[1]])
            return
        rows, cols = hm.values.shape
        vb = self.plot.getViewBox()
        width = vb.width() if vb.width() > 50 else max(100, self.view.width() - 90)
        height = vb.height() if vb.height() > 50 else max(60, self.view.height() - 40)
        char_w = 6.5
        # As many characters as a column has room for (3 … 14); thin the labels only when even 3 do not fit.
        chars = int(min(14, max(3, (width / max(cols, 1) - 6) / char_w)))
        col_labels, row_labels = hm.col_labels, hm.row_labels
        widest = min(chars, max((len(s) for s in col_labels), default=3)) if col_labels else len(str(cols))
        col_stride = max(1, math.ceil(cols * (widest * char_w + 6) / width))
        row_stride = max(1, math.ceil(rows * 14 / height))
        key = (id(hm), chars, col_stride, row_stride)
        if key == self._tick_key:
            return  # unchanged: avoid re-laying out the axes (and a resize loop)
        self._tick_key = key
        self.plot.getAxis("bottom").setTicks([_ticks(col_labels, cols, col_stride, chars)])
        self.plot.getAxis("left").setTicks([_ticks(row_labels, rows, row_stride, 14)])

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self._apply_ticks()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        self._apply_ticks()

    # --- mouse -----------------------------------------------------------------------------------------------

    def cell_at(self, scene_pos) -> tuple[int, int] | None:
        hm = self.heatmap
        if hm is None or not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.getViewBox().mapSceneToView(scene_pos)
        row, col = int(math.floor(p.y() + 0.5)), int(math.floor(p.x() + 0.5))
        if 0 <= row < hm.values.shape[0] and 0 <= col < hm.values.shape[1]:
            return row, col
        return None

    def describe_cell(self, row: int, col: int) -> str:
        hm = self.heatmap
        if hm is None:
            return ""
        if self.describe is not None:
            return self.describe(row, col)
        value = float(hm.values[row, col])
        r = full_label(hm.row_labels, hm.row_dim, row)
        c = full_label(hm.col_labels, hm.col_dim, col)
        suffix = "  (masked)" if value == float("-inf") else ""
        return f"row {r}  ·  column {c}  =  {format_value(value)}{suffix}"

    def _on_mouse_moved(self, scene_pos) -> None:
        cell = self.cell_at(scene_pos)
        if cell == self._last_cell:
            return
        self._last_cell = cell
        if cell is None:
            self.readout.setText(self._legend_text())
            self.view.setToolTip("")
            return
        text = self.describe_cell(*cell)
        self.readout.setText(text)
        self.view.setToolTip(text)
        if text:
            self.hovered.emit(text)

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            self.clicked.emit(*cell)
        elif self.heatmap is not None and self.plot.sceneBoundingRect().contains(event.scenePos()):
            self.clicked.emit(-1, -1)

    def export_menu(self) -> QMenu:
        menu = QMenu(self)
        for text, kind in EXPORT_ACTIONS:
            menu.addAction(text, lambda k=kind: self.export_requested.emit(k))
        menu.addSeparator()
        menu.addAction("Reset zoom", self.reset_zoom)
        return menu

    def _show_menu(self, pos) -> None:
        self.export_menu().exec(self.mapToGlobal(pos))

    def reset_zoom(self) -> None:
        if self.heatmap is not None:
            rows, cols = self.heatmap.values.shape
            self.plot.getViewBox().setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0.0)


def _ticks(labels: list[str] | None, n: int, stride: int, chars: int) -> list[tuple[float, str]]:
    """Every stride-th position with its label abbreviated to `chars` (only the labels drawn are built)."""
    if labels is None:
        return [(float(i), str(i)) for i in range(0, n, max(stride, 1))]
    return [(float(i), abbreviate(labels[i], chars) if i < len(labels) else str(i)) for i in range(0, n, stride)]


def masked_swatch_css() -> str:
    r, g, b, _ = MASKED_RGBA
    return f"background: rgb({r},{g},{b}); color: white; padding: 0 4px;"

