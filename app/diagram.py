"""The architecture diagram, drawn from the model's config: encoder stack left, decoder stack right.

Every block shows the live shape of its output (its last step's tensor), the current block is highlighted,
and a click on a block emits `block_clicked(key)`. Keys are scratchformer.plotdata.block_key() values.
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

from .teaching import count_text

FILL = {
    "embedding": "#fbe3cf", "positional": "#f6d3d3", "attention": "#fde9b0", "add_norm": "#fff7d1",
    "ffn": "#d3e9f7", "norm": "#ececec", "linear": "#e6dcf5", "softmax": "#d6efd6",
}  # fmt: skip
HIGHLIGHT = QColor("#d62728")
BLOCK_W, COL_GAP, PAD = 168.0, 26.0, 10.0
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
        label_font.setPointSizeF(9.0)
        self.label = QGraphicsSimpleTextItem(block.label, self)
        self.label.setFont(label_font)
        self.label.setPos(rect.x() + 8, rect.y() + 3)
        shape_font = QFont("monospace")
        shape_font.setStyleHint(QFont.StyleHint.Monospace)
        shape_font.setPointSizeF(8.0)
        self.shape_text = QGraphicsSimpleTextItem("", self)
        self.shape_text.setFont(shape_font)
        self.shape_text.setBrush(QBrush(QColor("#555")))
        self.shape_text.setPos(rect.x() + 8, rect.y() + rect.height() - 17)
        self.enabled = True

    def set_shape(self, text: str, tooltip: str, params: str = "") -> None:
        self.shape_text.setText(text)
        lines = [self.block.label]
        if tooltip:
            lines.append(f"output: {tooltip}")
        if params:
            lines.append(f"parameters: {params}")
        if tooltip:
            lines.append("click to go here")
        self.setToolTip("\n".join(lines))

    def set_current(self, on: bool) -> None:
        self.setPen(QPen(HIGHLIGHT, 3.0) if on else QPen(QColor("#8a8a8a"), 1.0))
        base = QColor(FILL.get(self.block.kind, "#eee"))
        self.setBrush(QBrush(base.darker(112) if on else base))
        f = self.label.font()
        f.setBold(on)
        self.label.setFont(f)
        self.setZValue(2 if on else 1)


class ArchitectureDiagram(QGraphicsView):
    block_clicked = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        self.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.setBackgroundBrush(QBrush(QColor("#fafafa")))
        self.setMinimumWidth(170)  # the blocks scale down to fit; a 1024-pixel window needs the room
        self.items_by_key: dict[str, BlockItem] = {}
        self.current_key: str | None = None
        self._config_key = None

    def set_model(self, config) -> None:
        """Rebuild the blocks from a config (only when the architecture changed)."""
        blocks = architecture(config)
        key = tuple((b.key, b.label, b.kind) for b in blocks)  # the drawing depends on nothing else
        if key == self._config_key:
            return
        self._config_key = key
        scene = self.scene()
        scene.clear()
        self.items_by_key = {}
        self.current_key = None
        both = config.has_encoder and config.has_decoder
        x_of = {"encoder": 0.0, "decoder": BLOCK_W + 2 * PAD + COL_GAP if both else 0.0}
        y_of = {"encoder": 0.0, "decoder": 0.0}
        header_font = QFont()
        header_font.setPointSizeF(10.0)
        header_font.setBold(True)
        for column, title in (("encoder", "Encoder"), ("decoder", "Decoder")):
            if any(b.column == column for b in blocks):
                t = scene.addSimpleText(title, header_font)
                t.setPos(x_of[column] + PAD, 0)
                y_of[column] = 24.0
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
        layer_font.setPointSizeF(8.5)
        for (column, layer), rects in frames.items():
            r = rects[0].united(rects[-1]).adjusted(-PAD + 3, -18, PAD - 3, 6)
            frame = scene.addRect(r, QPen(QColor("#b0b0b0"), 1.0, Qt.PenStyle.DashLine), QBrush(Qt.BrushStyle.NoBrush))
            frame.setZValue(0)
            t = scene.addSimpleText(f"{column.capitalize()} layer {layer + 1}", layer_font)
            t.setBrush(QBrush(QColor("#777")))
            t.setPos(r.x() + 5, r.y() + 2)
        if both:  # the encoder output feeds every cross-attention block
            last_enc = [i for k, i in self.items_by_key.items() if i.block.column == "encoder"][-1]
            src = QPointF(last_enc.rect().right(), last_enc.rect().center().y())
            for k, item in self.items_by_key.items():
                if k.endswith("cross_attn"):
                    self._elbow(src, QPointF(item.rect().left(), item.rect().center().y()))
        self.setSceneRect(scene.itemsBoundingRect().adjusted(-6, -6, 6, 6))
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

    def _elbow(self, a: QPointF, b: QPointF) -> None:
        mid = a.x() + (b.x() - a.x()) / 2
        path = QPainterPath(a)
        path.lineTo(mid, a.y())
        path.lineTo(mid, b.y())
        path.lineTo(b)
        path.moveTo(b.x() - 6, b.y() - 4)
        path.lineTo(b)
        path.lineTo(b.x() - 6, b.y() + 4)
        item = QGraphicsPathItem(path)
        item.setPen(QPen(QColor("#c58b2a"), 1.2, Qt.PenStyle.DashLine))
        item.setToolTip("Keys and values of cross-attention come from the encoder output")
        item.setZValue(0.5)
        self.scene().addItem(item)

    def set_shapes(self, shapes: dict[str, tuple[str, str]], params: dict | None = None) -> None:
        """Block key → (short shape text, named shape) of its output; `params`: block key → ParamCount."""
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
        """Viewport position of a block's centre (for tests and keyboard users)."""
        return self.mapFromScene(self.items_by_key[key].sceneBoundingRect().center())

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
        """Shrink to the panel's width (never enlarge beyond 100 %); tall stacks scroll."""
        rect = self.sceneRect()
        if rect.width() <= 0:
            return
        # From the widget's width, not the viewport's: the viewport narrows when the vertical scroll bar appears,
        # and scaling to it would hide the bar again — an endless resize loop.
        inner = self.width() - 2 * self.frameWidth() - 4
        scale = min(1.0, inner / rect.width())
        if rect.height() * scale > self.height() - 2 * self.frameWidth():  # it will scroll: leave room for the bar
            scale = min(1.0, (inner - self.verticalScrollBar().sizeHint().width()) / rect.width())
        self.resetTransform()
        self.scale(scale, scale)
        if self.current_key in self.items_by_key:
            self.ensureVisible(self.items_by_key[self.current_key], 20, 40)
