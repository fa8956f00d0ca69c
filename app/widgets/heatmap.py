"""A labelled heatmap that draws one scratchformer.plotdata.Heatmap (pyqtgraph's MatrixDisplay idiom).

One ImageItem of RGBA pixels shifted by half a cell (cells centre on integer ticks), y inverted so row 0 is at
the top, token tick labels abbreviated and thinned to what fits, a colour bar with the heatmap's explicit
levels, and a read-out of the cell under the mouse. A mask's −∞ cells are grey; NaN, +∞ and other −∞ cells (a
model whose numbers broke) get colours of their own with a legend under the map (plotdata.special, colormaps).
No per-cell items: a 512 × 512 map is one image. Tick marks point outward, away from the cells and their values
(pointing in, as pyqtgraph draws them by default, a row's tick reads as a minus sign before the first value).

A map with more cells than the plot has pixels is drawn from plotdata.block_reduce (block maximum, or the value
farthest from 0 on diverging maps) at about the plot's pixel size, again when the user zooms in; the read-out
and the exporters read the full-resolution Heatmap.values. A view may pass an ImageCache and a key per heatmap
so that coming back to a step reuses its image.

Small tensors (the walkthrough's d_model 6, 10 tokens) are read as numbers: when a cell is at least
VALUE_CELL_PX on screen both ways, its value is written inside it (plotdata.cell_label, dark or white text by the
cell's luminance), by one CellValues item that paints only the visible cells, at most MAX_VALUE_TEXTS of them;
big maps get no text at all. A map with few rows or columns is not stretched over the whole plot: cells are at
most MAX_CELL_W pixels wide and no taller than wide (48 px rows are always allowed), the map centred at the top.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QFontMetricsF
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QMenu, QSizePolicy, QStackedWidget, QVBoxLayout, QWidget

from scratchformer.plotdata import (
    EXTREME,
    MASK,
    Heatmap,
    abbreviate,
    block_reduce,
    display_blocks,
    display_reduction,
    format_value,
)
from scratchformer.plotdata.heatmap import (
    DARK_TEXT,
    LIGHT_TEXT,
    OUTLINE_COLOUR,
    cell_labels,
    dark_text_on,
    is_integral,
    value_decimals,
)
from scratchformer.plotdata.special import (
    heatmap_classes,
    legend_entries,
    reduce_classes,
    trouble_count,
)

from .bar_axis import use_bar_axis
from .bar_ticks import bar_ticks
from .cached_axis import CachedAxisItem
from .colormaps import MASKED_RGBA, colormap, rgba_image, swatch_css
from .draw_queue import draw_queue
from .fonts import min_pixels, scaled
from .steady_label import SteadyLabel

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False, background="w", foreground="#333")

EXPORT_ACTIONS = (
    ("Export this view as PNG…", "view_png"),
    ("Export this view as SVG…", "view_svg"),
    ("Export this view as PDF…", "view_pdf"),
    ("Copy this view to the clipboard", "clipboard"),
    ("Export the current tensor…", "tensor_current"),
)


VALUE_CELL_PX = 28.0  # a cell this big on screen (both ways) shows its value
COMPACT_VALUE_CELL_PX = 40.0  # thumbnails: only when their cells are large
MAX_VALUE_TEXTS = 600  # more visible cells than this: no values (zoom in to read them)
VALUE_FONT_PX = (8.0, 13.0)  # the values' font: smallest readable (and never below 8 pt, fonts.py), largest
MAX_CELL_W = 160.0  # a map with few columns is not stretched wider than this per column
MIN_ROW_PX = 48.0  # rows may always be this tall; taller only as far as cells are wide
PLOT_MARGIN = 2.0
DEFER_CELLS = 128 * 128  # maps this large are drawn on a coming turn of the event loop (draw_queue.py)
TICK_LENGTH = 4  # outward (positive), so no tick mark reaches into the cells


def full_label(labels: list[str] | None, dim: str, i: int) -> str:
    if labels and 0 <= i < len(labels):
        return f"{labels[i]!r} ({dim} {i})"
    return f"{dim} {i}"


def display_image(hm: Heatmap, block: tuple[int, int], classes: np.ndarray | None) -> np.ndarray:
    """The RGBA image (R, C, 4) uint8 a map is shown as with `block` cells per image pixel: values reduced per
    block, NaN/±∞ cells in their colours (classes: heatmap_classes(hm), None when every cell is a number). Pure:
    a prefetch thread makes the next steps' images with it (views/step_view.py)."""
    shown = block_reduce(hm.values, block, display_reduction(hm.colormap))  # (R, C), as is at 1 × 1
    reduced = None if classes is None else reduce_classes(classes, block)  # trouble wins
    return rgba_image(shown, hm.levels, hm.colormap, reduced)


class ImageCache:
    """Display images (RGBA, maybe block-reduced) by key; the least recently used go first beyond a byte budget."""

    def __init__(self, max_bytes: int = 128 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # a prefetch thread puts the next steps' images (views/step_view.py)

    def get(self, key) -> np.ndarray | None:
        with self._lock:
            image = self._items.get(key)
            if image is not None:
                self._items.move_to_end(key)
            return image

    def has(self, key) -> bool:
        with self._lock:
            return key in self._items

    def put(self, key, image: np.ndarray) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[key] = image
            self._bytes += image.nbytes
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)


class CellValues(pg.GraphicsObject):
    """The numbers inside the cells: one item that paints every visible cell's text in one paint() call, at a
    fixed pixel size (the text does not stretch with the view). Cell (row, col) is centred on (col, row)."""

    def __init__(self) -> None:
        super().__init__()
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setZValue(10)  # above the image
        self.cells: list[tuple[int, int, str, bool]] = []  # (row, col, text, dark text?)
        self.font = QFont()
        self._rect = QRectF()

    def set_cells(self, cells: list[tuple[int, int, str, bool]], shape: tuple[int, int], font: QFont) -> None:
        rect = QRectF(-0.5, -0.5, shape[1], shape[0])
        if rect != self._rect:
            self.prepareGeometryChange()
            self._rect = rect
        self.cells, self.font = cells, font
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt name)
        return QRectF(self._rect)

    def paint(self, painter, *args) -> None:
        if not self.cells:
            return
        t = painter.transform()  # view coordinates → device pixels
        w, h = abs(t.m11()), abs(t.m22())
        painter.save()
        painter.resetTransform()  # draw in pixels: text keeps its size whatever the zoom
        painter.setFont(self.font)
        align = Qt.AlignmentFlag.AlignCenter
        for dark, colour in ((True, DARK_TEXT), (False, LIGHT_TEXT)):
            painter.setPen(QColor(*colour))
            for row, col, text, on_light in self.cells:
                if on_light is dark:
                    centre = t.map(QPointF(col, row))
                    painter.drawText(QRectF(centre.x() - w / 2, centre.y() - h / 2, w, h), align, text)
        painter.restore()


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
        self.menu_hook = None  # optional (QMenu, (row, col) or None) -> None: adds a view's own right-click actions
        self.heatmap: Heatmap | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.title_label = SteadyLabel(word_wrap=True)  # a new title re-lays out only this widget, if anything
        font = self.title_label.font()
        font.setBold(True)
        if compact:
            font = scaled(font, 0.9)
        self.title_label.setFont(font)
        self.title_label.setVisible(show_title)
        layout.addWidget(self.title_label)

        self.view = pg.GraphicsLayoutWidget()
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.view.ci.setContentsMargins(2, 2, 2, 2)
        # No pyqtgraph context menus (the widget has its own): a ViewBox built without its menu is cheaper, and a
        # view with many maps builds many of these.
        # Axes that keep the drawings of their last tick sets (cached_axis.py): stepping through the layers shows
        # the same token and dimension axes again and again.
        axes = {name: CachedAxisItem(name) for name in ("left", "bottom")}
        self.plot = self.view.addPlot(row=0, col=0, viewBox=pg.ViewBox(enableMenu=False), enableMenu=False,
                                      axisItems=axes)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setDefaultPadding(0.0)
        self.plot.getViewBox().setBackgroundColor("#ffffff")
        self.square = square
        if square:  # cells stay square (thumbnails); otherwise the map fills the space
            self.plot.setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.show_values = True  # write each cell's value inside it when cells are big enough
        self.values_item = CellValues()
        self.values_item.setVisible(False)
        self.plot.addItem(self.values_item)
        self._values_key = None
        self._integral_of: tuple | None = None  # (heatmap, whether its values are all whole numbers)
        self._classes = None  # plotdata.special codes of the heatmap's cells; None when all are finite numbers
        self._margins: tuple[float, float, float, float] | None = None
        # The colour bar is a whole plot of its own: built on the first drawing (or ahead, by ensure_colorbar from
        # the window's prebuild), not with the widget, so a window of many maps opens sooner; never for thumbnails.
        self.colorbar: pg.ColorBarItem | None = None
        self.has_colorbar = colorbar  # whether it draws one (built or not yet)
        if not ticks:
            for name in ("left", "bottom"):
                self.plot.getAxis(name).setStyle(showValues=False, tickLength=0)
            self.plot.getAxis("bottom").setHeight(2)
            self.plot.getAxis("left").setWidth(2)
        tick_font = QFont()
        tick_font.setPointSizeF(8.5)
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setTickFont(tick_font)
            if ticks:
                self.plot.getAxis(name).setStyle(tickLength=TICK_LENGTH)
        for name in ("left", "bottom", "top", "right"):
            # axes count cells, never physical units: no "(x0.001)" SI prefix when a map is one row tall; and the
            # hidden top and right axes, linked to the view like the others, would rewrite their (empty) titles on
            # every change of range
            self.plot.getAxis(name).enableAutoSIPrefix(False)
        # A map that has never been drawn waits on a blank page of the same size (no layout jump when it comes): a
        # view of many large maps then paints each plot once its map is drawn, not all of them in one paint pass.
        self.stack = QStackedWidget()
        self.stack.addWidget(self.view)
        self._blank = QWidget()
        self.stack.addWidget(self._blank)
        layout.addWidget(self.stack, 1)

        self.special_legend = QLabel()  # swatches of NaN, ±∞ (and masked −∞) when the map holds any trouble
        self.special_legend.setTextFormat(Qt.TextFormat.RichText)
        self.special_legend.setWordWrap(True)
        self.special_legend.setVisible(False)
        layout.addWidget(self.special_legend)

        self.readout = SteadyLabel(" ")  # rewritten on every hover and step: no layout of the window each time
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
        self._pending: tuple | None = None  # (heatmap, reset view, key) of a large map waiting its turn to draw
        self._prepared: tuple | None = None  # (heatmap, block, classes, image) made off the UI thread (draw_queue)
        self._shown_pixels: tuple[float, float] | None = None  # the plot's pixels when last laid out and shown
        self._vb_size: tuple[float, float] | None = None  # the view box's size at its last resize
        self._drawn_shape: tuple | None = None  # the shape of the map last drawn
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
        vb.sigRangeChanged.connect(lambda *_: self._on_range_changed())
        self.view.ci.geometryChanged.connect(self._fit_plot)
        self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.view.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self._highlights: list[QGraphicsRectItem] = []
        self.highlighted: list[tuple[int, int]] = []  # the outlined cells, (row, col)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._show_menu)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(lambda pos: self._show_menu(pos, self.view))

    # --- drawing ---------------------------------------------------------------------------------------------

    def ensure_colorbar(self) -> None:
        """Build the colour bar now if this widget has one and it is not built yet."""
        if self.has_colorbar and self.colorbar is None:
            self.colorbar = pg.ColorBarItem(
                values=(0.0, 1.0), colorMap=colormap("viridis"), interactive=False, width=10 if self.compact else 14,
                colorMapMenu=False,
            )
            use_bar_axis(self.colorbar)  # its value axis drawn without pyqtgraph's layout pass (bar_axis.py)
            for name in ("left", "right", "top", "bottom"):  # no axis title: each new range would rewrite it
                self.colorbar.getAxis(name).enableAutoSIPrefix(False)
            self.view.addItem(self.colorbar, row=0, col=1)

    def colorbar_shown(self) -> bool:
        """Whether a colour bar is on screen (a mask's map shows none)."""
        bar = self.colorbar
        return bar is not None and bar.isVisible() and bar.opacity() > 0 and self.isVisible()

    def set_heatmap(self, heatmap: Heatmap | None, reset_view: bool = True, key=None) -> None:
        """Draw a heatmap (None clears). Levels come from the heatmap, never from the image. `key` names its
        content for image_cache (e.g. (step, batch, head)); None draws without caching. `heatmap` is this
        widget's map at once; a large one (DEFER_CELLS cells or more) is drawn on a coming turn of the event loop,
        a few maps per turn (draw_queue.py), so that a view of many large maps never holds the window — unless its
        display image is already made (a step the Step view made ahead): then it is drawn now, in about a
        millisecond, and the window paints once for the new step instead of twice."""
        if (heatmap is not None and heatmap.values.size >= DEFER_CELLS
                and not self._image_at_hand(heatmap, reset_view, key)):
            earlier = self._pending
            self._pending = (heatmap, reset_view or (earlier is not None and earlier[1]), key)
            if self._drawn_shape is None:
                self.stack.setCurrentWidget(self._blank)
            self.heatmap, self._key = heatmap, key
            draw_queue().put(self)
            return
        if self._pending is not None:
            self._pending = None
            draw_queue().discard(self)
        self._draw(heatmap, reset_view, key)

    def _image_at_hand(self, heatmap: Heatmap, reset_view: bool, key) -> bool:
        """Whether the image `heatmap` would be drawn with now is in image_cache (made ahead, or shown before)."""
        if key is None or self.image_cache is None or not self.isVisible():
            return False
        reset = reset_view or self.heatmap is None  # drawn whole, as _draw will; else maybe zoomed in: as now
        return self.image_cache.has((key, self._block_for(heatmap, reset)))

    def draw_preparation(self):
        """(UI thread; the draw queue asks) A function of nothing that makes, off the UI thread, what drawing the
        waiting map needs that is only numbers: (heatmap, block, its cells' classes, its display image at the block
        it would be drawn with now, or None when image_cache has that image). None when no map waits or that is
        made already."""
        if self._pending is None:
            return None
        heatmap, reset_view, key = self._pending
        block = self._block_for(heatmap, reset_view)
        if self._prepared is not None and self._prepared[0] is heatmap and self._prepared[1] == block:
            return None
        cached = key is not None and self.image_cache is not None and self.image_cache.has((key, block))

        def make() -> tuple:
            classes = heatmap_classes(heatmap)
            return heatmap, block, classes, None if cached else display_image(heatmap, block, classes)

        return make

    def take_prepared(self, made: tuple) -> bool:
        """(UI thread) What draw_preparation made; kept if its map is still the one waiting (True), else dropped."""
        if self._pending is None or self._pending[0] is not made[0]:
            return False
        self._prepared = made
        return True

    def _block_for(self, heatmap: Heatmap, reset_view: bool) -> tuple[int, int]:
        """Cells per image pixel `heatmap` would be drawn with now: the whole map at the plot's size when the view
        is reset or the shape is new, else the block of the part shown now."""
        if reset_view or self._drawn_shape != heatmap.shape:
            return display_blocks(heatmap.values.shape, self._plot_pixels())
        return self._display_block_now()

    def draw_pending(self) -> None:
        """Draw the map set_heatmap left for later (the draw queue calls this; nothing when none is left)."""
        if self._pending is not None:
            (heatmap, reset_view, key), self._pending = self._pending, None
            self._draw(heatmap, reset_view, key)

    def is_drawn(self) -> bool:
        """Whether the map on screen is this widget's map (False while a large one waits its turn)."""
        return self._pending is None

    def _draw(self, heatmap: Heatmap | None, reset_view: bool, key) -> None:
        if self.stack.currentWidget() is not self.view:
            self.stack.setCurrentWidget(self.view)
        same_shape = heatmap is not None and self._drawn_shape == heatmap.shape
        self._drawn_shape = heatmap.shape if heatmap is not None else None
        self.heatmap = heatmap
        self._key = key
        if self._prepared is not None and self._prepared[0] is not heatmap:
            self._prepared = None  # made for a map no longer shown
        if self._prepared is not None:
            self._classes = self._prepared[2]
        else:
            self._classes = heatmap_classes(heatmap) if heatmap is not None else None
        self._show_special_legend()
        if heatmap is None:
            self.image.clear()
            self._image_of = None
            self._update_values()
            self.title_label.setText("")
            self.readout.setText(" ")
            return
        rows, cols = heatmap.values.shape
        self._placing = True
        try:
            self._fit_plot()
            self._place_view(rows, cols, reset_view or not same_shape)
        finally:
            self._placing = False
        self._show_image()
        self._update_values()
        self.ensure_colorbar()
        colorbar_state = (heatmap.colormap, tuple(heatmap.levels))
        if self.colorbar is not None and colorbar_state != self._colorbar_state:  # a new map rebuilds its pixmap
            if self._colorbar_state is None or colorbar_state[0] != self._colorbar_state[0]:
                self.colorbar.setColorMap(colormap(heatmap.colormap))
                # a mask holds 0 and −∞, not a range: its cells say so, and a 0 … 1 bar would mislead. The bar
                # is made transparent rather than hidden: it keeps its room, so the map keeps its size and place
                # (hidden, it re-laid out and painted the plot twice on each mask step, and the map jumped)
                self.colorbar.setOpacity(0.0 if heatmap.colormap == MASK else 1.0)
            self.colorbar.setLevels(values=heatmap.levels)
            self.colorbar.axis.setTicks([bar_ticks(*self.colorbar.levels())])  # a few round values (bar_ticks.py)
            self._colorbar_state = colorbar_state
        if self.title_label.text() != heatmap.title:
            self.title_label.setText(heatmap.title)
        self.title_label.setToolTip(f"{heatmap.title}\n{heatmap.subtitle}\n{heatmap.formula}".strip())
        if not self.compact and self._axis_names != (heatmap.row_dim, heatmap.col_dim):
            self._axis_names = (heatmap.row_dim, heatmap.col_dim)  # setLabel re-lays out the axis: only on change
            for side, name in (("left", heatmap.row_dim), ("bottom", heatmap.col_dim)):
                if name:
                    self.plot.setLabel(side, name)
                else:  # a map whose rows say what they are (the neuron view's q and k) needs no axis title
                    self.plot.getAxis(side).showLabel(False)
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
            # pyqtgraph moves the cells to the new range only as it starts painting, which marks them dirty again
            # and paints the plot a second time: move them now, so that one paint shows the new map.
            vb.updateMatrix()

    def _plot_pixels(self) -> tuple[float, float]:
        """(height, width) of the plot area in device pixels (estimated before the first layout). While the widget
        is hidden (the Step view shows a token table in its place, squeezing it first) its size when last shown:
        the size it will have again, for which the Step view makes the next maps' images ahead."""
        shown = self.isVisible()
        if not shown and self._shown_pixels is not None:
            return self._shown_pixels
        vb = self.plot.getViewBox()
        width = vb.width() if vb.width() > 50 else max(100, self.view.width() - 90)
        height = vb.height() if vb.height() > 50 else max(60, self.view.height() - 40)
        ratio = self.devicePixelRatioF()
        pixels = (height * ratio, width * ratio)
        if shown and vb.width() > 50 and vb.height() > 50:
            self._shown_pixels = pixels
        return pixels

    def _display_block_now(self) -> tuple[int, int]:
        """Cells per image pixel for the visible part of the map at the plot's size (1 × 1 when zoomed in)."""
        rows, cols = self.heatmap.values.shape
        (x0, x1), (y0, y1) = self.plot.getViewBox().viewRange()
        visible = (min(rows, max(1, round(y1 - y0))), min(cols, max(1, round(x1 - x0))))
        return display_blocks(visible, self._plot_pixels())

    def _show_image(self, resized: bool = False) -> None:
        """Give the ImageItem the current heatmap at the resolution the plot can show (no-op when it has it). After
        a resize (`resized`: a layout settling once a view's maps are drawn) a large map stays on screen at its
        present resolution while the draw queue makes the new one off the UI thread."""
        hm = self.heatmap
        if hm is None or self._placing or self._pending is not None:
            return
        block = self._display_block_now()
        if self._image_of is not None and self._image_of[0] is hm and self._image_of[1] == block:
            return
        cache_key = (self._key, block) if self._key is not None and self.image_cache is not None else None
        rgba = self.image_cache.get(cache_key) if cache_key is not None else None
        made = self._prepared
        if rgba is None and made is not None and made[0] is hm and made[1] == block and made[3] is not None:
            rgba = made[3]  # made off the UI thread (draw_preparation)
            if cache_key is not None:
                self.image_cache.put(cache_key, rgba)
        if (rgba is None and resized and hm.values.size >= DEFER_CELLS and self._image_of is not None
                and self._image_of[0] is hm):
            self._pending = (hm, False, self._key)
            draw_queue().put(self)
            return
        if rgba is None:
            rgba = display_image(hm, block, self._classes)
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

    def _vb_size_now(self) -> tuple[float, float]:
        vb = self.plot.getViewBox()
        return vb.width(), vb.height()

    def _on_view_changed(self) -> None:
        self._vb_size = self._vb_size_now()
        if self._pending is not None:
            return  # its turn to draw comes (a new map in a resized plot is drawn once, not twice)
        self._fit_plot()
        self._apply_ticks()
        self._show_image(resized=True)
        self._update_values()

    def _on_range_changed(self) -> None:
        if self._pending is not None:
            return
        # a resize changes the range first (then reports the new size): not a zoom, which is drawn at once
        self._show_image(resized=self._vb_size_now() != self._vb_size)
        self._update_values()

    # --- a map with few rows or columns keeps readable cells ------------------------------------------------

    def _fit_plot(self) -> None:
        """Size the plot so that cells are at most MAX_CELL_W wide and no taller than wide (MIN_ROW_PX rows
        are always allowed): the space left over becomes layout margin, the map centred at the top. Square
        (aspect-locked) thumbnails keep the whole space."""
        hm = self.heatmap
        ci = self.view.ci
        if hm is None or self.square:
            self._set_margins((PLOT_MARGIN,) * 4)
            return
        rows, cols = hm.values.shape
        vb = self.plot.getViewBox()
        width, height = ci.geometry().width(), ci.geometry().height()
        if width < 50 or height < 50:
            return  # not laid out yet
        left, top, right, bottom = self._margins or (PLOT_MARGIN,) * 4
        if vb.width() > 1 and vb.height() > 1:  # axes, colour bar and spacing around the ViewBox, as laid out
            extra_w = width - left - right - vb.width()
            extra_h = height - top - bottom - vb.height()
        else:
            extra_w, extra_h = 90.0, 50.0
        room_w = max(1.0, width - 2 * PLOT_MARGIN - extra_w)
        room_h = max(1.0, height - 2 * PLOT_MARGIN - extra_h)
        cell_w = min(room_w / cols, MAX_CELL_W)
        cell_h = min(room_h / rows, max(MIN_ROW_PX, cell_w))
        spare_w = max(0.0, room_w - cell_w * cols)
        spare_h = max(0.0, room_h - cell_h * rows)
        self._set_margins((PLOT_MARGIN + spare_w / 2, PLOT_MARGIN, PLOT_MARGIN + spare_w / 2, PLOT_MARGIN + spare_h))

    def _set_margins(self, margins: tuple[float, float, float, float]) -> None:
        """Give the layout new margins only when they change by a pixel or more (each change re-lays it out)."""
        old = self._margins or (PLOT_MARGIN,) * 4
        if self._margins is not None and all(abs(a - b) < 1.0 for a, b in zip(old, margins)):
            return
        self._margins = margins
        self.view.ci.setContentsMargins(*margins)

    def map_rect(self) -> QRectF:
        """Where the map's cells are drawn, in this widget's coordinates (for tests and layout checks)."""
        if self.heatmap is None:
            return QRectF()
        rows, cols = self.heatmap.values.shape
        vb = self.plot.getViewBox()
        scene = vb.mapViewToScene(QRectF(-0.5, -0.5, cols, rows)).boundingRect()
        scene = scene.intersected(vb.sceneBoundingRect())
        top_left = self.view.mapFromScene(scene.topLeft())
        bottom_right = self.view.mapFromScene(scene.bottomRight())
        offset = self.view.mapTo(self, self.view.rect().topLeft())
        return QRectF(top_left + offset, bottom_right + offset)

    # --- values in the cells ---------------------------------------------------------------------------------

    def _integral(self, hm: Heatmap) -> bool:
        if self._integral_of is None or self._integral_of[0] is not hm:
            self._integral_of = (hm, is_integral(hm.values))
        return self._integral_of[1]

    def _update_values(self) -> None:
        """Write the value of each visible cell inside it when cells are big enough on screen; else nothing."""
        hm = self.heatmap
        if self._pending is not None:
            return
        item = self.values_item
        vb = self.plot.getViewBox()
        if hm is None or not self.show_values or self._placing or vb.width() < 1 or vb.height() < 1:
            self._hide_values()
            return
        rows, cols = hm.values.shape
        (x0, x1), (y0, y1) = vb.viewRange()
        cell_w, cell_h = vb.width() / max(x1 - x0, 1e-9), vb.height() / max(y1 - y0, 1e-9)
        least = COMPACT_VALUE_CELL_PX if self.compact else VALUE_CELL_PX
        if cell_w < least or cell_h < least:
            self._hide_values()
            return
        r0, r1 = max(0, math.floor(y0 + 0.5)), min(rows, math.ceil(y1 + 0.5))
        c0, c1 = max(0, math.floor(x0 + 0.5)), min(cols, math.ceil(x1 + 0.5))
        if r1 <= r0 or c1 <= c0 or (r1 - r0) * (c1 - c0) > MAX_VALUE_TEXTS:
            self._hide_values()
            return
        key = (hm, r0, r1, c0, c1, round(cell_w), round(cell_h))
        if self._values_key is not None and item.isVisible() and self._same_values_key(key):
            return
        shown = hm.values[r0:r1, c0:c1]
        gaps = hm.gaps[r0:r1, c0:c1] if hm.gaps is not None else None
        labels = cell_labels(shown, self._integral(hm), value_decimals(hm), gaps)
        classes = self._classes[r0:r1, c0:c1] if self._classes is not None else None
        dark = dark_text_on(rgba_image(shown, hm.levels, hm.colormap, classes))
        font = QFont()
        lo, hi = max(VALUE_FONT_PX[0], min_pixels(self.logicalDpiY())), VALUE_FONT_PX[1]
        size = min(hi, cell_h * 0.42) * (0.85 if self.compact else 1.0)
        font.setPixelSize(max(1, round(size)))
        metrics = QFontMetricsF(font)
        longest = sorted({t for row in labels for t in row}, key=len)[-4:]  # digits are equally wide
        widest = max((metrics.horizontalAdvance(t) for t in longest), default=0.0)
        if widest > cell_w - 4:  # shrink to fit the widest value, down to the smallest readable size
            size = size * (cell_w - 4) / widest
            font.setPixelSize(max(1, math.floor(size)))
        if size < lo:
            self._hide_values()
            return
        cells = [
            (r0 + i, c0 + j, text, bool(dark[i, j]))
            for i, row in enumerate(labels)
            for j, text in enumerate(row)
            if text
        ]
        item.set_cells(cells, (rows, cols), font)
        item.setVisible(True)
        self._values_key = key

    def _same_values_key(self, key: tuple) -> bool:
        old = self._values_key
        return old[0] is key[0] and old[1:] == key[1:]  # the heatmap by identity: its values are not compared

    def _hide_values(self) -> None:
        self._values_key = None
        if self.values_item.cells or self.values_item.isVisible():
            self.values_item.set_cells([], (0, 0), self.values_item.font)
            self.values_item.setVisible(False)

    def cell_texts(self) -> list[tuple[int, int, str, bool]]:
        """The values written in the cells now: (row, col, text, dark text?); empty when cells are small."""
        return list(self.values_item.cells) if self.values_item.isVisible() else []

    def cell_texts_shown(self) -> int:
        return len(self.cell_texts())

    def _legend_text(self) -> str:
        hm = self.heatmap
        if hm is None:
            return " "
        lo, hi = (format_value(v) for v in hm.levels)
        text = f"{hm.shape[0]} × {hm.shape[1]}" + ("" if hm.colormap == MASK else f"; colour range {lo} … {hi}")
        if hm.masked is not None:
            text += "; grey = −∞ (masked)"
        trouble = trouble_count(self._classes)
        if trouble:
            text += f"; {trouble} cell{'s' * (trouble > 1)} not finite (see the colours below)"
        if hm.row_dim == "tgt_pos":  # decoder-input rows (the trace); the decoding timeline's rows are "emitted"
            text += "; row t = decoder input t, which predicts token t+1"
        br, bc = self.display_block
        if br * bc > 1:  # say so: a block maximum looks brighter than a typical cell
            which = "value farthest from 0" if display_reduction(hm.colormap) == EXTREME else "maximum"
            text += f"; a pixel shows the {which} of {br} × {bc} cells"
        return text + ". Hover a cell to read it."

    def _show_special_legend(self) -> None:
        """Swatches for the cells that are not numbers on the colour bar's scale, shown when any is trouble."""
        entries = legend_entries(self._classes) if trouble_count(self._classes) else []
        if not entries:
            self.special_legend.setVisible(False)
            return
        parts = [f"<span style='{swatch_css(code)}'>&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{text}"
                 for code, text in entries]
        self.special_legend.setText("Not finite: " + "&nbsp;&nbsp; ".join(parts))
        self.special_legend.setToolTip("NaN and ±∞ come from the model's numbers (its weights or an overflow), not "
                                       "from masking: a mask's −∞ is grey.")
        self.special_legend.setVisible(True)

    def special_legend_entries(self) -> list[str]:
        """What the legend under the map lists now (for tests): e.g. ['NaN', '+∞']; [] when it is hidden."""
        if self.special_legend.isHidden():
            return []
        return [text for _, text in legend_entries(self._classes)]

    def _apply_ticks(self) -> None:
        hm = self.heatmap
        if hm is None or not self.ticks or self._pending is not None:
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
        masked = hm.masked is not None and bool(hm.masked[row, col])
        suffix = "  (masked)" if masked else ("  (not finite)" if value != value or abs(value) == float("inf") else "")
        return f"row {r}  ·  column {c}  =  {format_value(value)}{suffix}"

    def set_highlight(self, cells: list[tuple[int, int]]) -> None:
        """Outline these (row, col) cells — a derivation's inputs, or the cell it explains: one rectangle per run
        of adjacent cells in a row, drawn above the values (at most HIGHLIGHT_RUNS rectangles)."""
        if not cells and not self._highlights:
            self.highlighted = []
            return  # nothing outlined before or now (most steps): no pen to make
        for item in self._highlights:
            self.plot.removeItem(item)
        self._highlights, self.highlighted = [], sorted(set(cells))
        runs: list[list[int]] = []  # [row, first col, last col]
        for row, col in self.highlighted:
            if runs and runs[-1][0] == row and runs[-1][2] == col - 1:
                runs[-1][2] = col
            else:
                runs.append([row, col, col])
        pen = pg.mkPen(HIGHLIGHT_COLOUR, width=3)
        pen.setCosmetic(True)  # the same width at every zoom
        for row, first, last in runs[:HIGHLIGHT_RUNS]:
            rect = QGraphicsRectItem(first - 0.5, row - 0.5, last - first + 1, 1)
            rect.setPen(pen)
            rect.setZValue(30)
            self.plot.addItem(rect)
            self._highlights.append(rect)

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

    def context_menu(self, cell: tuple[int, int] | None = None) -> QMenu:
        """The right-click menu at a cell (or off the map): the view's own actions first, then the exports."""
        menu = self.export_menu()
        if self.menu_hook is not None:
            self.menu_hook(menu, cell)
        return menu

    def _show_menu(self, pos, source=None) -> None:
        source = source or self
        cell = self.cell_at(self.view.mapToScene(pos)) if source is self.view else None
        self.context_menu(cell).exec(source.mapToGlobal(pos))

    def reset_zoom(self) -> None:
        if self.heatmap is not None:
            rows, cols = self.heatmap.values.shape
            self.plot.getViewBox().setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0.0)


HIGHLIGHT_COLOUR = OUTLINE_COLOUR  # outlines of highlighted cells: a hue none of the colour maps uses
HIGHLIGHT_RUNS = 256


def _ticks(labels: list[str] | None, n: int, stride: int, chars: int) -> list[tuple[float, str]]:
    """Every stride-th position with its label abbreviated to `chars` (only the labels drawn are built)."""
    if labels is None:
        return [(float(i), str(i)) for i in range(0, n, max(stride, 1))]
    return [(float(i), abbreviate(labels[i], chars) if i < len(labels) else str(i)) for i in range(0, n, stride)]


def masked_swatch_css() -> str:
    r, g, b, _ = MASKED_RGBA
    return f"background: rgb({r},{g},{b}); color: white; padding: 0 4px;"

