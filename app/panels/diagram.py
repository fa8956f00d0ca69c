"""The architecture diagram, drawn from the model's config: encoder stack left, decoder stack right.

Every block shows the live shape of its output (its last step's tensor), the current block is highlighted,
and a click on a block emits `block_clicked(key)`. Keys are scratchformer.plotdata.block_key() values.

The text is drawn at its point size (app.widgets.fonts.MIN_POINT_SIZE at least), never scaled down: a panel too narrow
for the two stacks side by side gets them one above the other (the decoder below the encoder) and scrolls.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
)

from scratchformer.plotdata import Block, architecture

from ..widgets.fonts import MIN_POINT_SIZE
from .teaching import count_text

FILL = {
    "embedding": "#fbe3cf", "positional": "#f6d3d3", "attention": "#fde9b0", "add_norm": "#fff7d1",
    "ffn": "#d3e9f7", "norm": "#ececec", "linear": "#e6dcf5", "softmax": "#d6efd6",
}  # fmt: skip
HIGHLIGHT = QColor("#d62728")
BLOCK_W, COL_GAP, PAD = 152.0, 26.0, 10.0
RAIL = 12.0  # one column: room right of the blocks for the encoder output's line to the cross-attention blocks
STACK_GAP = 18.0  # one column: between the encoder stack and the decoder's title
LABEL_PT, SHAPE_PT, HEADER_PT, LAYER_PT = 9.0, MIN_POINT_SIZE, 10.0, 8.5
HEIGHT = {"add_norm": 34.0}
DEFAULT_H = 42.0


class BlockItem(QGraphicsRectItem):
    def __init__(self, block: Block, rect: QRectF) -> None:
        super().__init__(rect)
        self.block = block
        self.setBrush(QBrush(QColor(FILL.get(block.kind, "#eee"))))
        self.setPen(QPen(QColor("#8a8a8a"), 1.0))
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAcceptHoverEvents(True)
        label_font = QFont()
        label_font.setPointSizeF(LABEL_PT)
        self.label = QGraphicsSimpleTextItem(block.label, self)
        self.label.setFont(label_font)
        self.label.setPos(rect.x() + 8, rect.y() + 3)
        shape_font = QFont("monospace")
        shape_font.setStyleHint(QFont.StyleHint.Monospace)
        shape_font.setPointSizeF(SHAPE_PT)
        self.shape_text = QGraphicsSimpleTextItem("", self)
        self.shape_text.setFont(shape_font)
        self.shape_text.setBrush(QBrush(QColor("#555")))
        self.shape_text.setPos(rect.x() + 8, rect.y() + rect.height() - 17)
        self.enabled = True
        self.difference: tuple[float, str] | None = None  # (shade in [0, 1], tooltip line) while comparing

    def fill(self) -> QColor:
        """The block's kind colour, or while two models are compared, its difference's shade."""
        if self.difference is not None:  # a negative shade: no step both models compute
            return difference_colour(self.difference[0]) if self.difference[0] >= 0 else QColor("#e0e0e0")
        return QColor(FILL.get(self.block.kind, "#eee"))

    def set_difference(self, difference: tuple[float, str] | None) -> None:
        self.difference = difference
        self.set_current(self.pen().width() > 1.5)
        lines = [line for line in self.toolTip().split("\n") if not line.startswith("A vs B")]
        if difference is not None:
            lines.insert(1, difference[1])
        self.setToolTip("\n".join(lines))

    def set_shape(self, text: str, tooltip: str, params: str = "") -> None:
        self.shape_text.setText(text)
        lines = [self.block.label]
        if tooltip:
            lines.append(f"output: {tooltip}")
        if params:
            lines.append(f"parameters: {params}")
        if tooltip:
            lines.append("click to go here")
        if self.difference is not None:
            lines.insert(1, self.difference[1])
        self.setToolTip("\n".join(lines))

    def set_current(self, on: bool) -> None:
        mark = HIGHLIGHT if self.difference is None else QColor("#222")  # red on a red shade would not show
        self.setPen(QPen(mark, 3.0) if on else QPen(QColor("#8a8a8a"), 1.0))
        base = self.fill()
        self.setBrush(QBrush(base.darker(112) if on else base))
        f = self.label.font()
        f.setBold(on)
        self.label.setFont(f)
        self.setZValue(2 if on else 1)


DIFF_COLOURS = ("#eef6e9", "#fee8c8", "#fdbb84", "#f07b5a")  # shade 0 (within tolerance) … 1 (differs fully)


def difference_colour(shade: float) -> QColor:
    """A block's colour while two models are compared: pale green where they agree, through orange to red."""
    shade = min(1.0, max(0.0, shade))
    at = shade * (len(DIFF_COLOURS) - 1)
    i = min(int(at), len(DIFF_COLOURS) - 2)
    a, b, t = QColor(DIFF_COLOURS[i]), QColor(DIFF_COLOURS[i + 1]), at - i
    return QColor.fromRgbF(*(a.getRgbF()[k] * (1 - t) + b.getRgbF()[k] * t for k in range(3)))


class ArchitectureDiagram(QGraphicsView):
    block_clicked = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        self.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.setBackgroundBrush(QBrush(QColor("#fafafa")))
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # one column fits the minimum
        self.setMinimumWidth(self.one_column_width())
        self.items_by_key: dict[str, BlockItem] = {}
        self.current_key: str | None = None
        self._config_key = None
        self._blocks: list[Block] = []
        self._both = False
        self.columns = 2  # the stacks side by side (2) or one above the other (1)
        self._shapes: tuple[dict, dict | None] = ({}, None)
        self._differences: dict[str, tuple[float, str]] | None = None  # block key → (shade, tooltip line)

    def set_differences(self, differences: dict[str, tuple[float, str]] | None) -> None:
        """While two models are compared: block key → (shade in [0, 1], a tooltip line); blocks with no step both
        compute are greyed. None: the usual colours again."""
        self._differences = differences
        for key, item in self.items_by_key.items():
            found = None if differences is None else differences.get(key, (-1.0, "A vs B: no step in common"))
            item.set_difference(found)

    def difference_fill(self, key: str) -> QColor:
        """The colour a block is filled with now (for tests)."""
        return self.items_by_key[key].brush().color()

    def one_column_width(self) -> int:
        """The width that shows one stack at full size, with the vertical scroll bar and the frame."""
        return int(BLOCK_W + 2 * PAD + RAIL + 4 + self.verticalScrollBar().sizeHint().width() + 2 * self.frameWidth())

    def two_column_width(self) -> int:
        return int(self.one_column_width() + BLOCK_W + 2 * PAD + COL_GAP - RAIL)

    def set_model(self, config) -> None:
        """Rebuild the blocks from a config (only when the architecture changed)."""
        blocks = architecture(config)
        key = tuple((b.key, b.label, b.kind) for b in blocks)  # the drawing depends on nothing else
        if key == self._config_key:
            return
        self._config_key = key
        self._blocks = blocks
        self._both = config.has_encoder and config.has_decoder
        self._shapes = ({}, None)
        self.current_key = None
        self.columns = self._columns_for_width()
        self._build()

    def _columns_for_width(self) -> int:
        return 2 if not self._both or self.width() >= self.two_column_width() else 1

    def _build(self) -> None:
        """Draw the blocks in self.columns columns, keeping the shapes and the current block."""
        blocks, both = self._blocks, self._both
        current = self.current_key
        scene = self.scene()
        scene.clear()
        self.items_by_key = {}
        self.current_key = None
        stacked = both and self.columns == 1
        x_of = {"encoder": 0.0, "decoder": BLOCK_W + 2 * PAD + COL_GAP if both and not stacked else 0.0}
        y_of = {"encoder": 0.0, "decoder": 0.0}
        header_font = QFont()
        header_font.setPointSizeF(HEADER_PT)
        header_font.setBold(True)
        headers = {}
        for column, title in (("encoder", "Encoder"), ("decoder", "Decoder")):
            if any(b.column == column for b in blocks):
                headers[column] = t = scene.addSimpleText(title, header_font)
                t.setPos(x_of[column] + PAD, 0)
                y_of[column] = 24.0
        if stacked:  # the decoder starts below the encoder's last block
            enc_height = sum(HEIGHT.get(b.kind, DEFAULT_H) + 12.0 for b in blocks if b.column == "encoder")
            enc_layers = {b.layer for b in blocks if b.column == "encoder" and b.layer is not None}
            top = 24.0 + enc_height + 30.0 * len(enc_layers) + STACK_GAP
            headers["decoder"].setPos(PAD, top)
            y_of["decoder"] = top + 24.0
        frames: dict[tuple[str, int], list[QRectF]] = {}
        prev: dict[str, BlockItem] = {}
        for b in blocks:
            x, y = x_of[b.column], y_of[b.column]
            h = HEIGHT.get(b.kind, DEFAULT_H)
            if b.layer is not None and (b.column, b.layer) not in frames:
                y += 20.0  # room for the layer frame's title
                frames[(b.column, b.layer)] = []
            rect = QRectF(x + PAD, y, BLOCK_W, h)
            item = BlockItem(b, rect)
            scene.addItem(item)
            self.items_by_key[b.key] = item
            if b.layer is not None:
                frames[(b.column, b.layer)].append(rect)
            if b.column in prev:
                self._arrow(prev[b.column].rect().center().x(), prev[b.column].rect().bottom(), rect.top())
            prev[b.column] = item
            y += h + 12.0
            if b.layer is not None and b.key.endswith(("add_norm2", "add_norm3")) and self._last_in_layer(b, blocks):
                y += 10.0
            y_of[b.column] = y
        layer_font = QFont()
        layer_font.setPointSizeF(LAYER_PT)
        for (column, layer), rects in frames.items():
            r = rects[0].united(rects[-1]).adjusted(-PAD + 3, -18, PAD - 3, 6)
            frame = scene.addRect(r, QPen(QColor("#b0b0b0"), 1.0, Qt.PenStyle.DashLine), QBrush(Qt.BrushStyle.NoBrush))
            frame.setZValue(0)
            t = scene.addSimpleText(f"{column.capitalize()} layer {layer + 1}", layer_font)
            t.setBrush(QBrush(QColor("#777")))
            t.setPos(r.x() + 5, r.y() + 2)
            t.setZValue(0.9)  # over the arrow into the layer's first block, on a patch of the background
            patch = scene.addRect(t.sceneBoundingRect().adjusted(-2, 0, 2, 0), QPen(Qt.PenStyle.NoPen),
                                  self.backgroundBrush())
            patch.setZValue(0.8)
        if both:  # the encoder output feeds every cross-attention block
            last_enc = [i for k, i in self.items_by_key.items() if i.block.column == "encoder"][-1]
            src = QPointF(last_enc.rect().right(), last_enc.rect().center().y())
            for k, item in self.items_by_key.items():
                if k.endswith("cross_attn"):
                    if stacked:  # down a rail right of the column, into the block's right side
                        self._elbow(src, QPointF(item.rect().right(), item.rect().center().y()),
                                    rail=item.rect().right() + RAIL - 2)
                    else:
                        self._elbow(src, QPointF(item.rect().left(), item.rect().center().y()))
        self.setSceneRect(scene.itemsBoundingRect().adjusted(-6, -6, 6, 6))
        shapes, params = self._shapes
        if shapes:
            self.set_shapes(shapes, params)
        if current is not None:
            self.set_current(current)
        if self._differences is not None:
            self.set_differences(self._differences)
        self._fit()

    @staticmethod
    def _last_in_layer(b: Block, blocks: list[Block]) -> bool:
        same = [x for x in blocks if x.column == b.column and x.layer == b.layer]
        return same[-1] is b

    def _arrow(self, x: float, y0: float, y1: float) -> None:
        path = QPainterPath(QPointF(x, y0))
        path.lineTo(x, y1)
        path.moveTo(x - 4, y1 - 6)
        path.lineTo(x, y1)
        path.lineTo(x + 4, y1 - 6)
        item = QGraphicsPathItem(path)
        item.setPen(QPen(QColor("#888"), 1.2))
        self.scene().addItem(item)

    def _elbow(self, a: QPointF, b: QPointF, rail: float | None = None) -> None:
        """A dashed line from a to b by a vertical stretch at x = rail (halfway by default), arrowhead at b."""
        mid = a.x() + (b.x() - a.x()) / 2 if rail is None else rail
        path = QPainterPath(a)
        path.lineTo(mid, a.y())
        path.lineTo(mid, b.y())
        path.lineTo(b)
        back = 6 if mid < b.x() else -6  # the arrowhead points the way the last stretch goes
        path.moveTo(b.x() - back, b.y() - 4)
        path.lineTo(b)
        path.lineTo(b.x() - back, b.y() + 4)
        item = QGraphicsPathItem(path)
        item.setPen(QPen(QColor("#c58b2a"), 1.2, Qt.PenStyle.DashLine))
        item.setToolTip("Keys and values of cross-attention come from the encoder output")
        item.setZValue(0.5)
        self.scene().addItem(item)

    def set_shapes(self, shapes: dict[str, tuple[str, str]], params: dict | None = None) -> None:
        """Block key → (short shape text, named shape) of its output; `params`: block key → ParamCount."""
        self._shapes = (shapes, params)  # drawn again if the layout changes
        for key, item in self.items_by_key.items():
            text, named = shapes.get(key, ("", ""))
            pc = (params or {}).get(key)
            item.set_shape(text, named, count_text(pc) if pc is not None else "")
            item.setOpacity(1.0 if text else 0.45)

    def set_current(self, key: str | None) -> None:
        if key == self.current_key:
            return
        if self.current_key in self.items_by_key:
            self.items_by_key[self.current_key].set_current(False)
        self.current_key = key
        item = self.items_by_key.get(key) if key else None
        if item is not None:
            item.set_current(True)
            self.ensureVisible(item, 20, 40)

    def block_center(self, key: str):
        """Viewport position of a block's centre, scrolled into view first (for tests and keyboard users)."""
        item = self.items_by_key[key]
        self.ensureVisible(item, 20, 40)
        return self.mapFromScene(item.sceneBoundingRect().center())

    def smallest_point_size(self) -> float:
        """The smallest text on screen, in points at the view's scale (MIN_POINT_SIZE or more)."""
        scale = self.transform().m11()
        sizes = [item.font().pointSizeF() * scale for item in self.scene().items()
                 if isinstance(item, QGraphicsSimpleTextItem) and item.text()]
        return min(sizes, default=float("inf"))

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if event.button() == Qt.MouseButton.LeftButton:
            for item in self.items(event.position().toPoint()):
                while item is not None and not isinstance(item, BlockItem):
                    item = item.parentItem()
                if isinstance(item, BlockItem):
                    self.block_clicked.emit(item.block.key)
                    return
        super().mousePressEvent(event)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """Full size always (never scaled down: the text stays readable); a narrow panel stacks the decoder below
        the encoder, and a tall drawing scrolls, following the current block."""
        if self._blocks and self._columns_for_width() != self.columns:
            self.columns = self._columns_for_width()
            self._build()
            return
        self.resetTransform()
        if self.current_key in self.items_by_key:
            self.ensureVisible(self.items_by_key[self.current_key], 20, 40)
