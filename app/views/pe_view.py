"""The positional encoding actually added (position × dimension) and chosen dimensions' curves over position;
what the tutorials explain about it: PE·PEᵀ (positions compare by distance) and each dimension's wavelength.

A "Show" selector picks one of the three pages, so each gets the whole tab even in a small window.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from scratchformer.plotdata import (
    Heatmap,
    default_pe_dims,
    pe_curves,
    pe_similarity,
    pe_wavelength_heatmap,
    pe_wavelengths,
    positional_heatmap,
)

from ..widgets.cell_links import derive_from_map
from ..widgets.draw_queue import draw_queue
from ..widgets.heatmap import HeatmapWidget
from .base import View, placeholder

ENCODING, SIMILARITY, WAVELENGTHS = "encoding", "similarity", "wavelengths"
MODES = (
    ("Encoding", ENCODING, "The position × dimension encoding added, and chosen dimensions over position"),
    ("Similarity PE·PEᵀ", SIMILARITY, "Dot product of every two positions' encodings: high near the diagonal"),
    ("Wavelengths", WAVELENGTHS, "How many positions each dimension's sine or cosine takes to repeat"),
)
LATER_CURVE_POINTS = 128  # positions from which the curves are drawn on coming turns (widgets/draw_queue.py)
CURVES_PER_TURN = 2  # … this many curves (with their dots) a turn
CURVE_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


def parse_dims(text: str, d_model: int) -> list[int]:
    """'0, 1, 8-11' → [0, 1, 8, 9, 10, 11], keeping only dimensions that exist (at most 8 curves)."""
    dims: list[int] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            continue
        dims.extend(d for d in range(a, b + 1) if 0 <= d < d_model and d not in dims)
    return dims[:8]


class PositionalView(View):
    title = "Positional encoding"
    explains = "positional"
    tooltip = "The sinusoidal position signal added to the embeddings, how positions compare, and its wavelengths"

    def __init__(self, window) -> None:
        super().__init__(window)
        self._curves: tuple | None = None  # (pe, dims, positional) of curves waiting to be drawn
        self._curve_items: list | None = None  # (index, plotdata Curve) of those not drawn yet
        self._curves_key: tuple | None = None  # what the curves on screen (or waiting) show
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Show"))
        self.mode = QComboBox()
        for i, (text, key, tip) in enumerate(MODES):
            self.mode.addItem(text, key)
            self.mode.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        self.mode.setToolTip("Which picture of the positional encoding to show")

        bar.addWidget(self.mode)
        bar.addSpacing(12)
        bar.addWidget(QLabel("Sequence"))
        self.side = QComboBox()
        self.side.addItem("Source (encoder)", "src_embed")
        self.side.addItem("Target (decoder)", "tgt_embed")
        self.side.setToolTip("Whose positional encoding to show")
        bar.addWidget(self.side)
        bar.addSpacing(12)
        self.dims_label = QLabel("Dimensions")
        bar.addWidget(self.dims_label)
        self.dims_edit = QLineEdit()
        self.dims_edit.setPlaceholderText("e.g. 0, 1, 4-7")
        self.dims_edit.setToolTip("Dimensions to plot over position: numbers and ranges, at most 8")
        self.dims_edit.setMaximumWidth(160)
        bar.addWidget(self.dims_edit)
        bar.addStretch(1)
        layout.addLayout(bar)
        self.empty = placeholder("This model adds no positional encoding that can be shown.")
        layout.addWidget(self.empty)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.heatmap = HeatmapWidget()
        self.heatmap.clicked.connect(lambda r, c: derive_from_map(self.main, self.heatmap.heatmap, r, c))
        self.connect_heatmap(self.heatmap)
        self.splitter.addWidget(self.heatmap)
        curves_host = QWidget()
        cl = QVBoxLayout(curves_host)
        cl.setContentsMargins(0, 0, 0, 0)
        self.curves_title = bold_label()
        cl.addWidget(self.curves_title)
        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setLabel("bottom", "position")
        self.plot.setLabel("left", "PE value")
        self.legend = self.plot.addLegend(offset=(-10, 10), brush=pg.mkBrush(255, 255, 255, 210))  # readable over lines
        cl.addWidget(self.plot, 1)
        self.splitter.addWidget(curves_host)
        self.splitter.setSizes([500, 350])
        self.pages = QStackedWidget()
        self.pages.addWidget(self.splitter)
        self.pages.addWidget(self._build_similarity_page())
        self.pages.addWidget(self._build_wavelength_page())
        layout.addWidget(self.pages, 1)
        self.side.currentIndexChanged.connect(lambda _i: self._user_changed())
        self.dims_edit.editingFinished.connect(self._user_changed)
        self.mode.currentIndexChanged.connect(lambda _i: self.refresh())
        self._map: Heatmap | None = None
        self._similarity: Heatmap | None = None
        self._wavelength_map: Heatmap | None = None
        self._user_side = False
        self._d_model = 0

    def _build_similarity_page(self) -> QWidget:
        page = QWidget()
        pl = QVBoxLayout(page)
        pl.setContentsMargins(0, 0, 0, 0)
        self.similarity = HeatmapWidget()
        self.connect_heatmap(self.similarity)
        pl.addWidget(self.similarity, 1)
        self.similarity_caption = caption(
            "Each cell is the dot product of two positions' encodings. For the paper's sinusoids it depends only "
            "on how far apart the positions are: largest on the diagonal (a position with itself) and falling "
            "off with distance, so attention, which compares vectors by dot products, can tell near from far."
        )
        pl.addWidget(self.similarity_caption)
        return page

    def _build_wavelength_page(self) -> QWidget:
        page = QWidget()
        pl = QVBoxLayout(page)
        pl.setContentsMargins(0, 0, 0, 0)
        self.wavelength_title = bold_label()
        pl.addWidget(self.wavelength_title)
        self.wavelength_empty = placeholder(
            "This model's positions have no wavelengths: they are learned vectors, one per position, not sines "
            "and cosines."
        )
        pl.addWidget(self.wavelength_empty)
        self.wavelength_plot = pg.PlotWidget()
        self.wavelength_plot.setMenuEnabled(False)
        self.wavelength_plot.showGrid(x=True, y=True, alpha=0.25)
        self.wavelength_plot.setLogMode(x=False, y=True)
        self.wavelength_plot.setLabel("bottom", "dimension")
        self.wavelength_plot.setLabel("left", "wavelength (positions, log scale)")
        pl.addWidget(self.wavelength_plot, 1)
        self.wavelength_caption = caption(
            "Dimensions 2i and 2i+1 are a sine and a cosine of wavelength 2π·10000^(2i/d_model): the first pair "
            "repeats every 2π ≈ 6.3 positions, the last barely moves over thousands. Fast dimensions tell "
            "neighbours apart, slow ones say roughly where in a long text a token is. The dashed line marks "
            "this input's length: dimensions far above it hardly change across the sentence."
        )
        pl.addWidget(self.wavelength_caption)
        return page

    def _user_changed(self) -> None:
        self._user_side = True
        self.refresh()

    def mode_key(self) -> str:
        return self.mode.currentData()

    def refresh(self) -> None:
        trace = self.main.current_trace()
        result = self.main.current_result()
        if trace is None:
            return
        step = self.main.current_step()
        if not self._user_side and step is not None and step.stack in ("tgt_embed", "decoder", "generator"):
            self.side.blockSignals(True)
            self.side.setCurrentIndex(1)
            self.side.blockSignals(False)
        stack = self.side.currentData()
        if trace.find(f"{stack}.positional_encoding") is None:
            other = "tgt_embed" if stack == "src_embed" else "src_embed"
            stack = other if trace.find(f"{other}.positional_encoding") is not None else stack
        mode = self.mode_key()
        self.dims_label.setVisible(mode == ENCODING)
        self.dims_edit.setVisible(mode == ENCODING)
        hm = positional_heatmap(trace, stack)
        self.empty.setVisible(hm is None)
        self.pages.setVisible(hm is not None)
        self._map = hm
        self._similarity = self._wavelength_map = None
        if hm is None:
            return
        config = result.bundle.config
        pe_step = trace[f"{stack}.positional_encoding"]
        pe = pe_step.tensor.numpy()
        self.pages.setCurrentIndex([m[1] for m in MODES].index(mode))
        if mode == SIMILARITY:
            pos_dim = pe_step.dims[0]
            labels = trace.labels(pos_dim, self.main.current_batch())
            self._similarity = pe_similarity(pe, config.positional, labels, pos_dim)
            self.similarity.set_heatmap(self._similarity)
        elif mode == WAVELENGTHS:
            self._draw_wavelengths(pe.shape[1], config.positional, pe.shape[0])
        else:
            self._draw_encoding(hm, pe, config)

    def _draw_encoding(self, hm: Heatmap, pe: np.ndarray, config) -> None:
        self.heatmap.set_heatmap(hm)
        if config.d_model != self._d_model:
            self._d_model = config.d_model
            self.dims_edit.setText(", ".join(map(str, default_pe_dims(config.d_model))))
        dims = parse_dims(self.dims_edit.text(), pe.shape[1]) or default_pe_dims(pe.shape[1])
        # the same encoding and dimensions as the curves on screen (a lesson page or a tab switch refreshes the
        # view again): nothing to redraw — eight plot items cost 20–40 ms to make
        key = (id(self.main.current_trace()), config.name, hm.title, pe.shape, tuple(dims), config.positional)
        if key == self._curves_key and self._curves is None:
            return
        self._curves_key = key
        self._curves, self._curve_items = (pe, dims, config.positional), None
        if pe.shape[0] >= LATER_CURVE_POINTS:  # hundreds of dots per curve: drawn on a coming turn, after the map
            draw_queue().put(self)
        else:
            self.draw_pending()

    def draw_pending(self) -> None:
        """The chosen dimensions' curves (the draw queue calls this for long inputs; nothing when none wait): at
        most CURVES_PER_TURN a call for long inputs, the rest on the queue's coming turns, so that no turn makes
        and paints all of them (at 512 positions eight curves took 50 ms of one turn)."""
        if self._curves is None:
            return
        pe, dims, positional = self._curves
        if self._curve_items is None:  # a new set of curves: start again
            self.plot.clear()
            self.legend.clear()
            # The range is fitted once, for every curve: fitted per curve, each new curve moved the view and made
            # every curve already there recompute its points (half the time of drawing 512 positions). No dynamic
            # range limit either: it recomputes on every view change, and these values are at most a few units (a
            # learned table that holds NaN or ±∞ is still skipped by the finite check).
            self.plot.disableAutoRange()
            self._curve_items = list(enumerate(pe_curves(pe, dims, positional)))
            self._fit_curves([c for _, c in self._curve_items])
        per_turn = CURVES_PER_TURN if pe.shape[0] >= LATER_CURVE_POINTS else len(self._curve_items)
        for _ in range(min(per_turn, len(self._curve_items))):
            i, c = self._curve_items.pop(0)
            colour = CURVE_COLOURS[i % len(CURVE_COLOURS)]
            line = self.plot.plot(c.x, c.y, pen=pg.mkPen(colour, width=2), name=c.label, dynamicRangeLimit=None)
            dots = self.plot.plot(c.x_points, c.y_points, pen=None, symbol="o", symbolSize=6, symbolBrush=colour,
                                  symbolPen=None, dynamicRangeLimit=None)
            for item in (line.curve, dots.scatter):  # painted once, then copied while the next ones are added
                item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        if self._curve_items:
            draw_queue().put(self)  # the rest on coming turns
            return
        self._curves = self._curve_items = None
        self.plot.enableAutoRange()
        self.curves_title.setText(
            f"Chosen dimensions over position (lines: the formula; dots: the {pe.shape[0]} values added)"
        )

    def _fit_curves(self, curves: list) -> None:
        """Show the whole of these curves (what auto-range will choose once they are all in)."""
        finite = [v for c in curves for v in (c.y, c.y_points) if v.size and np.isfinite(v).any()]
        xs = [v for c in curves for v in (c.x, c.x_points) if v.size]
        if finite and xs:
            self.plot.setRange(xRange=(min(float(v.min()) for v in xs), max(float(v.max()) for v in xs)),
                               yRange=(min(float(np.nanmin(v[np.isfinite(v)])) for v in finite),
                                       max(float(np.nanmax(v[np.isfinite(v)])) for v in finite)))

    def _draw_wavelengths(self, d_model: int, positional: str, n_positions: int) -> None:
        wavelengths = pe_wavelengths(d_model, positional)
        self._wavelength_map = pe_wavelength_heatmap(d_model, positional)
        has = wavelengths.size > 0
        self.wavelength_empty.setVisible(not has)
        self.wavelength_plot.setVisible(has)
        self.wavelength_caption.setVisible(has)
        self.wavelength_plot.clear()
        if not has:
            self.wavelength_title.setText("Wavelengths")
            return
        self.wavelength_title.setText("Wavelength of every dimension of the positional encoding, in positions")
        dims = np.arange(d_model, dtype=np.float64)
        self.wavelength_plot.plot(dims, wavelengths, pen=pg.mkPen(CURVE_COLOURS[0], width=2), symbol="o",
                                  symbolSize=4 if d_model > 64 else 6, symbolBrush=CURVE_COLOURS[0], symbolPen=None)
        # items other than data curves live in view coordinates: log10 of the wavelength
        line = pg.InfiniteLine(
            pos=np.log10(max(n_positions, 1)), angle=0, pen=pg.mkPen("#d62728", width=1, style=Qt.PenStyle.DashLine),
            label=f"this input: {n_positions} positions", labelOpts={"position": 0.15, "color": "#d62728"},
        )
        self.wavelength_plot.addItem(line)

    def current_heatmaps(self) -> list[Heatmap]:
        mode = self.mode_key()
        shown = {ENCODING: self._map, SIMILARITY: self._similarity, WAVELENGTHS: self._wavelength_map}[mode]
        return [shown] if shown is not None else []

    def view_title(self) -> str:
        maps = self.current_heatmaps()
        return maps[0].title if maps else "Positional encoding"


def bold_label(text: str = "") -> QLabel:
    """A bold, wrapping title line above a plot."""
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    label.setWordWrap(True)
    return label


def caption(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setStyleSheet("color: #555;")
    return label
