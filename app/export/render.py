"""Drawing a Figure (scratchformer.exporting.figure) with QPainter: one painter routine for PNG, SVG and PDF.

Why QPainter and not pyqtgraph's exporters: pyqtgraph 0.14's SVGExporter raises ValueError with PySide6 6.12
(upstream issue #3485), and its image exporter grabs the on-screen scene, which headless export does not have.
Painting the plot data ourselves onto QImage / QSvgGenerator / QPdfWriter gives the same picture in all three
formats with no display: in SVG, text stays <text> and each cell is a <rect>; in PDF the fonts are embedded
(Qt shapes text with HarfBuzz, so Devanagari conjuncts and emoji come out right) and the text is searchable.

Small maps (at most VALUE_MAX_SIDE cells a side, the walkthrough's sizes) get each cell's value written inside
it, as the window does: plotdata.cell_label in dark or white by the cell's luminance (plotdata.dark_text_on),
so a slide shows the numbers. In SVG and PDF they are real text.

Maps with more than VECTOR_CELLS cells (the all-layers overview, long texts) are drawn as one embedded image
scaled up by whole pixels per cell and marked image-rendering: pixelated, so it stays crisp when zoomed
rather than producing hundreds of thousands of shapes.
"""

from __future__ import annotations

import math
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QIODevice,
    QMarginsF,
    QPointF,
    QRectF,
    QSize,
    QSizeF,
    Qt,
)
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QImage,
    QPageSize,
    QPainter,
    QPdfWriter,
    QPen,
)
from PySide6.QtSvg import QSvgGenerator

from app.startup.qt_application import application
from app.widgets.colormaps import MASKED_RGBA, SPECIAL_RGBA, heatmap_rgba, lookup_table
from scratchformer.exporting.figure import Figure
from scratchformer.plotdata import MASK, Heatmap, abbreviate, format_value
from scratchformer.plotdata.heatmap import (
    DARK_TEXT,
    LIGHT_TEXT,
    OUTLINE_COLOUR,
    cell_labels,
    dark_text_on,
    value_decimals,
)
from scratchformer.plotdata.special import MASKED, heatmap_classes, legend_entries, trouble_count

VECTOR_CELLS = 40_000  # above this many cells in a figure, cells become one crisp embedded image
VALUE_MAX_SIDE = 20  # maps up to this many rows and columns carry their values in the cells
VALUE_FONT = (5.0, 11.0)  # the values' font size in points: smallest drawn, largest
FONT_FAMILIES = ["Noto Sans", "DejaVu Sans", "Noto Sans Devanagari", "Droid Sans Fallback", "Noto Color Emoji"]
MARGIN, GAP = 16.0, 22.0
BAR_W, BAR_GAP = 14.0, 14.0
LABEL_CHARS = 8  # axis labels are abbreviated like the screen's (plotdata.abbreviate); full text in CSV/npz
INK, MUTED = QColor(20, 20, 20), QColor(96, 96, 96)


def _font(pixel_size: float, bold: bool = False, italic: bool = False) -> QFont:
    f = QFont()
    f.setFamilies(FONT_FAMILIES)
    f.setPixelSize(max(1, round(pixel_size)))
    f.setBold(bold)
    f.setItalic(italic)
    f.setHintingPreference(QFont.PreferNoHinting)  # same metrics on screen, in SVG and in PDF
    return f


@dataclass
class _Fonts:
    title: QFont
    subtitle: QFont
    panel: QFont
    tick: QFont

    @classmethod
    def make(cls) -> _Fonts:
        return cls(_font(15, bold=True), _font(11), _font(12, bold=True), _font(10))


def _cell_size(fig: Figure) -> float:
    """Cell edge in points: big for one small map, smaller as panels and cells multiply."""
    r, c = fig.grid()
    longest = max(max(h.shape) for h in fig.heatmaps)
    budget = 560.0 if len(fig.heatmaps) == 1 else max(150.0, 900.0 / c)
    return float(min(30.0, max(2.0, budget / max(1, longest))))


def _every(n_labels: int, cell: float, text_h: float) -> int:
    """Show every k-th tick label so labels never overlap."""
    return max(1, math.ceil((text_h + 1.0) / cell)) if n_labels else 1


@dataclass
class _Panel:
    heatmap: Heatmap
    row_text: list[str]
    col_text: list[str]
    row_w: float  # width of the row-label column
    col_h: float  # height of the column-label band
    rotate: bool  # column labels drawn vertically
    title_h: float
    cell: float
    title_w: float = 0.0  # the panel title's width, drawn from the map's left edge

    @property
    def heat_w(self) -> float:
        return self.heatmap.shape[1] * self.cell

    @property
    def heat_h(self) -> float:
        return self.heatmap.shape[0] * self.cell

    @property
    def width(self) -> float:
        return self.row_w + max(self.heat_w, self.title_w)  # a caption wider than its map never runs into the next

    @property
    def height(self) -> float:
        return self.title_h + self.heat_h + self.col_h


def _tick_texts(labels: list[str] | None, n: int) -> list[str]:
    if labels:
        return [abbreviate(str(t), LABEL_CHARS) for t in labels[:n]] + [str(i) for i in range(len(labels), n)]
    return [str(i) for i in range(n)]


def _panel(h: Heatmap, cell: float, fonts: _Fonts, with_title: bool) -> _Panel:
    fm = QFontMetricsF(fonts.tick)
    rows, cols = h.shape
    row_text, col_text = _tick_texts(h.row_labels, rows), _tick_texts(h.col_labels, cols)
    row_w = max((fm.horizontalAdvance(t) for t in row_text), default=0.0) + 8.0 + fm.height()  # + axis name
    widest_col = max((fm.horizontalAdvance(t) for t in col_text), default=0.0)
    rotate = widest_col + 2.0 > cell
    col_h = (widest_col if rotate else fm.height()) + 8.0 + fm.height()
    title_h = QFontMetricsF(fonts.panel).height() + 6.0 if with_title else 0.0
    title_w = QFontMetricsF(fonts.panel).horizontalAdvance(h.title) + 10.0 if with_title else 0.0
    return _Panel(h, row_text, col_text, row_w, col_h, rotate, title_h, cell, title_w)


@dataclass
class _Layout:
    width: float
    height: float
    header: list[tuple[QFont, QColor, str]]
    header_h: float
    panels: list[_Panel]
    cols: int
    col_w: float
    row_h: float
    shared_bar: bool
    bar_w: float


def _same_scale(maps: list[Heatmap]) -> bool:
    first = maps[0]
    return all(m.levels == first.levels and m.colormap == first.colormap for m in maps)


def _bar_width(maps: list[Heatmap], fonts: _Fonts) -> float:
    fm = QFontMetricsF(fonts.tick)
    texts = ["may attend", "−∞ blocked"] if any(m.colormap == MASK for m in maps) else []
    for m in maps:
        texts += [format_value(v) for v in (m.levels[0], m.levels[1], (m.levels[0] + m.levels[1]) / 2)]
    texts += [text for _, text in _special_swatches(maps)]
    return BAR_GAP + BAR_W + 6.0 + max(fm.horizontalAdvance(t) for t in texts)


def _special_swatches(maps: list[Heatmap]) -> list[tuple[int, str]]:
    """The legend under a colour bar for cells that are not on its scale (plotdata.special): "−∞" for a mask's
    cells alone, as before; with NaN or ±∞ anywhere, every special class present, named."""
    classes = [heatmap_classes(m) for m in maps]
    if not any(trouble_count(c) for c in classes):
        return [(MASKED, "−∞")] if any(m.masked is not None for m in maps if m.colormap != MASK) else []
    found = {code: text for c in classes for code, text in legend_entries(c)}
    return sorted(found.items(), key=lambda item: -item[0])  # NaN, +∞, −∞, masked: the order of LEGEND_TEXT


def _legend_height(maps: list[Heatmap]) -> float:
    """Room the special-cell swatches need under a colour bar."""
    n = len(_special_swatches(maps))
    return 8.0 + n * (BAR_W + 6.0) if n else 0.0


def layout(fig: Figure) -> _Layout:
    """Where everything goes, in points (1/72 inch); the PNG is drawn at a scale of this."""
    fonts = _Fonts.make()
    if not fig.heatmaps:
        raise ValueError("a figure needs at least one heatmap")
    cell = _cell_size(fig)
    with_titles = fig.panel_titles and len(fig.heatmaps) > 1
    panels = [_panel(h, cell, fonts, with_titles) for h in fig.heatmaps]
    shared = _same_scale(fig.heatmaps)
    bar_w = _bar_width(fig.heatmaps, fonts)
    n_rows, n_cols = fig.grid()
    col_w = max(p.width for p in panels) + (0.0 if shared else bar_w)
    row_h = max(p.height for p in panels)
    row_h = max(row_h, max(p.title_h + p.heat_h for p in panels) + _legend_height(fig.heatmaps))  # swatches fit
    grid_w = n_cols * col_w + (n_cols - 1) * GAP
    grid_h = n_rows * row_h + (n_rows - 1) * GAP
    header = [(fonts.title, INK, fig.title)]
    if fig.subtitle:
        header.append((fonts.subtitle, MUTED, fig.subtitle))
    if fig.formula:
        header.append((fonts.subtitle, MUTED, fig.formula))
    header_h = sum(QFontMetricsF(f).height() + 3.0 for f, _, _ in header) + 8.0
    header_w = max(QFontMetricsF(f).horizontalAdvance(t) for f, _, t in header)
    width = 2 * MARGIN + max(header_w, grid_w + (bar_w if shared else 0.0))
    height = 2 * MARGIN + header_h + grid_h
    return _Layout(width, height, header, header_h, panels, n_cols, col_w, row_h, shared, bar_w)


def figure_size(fig: Figure) -> QSizeF:
    lay = layout(fig)
    return QSizeF(math.ceil(lay.width), math.ceil(lay.height))


# ---- painting ---------------------------------------------------------------------------------------------


def paint_figure(painter: QPainter, fig: Figure, rect: QRectF | None = None, vector: bool = True) -> None:
    """Paint `fig` into `rect` (default: its natural size at the origin), scaled to fit, keeping proportions.
    With `vector`, small maps are drawn cell by cell as rectangles; otherwise every map is one image."""
    lay = layout(fig)
    painter.save()
    if rect is not None:
        s = min(rect.width() / lay.width, rect.height() / lay.height)
        dx, dy = (rect.width() - lay.width * s) / 2, (rect.height() - lay.height * s) / 2
        painter.translate(rect.x() + dx, rect.y() + dy)
        painter.scale(s, s)
    painter.setRenderHint(QPainter.Antialiasing, False)
    painter.setRenderHint(QPainter.TextAntialiasing, True)
    painter.setRenderHint(QPainter.SmoothPixmapTransform, False)
    painter.fillRect(QRectF(0, 0, lay.width, lay.height), Qt.white)
    y = MARGIN
    for font, color, text in lay.header:
        fm = QFontMetricsF(font)
        painter.setFont(font)
        painter.setPen(color)
        painter.drawText(QPointF(MARGIN, y + fm.ascent()), text)
        y += fm.height() + 3.0
    top = MARGIN + lay.header_h
    total_cells = sum(p.heatmap.shape[0] * p.heatmap.shape[1] for p in lay.panels)
    as_rects = vector and total_cells <= VECTOR_CELLS
    fonts = _Fonts.make()
    for i, panel in enumerate(lay.panels):
        r, c = divmod(i, lay.cols)
        x0 = MARGIN + c * (lay.col_w + GAP)
        y0 = top + r * (lay.row_h + GAP)
        heat = _paint_panel(painter, panel, QPointF(x0, y0), fonts, as_rects)
        if not lay.shared_bar:
            bar = QRectF(heat.right() + BAR_GAP, heat.top(), BAR_W, heat.height())
            _paint_colour_bar(painter, [panel.heatmap], bar, fonts)
    if lay.shared_bar:
        first = lay.panels[0]
        n_rows = math.ceil(len(lay.panels) / lay.cols)
        grid_right = MARGIN + lay.cols * lay.col_w + (lay.cols - 1) * GAP
        bar_top = top + first.title_h
        bar_h = (n_rows - 1) * (lay.row_h + GAP) + first.heat_h if n_rows > 1 else first.heat_h
        _paint_colour_bar(painter, [p.heatmap for p in lay.panels],
                          QRectF(grid_right + BAR_GAP, bar_top, BAR_W, bar_h), fonts)  # fmt: skip
    painter.restore()


def _paint_panel(painter: QPainter, p: _Panel, origin: QPointF, fonts: _Fonts, as_rects: bool) -> QRectF:
    h = p.heatmap
    rows, cols = h.shape
    fm = QFontMetricsF(fonts.tick)
    if p.title_h:
        painter.setFont(fonts.panel)
        painter.setPen(INK)
        painter.drawText(QPointF(origin.x() + p.row_w, origin.y() + QFontMetricsF(fonts.panel).ascent()), h.title)
    heat = QRectF(origin.x() + p.row_w, origin.y() + p.title_h, p.heat_w, p.heat_h)
    rgba = heatmap_rgba(h)  # (rows, cols, 4) the screen's colours, −∞ in MASKED_RGBA
    if as_rects:
        _paint_cells(painter, rgba, heat, p.cell)
    else:
        _paint_cells_image(painter, rgba, heat, p.cell)
    if max(rows, cols) <= VALUE_MAX_SIDE:
        _paint_values(painter, h, rgba, heat, p.cell)
    if h.outlined is not None:
        _paint_outlines(painter, h.outlined, heat, p.cell)
    painter.setPen(QPen(MUTED, 0.5))
    painter.setBrush(Qt.NoBrush)
    painter.drawRect(heat)
    # Row tick labels, right-aligned against the map; thinned so they never overlap.
    painter.setFont(fonts.tick)
    painter.setPen(INK)
    step = _every(rows, p.cell, fm.height())
    for i in range(0, rows, step):
        t = p.row_text[i]
        y = heat.top() + (i + 0.5) * p.cell + (fm.ascent() - fm.descent()) / 2
        painter.drawText(QPointF(heat.left() - 4.0 - fm.horizontalAdvance(t), y), t)
    step = _every(cols, p.cell, fm.height() if p.rotate else max(fm.horizontalAdvance(t) for t in p.col_text))
    for j in range(0, cols, step):
        t = p.col_text[j]
        cx = heat.left() + (j + 0.5) * p.cell
        if p.rotate:  # read bottom-to-top, starting just under the map
            painter.save()
            painter.translate(cx + (fm.ascent() - fm.descent()) / 2, heat.bottom() + 4.0 + fm.horizontalAdvance(t))
            painter.rotate(-90)
            painter.drawText(QPointF(0, 0), t)
            painter.restore()
        else:
            painter.drawText(QPointF(cx - fm.horizontalAdvance(t) / 2, heat.bottom() + 4.0 + fm.ascent()), t)
    # Axis names: the column axis under its labels, the row axis vertically at the far left.
    painter.setPen(MUTED)
    band = p.col_h - fm.height()
    painter.drawText(QPointF(heat.center().x() - fm.horizontalAdvance(h.col_dim) / 2,
                             heat.bottom() + band + fm.ascent()), h.col_dim)  # fmt: skip
    painter.save()
    painter.translate(origin.x() + fm.ascent(), heat.center().y() + fm.horizontalAdvance(h.row_dim) / 2)
    painter.rotate(-90)
    painter.drawText(QPointF(0, 0), h.row_dim)
    painter.restore()
    return heat


def outline_runs(outlined: np.ndarray) -> list[tuple[int, int, int]]:
    """(row, first col, last col) of each run of adjacent outlined cells in a row: one frame per run, as the
    window's map draws them (HeatmapWidget.set_highlight)."""
    runs: list[list[int]] = []
    for r, c in zip(*np.nonzero(outlined)):  # row-major order
        if runs and runs[-1][0] == r and runs[-1][2] == c - 1:
            runs[-1][2] = int(c)
        else:
            runs.append([int(r), int(c), int(c)])
    return [tuple(run) for run in runs]


def _paint_outlines(painter: QPainter, outlined: np.ndarray, heat: QRectF, cell: float) -> None:
    """A frame around each run of outlined cells, inside the cells so that neighbours' frames do not overlap."""
    width = max(1.0, min(3.0, cell * 0.12))
    painter.save()
    painter.setPen(QPen(QColor(OUTLINE_COLOUR), width))
    painter.setBrush(Qt.NoBrush)
    inset = width / 2
    for r, first, last in outline_runs(outlined):
        painter.drawRect(QRectF(heat.left() + first * cell + inset, heat.top() + r * cell + inset,
                                (last - first + 1) * cell - width, cell - width))  # fmt: skip
    painter.restore()


def _paint_cells(painter: QPainter, rgba: np.ndarray, heat: QRectF, cell: float) -> None:
    """One filled rectangle per cell (NaN cells, transparent, are left out): real shapes in SVG and PDF.
    Cells are batched by colour (at most 256 + 1 colours) so there is one drawRects call per colour."""
    packed = rgba.astype(np.uint32)
    key = (packed[..., 0] << 24) | (packed[..., 1] << 16) | (packed[..., 2] << 8) | packed[..., 3]  # (rows, cols)
    painter.save()
    painter.setPen(Qt.NoPen)
    for value in np.unique(key):
        r, g, b, a = (int(value) >> 24) & 255, (int(value) >> 16) & 255, (int(value) >> 8) & 255, int(value) & 255
        if not a:
            continue
        ys, xs = np.nonzero(key == value)
        x0, y0 = heat.left(), heat.top()
        rects = [QRectF(x0 + j * cell, y0 + i * cell, cell, cell) for i, j in zip(ys.tolist(), xs.tolist())]
        painter.setBrush(QColor(r, g, b, a))
        painter.drawRects(rects)
    painter.restore()


def _paint_cells_image(painter: QPainter, rgba: np.ndarray, heat: QRectF, cell: float) -> None:
    """All cells as one image, each cell a block of whole pixels, drawn without smoothing (crisp edges)."""
    rows, cols = rgba.shape[:2]
    k = max(1, min(8, int(round(cell * 2))))  # pixels per cell: enough that viewers which smooth stay sharp
    k = min(k, max(1, 4096 // max(rows, cols)))
    block = np.ascontiguousarray(np.repeat(np.repeat(rgba, k, axis=0), k, axis=1))
    img = QImage(block.data, cols * k, rows * k, cols * k * 4, QImage.Format_RGBA8888)
    painter.drawImage(heat, img.copy())  # copy: QImage must not outlive the numpy buffer


def _paint_values(painter: QPainter, h: Heatmap, rgba: np.ndarray, heat: QRectF, cell: float) -> None:
    """Each cell's value centred in it (the window's labels and text colours); nothing if it cannot be read."""
    labels = cell_labels(h.values, decimals=value_decimals(h), gaps=h.gaps)
    size = math.floor(min(VALUE_FONT[1], cell * 0.4))
    font = _font(size)
    longest = sorted({t for row in labels for t in row}, key=len)[-4:]  # digits are equally wide
    widest = max((QFontMetricsF(font).horizontalAdvance(t) for t in longest), default=0.0)
    if widest > cell - 3.0:  # shrink to fit the widest value
        size = math.floor(size * (cell - 3.0) / widest)
        font = _font(size)
    if size < VALUE_FONT[0]:
        return
    dark = dark_text_on(rgba)
    painter.save()
    painter.setFont(font)
    for on_light, colour in ((True, DARK_TEXT), (False, LIGHT_TEXT)):
        painter.setPen(QColor(*colour))
        for i, row in enumerate(labels):
            for j, text in enumerate(row):
                if text and bool(dark[i, j]) is on_light:
                    box = QRectF(heat.left() + j * cell, heat.top() + i * cell, cell, cell)
                    painter.drawText(box, Qt.AlignCenter, text)
    painter.restore()


def _paint_colour_bar(painter: QPainter, maps: list[Heatmap], bar: QRectF, fonts: _Fonts) -> None:
    m = maps[0]
    fm = QFontMetricsF(fonts.tick)
    painter.setFont(fonts.tick)
    if m.colormap == MASK:  # categorical: two swatches with words
        lut = lookup_table(MASK)
        items = [(QColor(*[int(x) for x in lut[0]]), "may attend"), (QColor(*MASKED_RGBA), "−∞ blocked")]
        _paint_swatches(painter, items, QPointF(bar.left(), bar.top()), fm)
        return
    lut = lookup_table(m.colormap)  # (256, 4) low → high
    column = np.ascontiguousarray(lut[::-1].reshape(256, 1, 4))  # top of the bar is the high end
    img = QImage(column.data, 1, 256, 4, QImage.Format_RGBA8888).copy()
    painter.save()
    painter.setRenderHint(QPainter.SmoothPixmapTransform, True)  # a gradient should look smooth
    painter.drawImage(bar, img)
    painter.restore()
    painter.setPen(QPen(MUTED, 0.5))
    painter.drawRect(bar)
    lo, hi = m.levels
    painter.setPen(INK)
    for frac, v in ((0.0, hi), (0.5, (lo + hi) / 2), (1.0, lo)):
        y = bar.top() + frac * bar.height()
        painter.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 3.0, y))
        painter.drawText(QPointF(bar.right() + 6.0, y + (fm.ascent() - fm.descent()) / 2), format_value(v))
    swatches = [(QColor(*SPECIAL_RGBA[code]), text) for code, text in _special_swatches(maps)]
    if swatches:
        _paint_swatches(painter, swatches, QPointF(bar.left(), bar.bottom() + 8.0), fm)


def _paint_swatches(painter: QPainter, items: list[tuple[QColor, str]], at: QPointF, fm: QFontMetricsF) -> None:
    y = at.y()
    for color, text in items:
        box = QRectF(at.x(), y, BAR_W, BAR_W)
        painter.fillRect(box, color)
        painter.setPen(QPen(MUTED, 0.5))
        painter.drawRect(box)
        painter.setPen(INK)
        painter.drawText(QPointF(box.right() + 6.0, box.center().y() + (fm.ascent() - fm.descent()) / 2), text)
        y += BAR_W + 6.0


# ---- formats ----------------------------------------------------------------------------------------------


Paint = Callable[[QPainter, bool], None]  # paints a picture in points onto a painter; the bool: keep vectors


def raster_image(size: QSizeF, paint: Paint, scale: float = 2.0) -> QImage:
    """A picture `size` points large as an image, `scale` pixels per point (2 = 144 dpi, sharp on high-DPI screens
    and print), on white; its resolution recorded (dots per metre) for the PNG's pHYs."""
    application()  # the process's Qt application, one that widgets can use too
    img = QImage(QSize(math.ceil(size.width() * scale), math.ceil(size.height() * scale)), QImage.Format_RGB32)
    dpm = round(72.0 * scale / 0.0254)
    img.setDotsPerMeterX(dpm)
    img.setDotsPerMeterY(dpm)
    _paint_raster(img, paint, scale)
    return img


def _paint_raster(img: QImage, paint: Paint, scale: float) -> None:
    """White background, then the picture at `scale` pixels per point."""
    img.fill(Qt.white)
    painter = QPainter(img)
    try:
        painter.scale(scale, scale)
        paint(painter, False)
    finally:
        painter.end()


def render_image(fig: Figure, scale: float = 2.0) -> QImage:
    """The figure as an image, `scale` pixels per point."""
    return raster_image(figure_size(fig), _figure_paint(fig), scale)


def _figure_paint(fig: Figure) -> Paint:
    return lambda painter, vector: paint_figure(painter, fig, vector=vector)


def encode_png(img: QImage) -> bytes:
    """An 8-bit RGB PNG with the image's resolution (pHYs). Written here with zlib level 1: 2-3× faster than
    QImage.save's libpng defaults for plots (large flat areas), at about 1.4× the size."""
    rgb = img.convertToFormat(QImage.Format_RGB888)
    w, h = rgb.width(), rgb.height()
    pixels = np.frombuffer(rgb.constBits(), np.uint8).reshape(h, rgb.bytesPerLine())[:, : w * 3]
    raw = np.zeros((h, w * 3 + 1), np.uint8)  # each row starts with filter type 0 (none)
    raw[:, 1:] = pixels

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    dpm = max(1, img.dotsPerMeterX())
    return b"".join([
        b"\x89PNG\r\n\x1a\n",
        chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)),
        chunk(b"pHYs", struct.pack(">IIB", dpm, max(1, img.dotsPerMeterY()), 1)),
        chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)),
        chunk(b"IEND", b""),
    ])  # fmt: skip


_SVG_IMAGE = re.compile(rb'image-rendering="optimizeSpeed"')
PDF_DPI = 600


def _svg(size: QSizeF, paint: Paint, title: str, description: str) -> bytes:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(size.toSize())
    gen.setViewBox(QRectF(0, 0, size.width(), size.height()))
    gen.setResolution(72)  # 1 user unit = 1 point, like the PDF
    gen.setTitle(title)
    gen.setDescription(description or title)
    painter = QPainter(gen)
    try:
        paint(painter, True)
    finally:
        painter.end()
    buf.close()
    # Qt writes image-rendering="optimizeSpeed" (SVG 1.1); browsers honour the CSS value "pixelated".
    return _SVG_IMAGE.sub(b'image-rendering="pixelated" style="image-rendering:pixelated"', bytes(data.data()))


def _pdf(size: QSizeF, paint: Paint, title: str) -> bytes:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    writer = QPdfWriter(buf)
    writer.setResolution(PDF_DPI)
    writer.setPageSize(QPageSize(size, QPageSize.Point, title[:60] or "figure"))
    writer.setPageMargins(QMarginsF(0, 0, 0, 0))
    writer.setTitle(title)
    writer.setCreator("scratchformer")
    painter = QPainter(writer)
    try:
        painter.scale(PDF_DPI / 72.0, PDF_DPI / 72.0)
        paint(painter, True)
    finally:
        painter.end()
    buf.close()
    return bytes(data.data())


def encode(size: QSizeF, paint: Paint, fmt: str, scale: float = 2.0, title: str = "", description: str = "") -> bytes:
    """A picture `size` points large, painted by `paint`, as the contents of a .png (`scale` pixels per point),
    .svg or .pdf file (vectors kept): the one writer of every image export, figures and charts alike."""
    fmt = fmt.lower().lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise ValueError(f"not an image format: {fmt!r}")
    application()  # the process's Qt application, one that widgets can use too
    if fmt == "png":
        return encode_png(raster_image(size, paint, scale))
    if fmt == "svg":
        return _svg(size, paint, title, description)
    return _pdf(size, paint, title)


def render_bytes(fig: Figure, fmt: str, scale: float = 2.0) -> bytes:
    """The contents of a .png, .svg or .pdf file showing `fig`."""
    return encode(figure_size(fig), _figure_paint(fig), fmt, scale, fig.title, fig.subtitle or fig.title)


def renderer(scale: float = 2.0):
    """A `Renderer` for scratchformer.exporting.ExportRun at the given PNG scale."""
    return lambda fig, fmt: render_bytes(fig, fmt, scale)


def render_frames(figs: list[Figure], scale: float = 1.5) -> list[np.ndarray]:
    """Animation frames: each figure painted at its natural size on a white canvas as large as the largest
    (top-left aligned, so captions and maps stay put from frame to frame); (H, W, 3) uint8 RGB arrays."""
    application()  # the process's Qt application, one that widgets can use too
    sizes = [figure_size(f) for f in figs]
    w = math.ceil(max((s.width() for s in sizes), default=1.0) * scale)
    h = math.ceil(max((s.height() for s in sizes), default=1.0) * scale)
    frames = []
    for fig in figs:
        img = QImage(QSize(w, h), QImage.Format_RGB888)
        _paint_raster(img, _figure_paint(fig), scale)
        rows = np.frombuffer(img.constBits(), np.uint8).reshape(h, img.bytesPerLine())
        frames.append(rows[:, : w * 3].reshape(h, w, 3).copy())  # (H, W, 3): each row without its padding
    return frames


def frames_renderer(scale: float = 1.5):
    """A FramesRenderer for scratchformer.exporting.animation at the given scale."""
    return lambda figs: render_frames(figs, scale)


def headless_renderer(scale: float = 2.0):
    """renderer(scale) with a Qt application made first: the core's `scratchformer export` asks for it through
    the "scratchformer.frontend" entry point (scratchformer/frontends.py), not by importing this module."""
    application()  # the process's Qt application, one that widgets can use too
    return renderer(scale)


def headless_frames_renderer(scale: float = 1.5):
    """frames_renderer(scale) with a Qt application made first (the entry point for animations)."""
    application()  # the process's Qt application, one that widgets can use too
    return frames_renderer(scale)
