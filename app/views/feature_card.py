"""The Features view's card: a widget that paints a CardPlot with the same painter the PNG, SVG and PDF exports use
(app/export/card_render.py), so the file saved is the picture on screen. Right-click exports it."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QMenu, QScrollArea, QSizePolicy, QWidget

from scratchformer.plotdata.feature_cards import CardPlot

from ..export.card_render import MIN_WIDTH, WIDTH, card_height, paint_card


class CardWidget(QWidget):
    """A feature card as wide as it is given (`fit`), at least MIN_WIDTH; empty until `show_card`."""

    export_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.plot: CardPlot | None = None
        self._height = 0
        self._width = WIDTH
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)

    def show_card(self, plot: CardPlot | None) -> None:
        self.plot = plot
        self.fit(self._width)

    def fit(self, width: float) -> None:
        """Lay the card out `width` pixels wide (the scroll area's viewport), its height following."""
        self._width = max(MIN_WIDTH, float(width))
        self._height = int(card_height(self.plot, self._width)) + 1 if self.plot is not None else 0
        self.setFixedSize(self.sizeHint())
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        return QSize(int(self._width), self._height) if self.plot is not None else QSize(0, 0)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if self.plot is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        try:
            paint_card(painter, self.plot, self._width)
        finally:
            painter.end()

    def _menu(self, pos) -> None:
        if self.plot is None:
            return
        menu = QMenu(self)
        menu.addAction("Export card (PNG, SVG, PDF)…", self.export_requested.emit)
        menu.popup(self.mapToGlobal(pos))


class CardScroll(QScrollArea):
    """The card in a scroll area that lays it out as wide as the area (scrolling only down, when it is tall)."""

    def __init__(self, card: CardWidget) -> None:
        super().__init__()
        self.card = card
        self.setWidget(card)
        self.setWidgetResizable(False)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self.card.fit(self.viewport().width())
