"""A labelled heatmap that draws one scratchformer.plotdata.Heatmap (pyqtgraph's MatrixDisplay idiom).

One ImageItem of RGBA pixels shifted by half a cell (cells centre on integer ticks), y inverted so row 0 is at
the top, token tick labels abbreviated and thinned to what fits, a colour bar with the heatmap's explicit
levels, and a read-out of the cell under the mouse. −∞ cells get colormaps.MASKED_RGBA. No per-cell items:
a 512 × 512 map is one image.

A map with more cells than the plot has pixels is drawn from plotdata.block_reduce (block maximum, or the value
farthest from 0 on diverging maps) at about the plot's pixel size, again when the user zooms in; the read-out
and the exporters read the full-resolution Heatmap.values. A view may pass an ImageCache and a key per heatmap
so that coming back to a step reuses its image.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QLabel, QMenu, QSizePolicy, QVBoxLayout, QWidget

from scratchformer.plotdata import (
    EXTREME,
    Heatmap,
    abbreviate,
    block_reduce,
    display_blocks,
    display_reduction,
    format_value,
)

from .colormaps import MASKED_RGBA, colormap, rgba_image

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


class ImageCache:
    """Display images (RGBA, maybe block-reduced) by key; the least recently used go first beyond a byte budget."""

    def __init__(self, max_bytes: int = 128 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0

    def get(self, key) -> np.ndarray | None:
        image = self._items.get(key)
        if image is not None:
            self._items.move_to_end(key)
        return image

    def put(self, key, image: np.ndarray) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._items[key] = image
        self._bytes += image.nbytes
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.nbytes

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)


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
            # axes count cells, never physical units: no "(x0.001)" SI prefix when a map is one row tall
            self.plot.getAxis(name).enableAutoSIPrefix(False)
        layout.addWidget(self.view, 1)

        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)
        self.readout.setVisible(not compact)
        self.readout.setStyleSheet("color: #444;")
        # A long read-out (long tokens) must not widen the widget: that re-lays out the window on every hover.
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.readout)
        self._last_cell: tuple[int, int] | None = None
        self._tick_map: Heatmap | None = None
        self._tick_key = None
        self._ticks_shown: tuple | None = None  # (left ticks, bottom ticks) last given to the axes
        self._axis_names: tuple[str, str] | None = None
        self.image_cache: ImageCache | None = None  # set by a view that passes keys to set_heatmap
        self._key = None  # the caller's key of the current heatmap
        self._image_of: tuple | None = None  # (heatmap, block) the image shows now
        self.display_block: tuple[int, int] = (1, 1)  # cells per image pixel (rows, cols)
        self._colorbar_state: tuple | None = None
        self._limits_shape: tuple[int, int] | None = None
        self._placing = False  # set_heatmap is moving the view: draw the image once, afterwards
        # Tick text gets a fixed space, set from the labels before painting: pyqtgraph would otherwise widen the
        # axis while painting, which re-lays out the plot and paints it a second time.
        self._tick_metrics = QFontMetrics(tick_font)
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setStyle(autoExpandTextSpace=False, tickTextHeight=self._tick_metrics.height())
        vb = self.plot.getViewBox()
        vb.sigResized.connect(lambda _vb: self._on_view_changed())
        vb.sigRangeChanged.connect(lambda *_: self._show_image())
        self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.view.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._show_menu)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._show_menu)

    # --- drawing ---------------------------------------------------------------------------------------------

    def set_heatmap(self, heatmap: Heatmap | None, reset_view: bool = True, key=None) -> None:
        """Draw a heatmap (None clears). Levels come from the heatmap, never from the image. `key` names its
        content for image_cache (e.g. (step, batch, head)); None draws without caching."""
        same_shape = self.heatmap is not None and heatmap is not None and self.heatmap.shape == heatmap.shape
        self.heatmap = heatmap
        self._key = key
        if heatmap is None:
            self.image.clear()
            self._image_of = None
            self.title_label.setText("")
            self.readout.setText(" ")
            return
        rows, cols = heatmap.values.shape
        self._placing = True
        try:
            self._place_view(rows, cols, reset_view or not same_shape)
        finally:
            self._placing = False
        self._show_image()
        colorbar_state = (heatmap.colormap, tuple(heatmap.levels))
        if colorbar_state != self._colorbar_state:  # a new colour map rebuilds the bar's pixmap: only on change
            if self._colorbar_state is None or colorbar_state[0] != self._colorbar_state[0]:
                self.colorbar.setColorMap(colormap(heatmap.colormap))
            self.colorbar.setLevels(values=heatmap.levels)
            self._colorbar_state = colorbar_state
        if self.title_label.text() != heatmap.title:
            self.title_label.setText(heatmap.title)
        self.title_label.setToolTip(f"{heatmap.title}\n{heatmap.subtitle}\n{heatmap.formula}".strip())
        if not self.compact and self._axis_names != (heatmap.row_dim, heatmap.col_dim):
            self._axis_names = (heatmap.row_dim, heatmap.col_dim)  # setLabel re-lays out the axis: only on change
            self.plot.setLabel("left", heatmap.row_dim)
            self.plot.setLabel("bottom", heatmap.col_dim)
        self._apply_ticks()
        self._last_cell = None
        self.readout.setText(self._legend_text())

    def _place_view(self, rows: int, cols: int, reset: bool) -> None:
        vb = self.plot.getViewBox()
        if not self.square and self._limits_shape != (rows, cols):  # limits would fight the locked aspect ratio
            self._limits_shape = (rows, cols)
            vb.setLimits(xMin=-0.5, xMax=cols - 0.5, yMin=-0.5, yMax=rows - 0.5)
        if reset:  # before the image: the visible range sets the display resolution
            vb.setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0.0)

    def _plot_pixels(self) -> tuple[float, float]:
        """(height, width) of the plot area in device pixels (estimated before the first layout)."""
        vb = self.plot.getViewBox()
        width = vb.width() if vb.width() > 50 else max(100, self.view.width() - 90)
        height = vb.height() if vb.height() > 50 else max(60, self.view.height() - 40)
        ratio = self.devicePixelRatioF()
        return height * ratio, width * ratio

    def _display_block_now(self) -> tuple[int, int]:
        """Cells per image pixel for the visible part of the map at the plot's size (1 × 1 when zoomed in)."""
        rows, cols = self.heatmap.values.shape
        (x0, x1), (y0, y1) = self.plot.getViewBox().viewRange()
        visible = (min(rows, max(1, round(y1 - y0))), min(cols, max(1, round(x1 - x0))))
        return display_blocks(visible, self._plot_pixels())

    def _show_image(self) -> None:
        """Give the ImageItem the current heatmap at the resolution the plot can show (no-op when it has it)."""
        hm = self.heatmap
        if hm is None or self._placing:
            return
        block = self._display_block_now()
        if self._image_of is not None and self._image_of[0] is hm and self._image_of[1] == block:
            return
        cache_key = (self._key, block) if self._key is not None and self.image_cache is not None else None
        rgba = self.image_cache.get(cache_key) if cache_key is not None else None
        if rgba is None:
            shown = block_reduce(hm.values, block, display_reduction(hm.colormap))  # (R, C), as is at 1 × 1
            rgba = rgba_image(shown, hm.levels, hm.colormap)
            if cache_key is not None:
                self.image_cache.put(cache_key, rgba)
        # levels=None: uint8 RGBA goes to a QImage as it is (levels would send it through makeARGB again).
        self.image.setImage(rgba, autoLevels=False, levels=None)
        br, bc = block
        self.image.setRect(QRectF(-0.5, -0.5, rgba.shape[1] * bc, rgba.shape[0] * br))  # last blocks may be partial
        self._image_of = (hm, block)
        if block != self.display_block:
            self.display_block = block
            if self._last_cell is None:
                self.readout.setText(self._legend_text())

    def _on_view_changed(self) -> None:
        self._apply_ticks()
        self._show_image()

    def _legend_text(self) -> str:
        hm = self.heatmap
        if hm is None:
            return " "
        lo, hi = (format_value(v) for v in hm.levels)
        text = f"{hm.shape[0]} × {hm.shape[1]}; colour range {lo} … {hi}"
        if hm.masked is not None:
            text += "; grey = −∞ (masked)"
        if hm.row_dim == "tgt_pos":  # decoder-input rows (the trace); the decoding timeline's rows are "emitted"
            text += "; row t = decoder input t, which predicts token t+1"
        br, bc = self.display_block
        if br * bc > 1:  # say so: a block maximum looks brighter than a typical cell
            which = "value farthest from 0" if display_reduction(hm.colormap) == EXTREME else "maximum"
            text += f"; a pixel shows the {which} of {br} × {bc} cells"
        return text + ". Hover a cell to read it."

    def _apply_ticks(self) -> None:
        hm = self.heatmap
        if hm is None or not self.ticks:
            return
        if self.custom_ticks is not None:
            self._set_ticks(list(self.custom_ticks[0]), list(self.custom_ticks[1]))
            return
        rows, cols = hm.values.shape
        height, width = (p / self.devicePixelRatioF() for p in self._plot_pixels())
        char_w = 6.5
        # As many characters as a column has room for (3 … 14); thin the labels only when even 3 do not fit.
        chars = int(min(14, max(3, (width / max(cols, 1) - 6) / char_w)))
        col_labels, row_labels = hm.col_labels, hm.row_labels
        widest = min(chars, max((len(s) for s in col_labels), default=3)) if col_labels else len(str(cols))
        col_stride = max(1, math.ceil(cols * (widest * char_w + 6) / width))
        row_stride = max(1, math.ceil(rows * 14 / height))
        key = (chars, col_stride, row_stride)
        if self._tick_map is hm and self._tick_key == key:
            return  # same map, same room: nothing to rebuild
        self._tick_map, self._tick_key = hm, key
        self._set_ticks(_ticks(row_labels, rows, row_stride, 14), _ticks(col_labels, cols, col_stride, chars))

    def _set_ticks(self, left: list[tuple[float, str]], bottom: list[tuple[float, str]]) -> None:
        """Give the axes new ticks only when the labels differ: setTicks throws away the axis' drawing, and
        consecutive steps often share their token axes."""
        if self._ticks_shown == (left, bottom):
            return
        self._ticks_shown = (left, bottom)
        axis = self.plot.getAxis("left")
        text_width = max((self._tick_metrics.horizontalAdvance(text) for _, text in left), default=0) + 2
        if axis.style["tickTextWidth"] != text_width:  # re-lays out the plot now, before it is painted
            axis.setStyle(tickTextWidth=text_width)
        axis.setTicks([left])
        self.plot.getAxis("bottom").setTicks([bottom])

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

