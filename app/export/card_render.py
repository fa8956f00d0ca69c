"""A feature card (scratchformer.plotdata.feature_cards.CardPlot) painted with QPainter: on screen by the Features
view's card widget, and into PNG, SVG and PDF through render.encode, the writer of every image export — so the
file is the picture the window shows.

Layout, in points, top to bottom: the title and the dictionary; the density line; the histogram of non-zero
activations beside the tokens the feature pushes up and down (bars by logit change); the note saying which path
that reading follows; the top contexts, one a line, each token shaded by its activation (orange, the feature's
largest over the corpus fully coloured), the strongest token outlined and its value at the line's end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QRectF, QSizeF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen

from scratchformer.exporting.files import atomic_write_bytes
from scratchformer.plotdata.feature_cards import CardPlot

from ..startup.qt_application import application
from .render import INK, MUTED, _font, encode

WIDTH = 760.0
PAD = 14.0
HIST_W, HIST_H = 320.0, 150.0  # the histogram at most this wide
MIN_WIDTH = 440.0  # the narrowest card drawn
ROW_H = 15.0
CONTEXT_H = 22.0
FIRE = QColor(230, 120, 20)  # a token's shade: this colour at its activation ÷ the largest
UP, DOWN = QColor(40, 140, 70), QColor(190, 50, 50)
BAR = QColor(70, 110, 180)


def _wrapped_height(text: str, font, width: float) -> float:
    fm = QFontMetricsF(font)
    r = fm.boundingRect(QRectF(0, 0, width, 10_000), int(Qt.TextFlag.TextWordWrap), text)
    return r.height()


def card_height(plot: CardPlot, width: float = WIDTH) -> float:
    """The card's height in points at `width`."""
    inner = width - 2 * PAD
    h = PAD + 22 + _wrapped_height(plot.subtitle, _font(11), inner) + 6 + 18 + 10
    pushed = ROW_H * (1 + max(len(plot.up), len(plot.down), 1))
    h += max(HIST_H + 34, pushed) + 8
    h += _wrapped_height(plot.effect_note, _font(10, italic=True), inner) + 12
    h += 20 + CONTEXT_H * max(1, len(plot.contexts)) + PAD
    return h


def paint_card(painter: QPainter, plot: CardPlot, width: float = WIDTH) -> None:
    """Paint the card from (0, 0), `width` points wide and card_height(plot, width) high."""
    inner = width - 2 * PAD
    painter.fillRect(QRectF(0, 0, width, card_height(plot, width)), Qt.GlobalColor.white)
    y = PAD
    painter.setPen(INK)
    painter.setFont(_font(15, bold=True))
    painter.drawText(QRectF(PAD, y, inner, 22), Qt.AlignmentFlag.AlignVCenter, plot.title)
    y += 22
    painter.setFont(_font(11))
    painter.setPen(MUTED)
    sub_h = _wrapped_height(plot.subtitle, _font(11), inner)
    painter.drawText(QRectF(PAD, y, inner, sub_h), int(Qt.TextFlag.TextWordWrap), plot.subtitle)
    y += sub_h + 6
    painter.setPen(INK)
    painter.setFont(_font(12))
    painter.drawText(QRectF(PAD, y, inner, 18), Qt.AlignmentFlag.AlignVCenter, plot.density)
    y += 18 + 10
    pushed_h = ROW_H * (1 + max(len(plot.up), len(plot.down), 1))
    hist_w = min(HIST_W, inner * 0.42)  # a narrow card (the window's) gives the pushed tokens their room
    _paint_histogram(painter, plot, QRectF(PAD, y, hist_w, HIST_H + 34))
    left = PAD + hist_w + 24
    col = (width - PAD - left - 12) / 2
    _paint_pushed(painter, "Pushed up", plot.up, plot.pushed_scale, QRectF(left, y, col, pushed_h), UP)
    _paint_pushed(painter, "Pushed down", plot.down, plot.pushed_scale, QRectF(left + col + 12, y, col, pushed_h),
                  DOWN)  # fmt: skip
    y += max(HIST_H + 34, pushed_h) + 8
    note_font = _font(10, italic=True)
    note_h = _wrapped_height(plot.effect_note, note_font, inner)
    painter.setFont(note_font)
    painter.setPen(MUTED)
    painter.drawText(QRectF(PAD, y, inner, note_h), int(Qt.TextFlag.TextWordWrap), plot.effect_note)
    y += note_h + 12
    painter.setFont(_font(12, bold=True))
    painter.setPen(INK)
    painter.drawText(QRectF(PAD, y, inner, 18), Qt.AlignmentFlag.AlignVCenter,
                     "Top activating contexts" if plot.contexts else "No context of the corpus fires it")  # fmt: skip
    y += 20
    for row in plot.contexts:
        _paint_context(painter, row, QRectF(PAD, y, inner, CONTEXT_H))
        y += CONTEXT_H


def _paint_histogram(painter: QPainter, plot: CardPlot, box: QRectF) -> None:
    painter.setFont(_font(11, bold=True))
    painter.setPen(INK)
    painter.drawText(QRectF(box.left(), box.top(), box.width(), 16), Qt.AlignmentFlag.AlignVCenter,
                     "Activations where it fires")  # fmt: skip
    area = QRectF(box.left() + 34, box.top() + 20, box.width() - 40, HIST_H - 20)
    painter.setPen(QPen(MUTED, 0.8))
    painter.drawLine(area.bottomLeft(), area.bottomRight())
    painter.drawLine(area.bottomLeft(), area.topLeft())
    counts = plot.hist_counts
    most = max(counts, default=0)
    tick = _font(9)
    painter.setFont(tick)
    painter.drawText(QRectF(box.left(), area.top() - 6, 30, 12), Qt.AlignmentFlag.AlignRight, str(most))
    painter.drawText(QRectF(box.left(), area.bottom() - 6, 30, 12), Qt.AlignmentFlag.AlignRight, "0")
    if counts and most:
        w = area.width() / len(counts)
        for i, n in enumerate(counts):
            h = area.height() * n / most
            painter.fillRect(QRectF(area.left() + i * w + 0.5, area.bottom() - h, max(w - 1, 0.5), h), BAR)
    right = plot.hist_centres[-1] + plot.hist_width / 2 if plot.hist_centres else 1.0
    painter.setPen(MUTED)
    painter.drawText(QRectF(area.left() - 10, area.bottom() + 2, 40, 12), Qt.AlignmentFlag.AlignLeft, "0")
    painter.drawText(QRectF(area.right() - 60, area.bottom() + 2, 60, 12), Qt.AlignmentFlag.AlignRight,
                     f"{right:.3g}")  # fmt: skip
    painter.drawText(QRectF(area.left(), area.bottom() + 14, area.width(), 12), Qt.AlignmentFlag.AlignHCenter,
                     "activation (tokens per bin)")  # fmt: skip


def _paint_pushed(painter: QPainter, title: str, items: list[tuple[str, float]], scale: float, box: QRectF,
                  colour: QColor) -> None:  # fmt: skip
    painter.setFont(_font(11, bold=True))
    painter.setPen(INK)
    painter.drawText(QRectF(box.left(), box.top(), box.width(), ROW_H), Qt.AlignmentFlag.AlignVCenter, title)
    font = _font(10)
    painter.setFont(font)
    fm = QFontMetricsF(font)
    text_w = box.width() * 0.45
    bar_w = box.width() - text_w - 44
    for i, (token, value) in enumerate(items):
        y = box.top() + ROW_H * (i + 1)
        painter.setPen(INK)
        painter.drawText(QRectF(box.left(), y, text_w - 4, ROW_H), Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(repr(token)[1:-1], Qt.TextElideMode.ElideRight, text_w - 4))  # fmt: skip
        length = bar_w * abs(value) / scale
        painter.fillRect(QRectF(box.left() + text_w, y + 3, length, ROW_H - 6), colour)
        painter.setPen(MUTED)
        painter.drawText(QRectF(box.left() + text_w + length + 3, y, 44, ROW_H), Qt.AlignmentFlag.AlignVCenter,
                         f"{value:+.2f}")  # fmt: skip
    if not items:
        painter.setPen(MUTED)
        painter.drawText(QRectF(box.left(), box.top() + ROW_H, box.width(), ROW_H), Qt.AlignmentFlag.AlignVCenter,
                         "(no output vocabulary)")  # fmt: skip


def _paint_context(painter: QPainter, row, box: QRectF) -> None:
    font, bold = _font(12), _font(12, bold=True)
    value_w = 46.0
    x = box.left()
    limit = box.right() - value_w
    painter.setPen(MUTED)
    painter.setFont(font)
    if row.clipped_left:
        painter.drawText(QRectF(x, box.top(), 14, box.height()), Qt.AlignmentFlag.AlignVCenter, "…")
        x += 14
    for i, (token, shade) in enumerate(zip(row.tokens, row.shades)):
        f = bold if i == row.peak else font
        fm = QFontMetricsF(f)
        w = fm.horizontalAdvance(token) + 8
        if x + w > limit:
            painter.setPen(MUTED)
            painter.setFont(font)
            painter.drawText(QRectF(x, box.top(), 14, box.height()), Qt.AlignmentFlag.AlignVCenter, "…")
            break
        cell = QRectF(x, box.top() + 2, w, box.height() - 4)
        if shade > 0:
            fill = QColor(FIRE)
            fill.setAlphaF(0.15 + 0.85 * shade)
            painter.fillRect(cell, fill)
        if i == row.peak:
            painter.setPen(QPen(INK, 1.2))
            painter.drawRect(cell)
        painter.setPen(INK)
        painter.setFont(f)
        painter.drawText(cell, Qt.AlignmentFlag.AlignCenter, token)
        x += w + 2
    else:
        if row.clipped_right:
            painter.setPen(MUTED)
            painter.setFont(font)
            painter.drawText(QRectF(x, box.top(), 14, box.height()), Qt.AlignmentFlag.AlignVCenter, "…")
    painter.setPen(MUTED)
    painter.setFont(_font(10))
    peak = row.acts[row.peak] if row.acts else 0.0
    painter.drawText(QRectF(box.right() - value_w, box.top(), value_w, box.height()),
                     Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, f"{peak:.2f}")  # fmt: skip


def _painter_of(plot: CardPlot) -> Callable[[QPainter, bool], None]:
    return lambda painter, _vector: paint_card(painter, plot, WIDTH)


def card_bytes(plot: CardPlot, fmt: str, scale: float = 2.0) -> bytes:
    """The card as the contents of a .png, .svg or .pdf file."""
    application()  # measuring its text needs the process's Qt application
    size = QSizeF(WIDTH, card_height(plot, WIDTH))
    return encode(size, _painter_of(plot), fmt, scale, plot.title, plot.subtitle)


def save_card(plot: CardPlot, path: str | Path, scale: float = 2.0, overwrite: bool = True) -> Path:
    """Write the card to `path`; its extension (.png, .svg, .pdf) says the format."""
    path = Path(path)
    atomic_write_bytes(path, card_bytes(plot, path.suffix, scale), overwrite=overwrite)
    return path


def headless_card_writer(scale: float = 2.0):
    """save_card at `scale`, for the core's `scratchformer features card` (the "card" entry point,
    scratchformer/frontends.py): the process's Qt application is made by card_bytes."""
    return lambda plot, path: save_card(plot, path, scale)
