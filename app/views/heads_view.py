"""Every head of an attention sublayer side by side (shared colour levels); click one to enlarge it.

The thumbnails' grid (rows × columns) is chosen from the space they have and the maps' shape, again on every
resize: two heads in a tall panel are stacked, eight in a wide one make two rows of four (grid_shape).
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from scratchformer.plotdata import Heatmap, heads_grid
from scratchformer.plotdata.heatmap import kv_sharing_text

from ..widgets.cell_links import derive_from_map
from ..widgets.heatmap import HeatmapWidget
from ..work.warmup import step_work
from .base import View, placeholder


def heads_step(trace, step):
    """The step whose heads to show: the current one if it has heads, else its sublayer's attention weights,
    else the nearest attention weights before it (or the first in the model)."""
    if step is None:
        return None
    if "head" in step.dims:
        return step
    if step.attention_type:
        found = trace.find(f"{step.sublayer}.weights")
        if found is not None:
            return found
    weights = trace.attention_steps()
    before = [s for s in weights if s.index <= step.index]
    return before[-1] if before else (weights[0] if weights else None)


THUMB_CHROME = (8.0, 26.0)  # pixels a thumbnail loses to its frame and title (width, height)


def grid_shape(aspects: list[float], width: float, height: float, chrome: tuple[float, float] = (0.0, 0.0)):
    """(rows, columns) of the grid that draws tiles of these aspect ratios (height / width) largest in a
    width × height area, each cell losing `chrome` (w, h) to titles and axes. Ties go to fewer empty cells."""
    n = max(1, len(aspects))
    best, best_key = (1, n), None
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        if rows > 1 and (rows - 1) * cols >= n:
            continue  # an empty last row
        cell_w = max(1.0, width / cols - chrome[0])
        cell_h = max(1.0, height / rows - chrome[1])
        area = 0.0
        for a in aspects or [1.0]:
            tile_w = min(cell_w, cell_h / max(a, 1e-6))  # the tile fits its cell, keeping its shape
            area += tile_w * tile_w * a
        key = (round(area, 3), -(rows * cols - n))
        if best_key is None or key > best_key:
            best, best_key = (rows, cols), key
    return best


def place_in_grid(grid: QGridLayout, widgets: list[QWidget], rows: int, cols: int) -> None:
    """Put widgets row by row into a rows × cols grid, every used row and column stretching equally."""
    for w in widgets:
        grid.removeWidget(w)
    for i, w in enumerate(widgets):
        grid.addWidget(w, i // cols, i % cols)
    for r in range(max(grid.rowCount(), rows)):
        grid.setRowStretch(r, 1 if r < rows else 0)
    for c in range(max(grid.columnCount(), cols)):
        grid.setColumnStretch(c, 1 if c < cols else 0)


class _OnResize(QObject):
    """Calls back when the watched widget is resized."""

    def __init__(self, watched: QWidget, callback) -> None:
        super().__init__(watched)
        self.callback = callback
        watched.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt name)
        if event.type() == QEvent.Type.Resize:
            self.callback()
        return False


class HeadsView(View):
    title = "Heads"
    tooltip = "All heads of the attention sublayer; click a head to enlarge it"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.empty = placeholder("Run a model with attention to see its heads.")
        layout.addWidget(self.empty)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(4)
        self.splitter.addWidget(self.grid_host)
        self.large = HeatmapWidget()
        self.connect_heatmap(self.large)
        self.large.menu_hook = lambda menu, _cell: self._head_menu(menu, self.main.current_head())
        self.large.clicked.connect(lambda r, c: derive_from_map(self.main, self.large.heatmap, r, c))
        self.splitter.addWidget(self.large)
        self.splitter.setSizes([480, 520])
        layout.addWidget(self.splitter, 1)
        self.thumbs: list[HeatmapWidget] = []  # in the grid, head h at h
        self._spare: list[HeatmapWidget] = []  # built, hidden, not in the grid
        self._maps: list[Heatmap] = []
        self._step = None
        self.grid_dims: tuple[int, int] = (0, 0)  # (rows, columns) of the thumbnails now
        self._resize_watch = _OnResize(self.grid_host, self._arrange)

    def _ensure_thumbs(self, n: int) -> None:
        """n thumbnails in the grid: spare ones (built ahead, or left by a model with more heads) first."""
        if len(self.thumbs) == n:
            return
        for t in self.thumbs[n:]:
            self.grid.removeWidget(t)
            t.hide()
        self._spare = self.thumbs[n:] + self._spare
        self.thumbs = self.thumbs[:n]
        while len(self.thumbs) < n:
            self.thumbs.append(self._spare.pop(0) if self._spare else self._new_thumb())
        for t in self.thumbs:
            t.show()
        self.grid_dims = (0, 0)
        self._arrange()

    def _new_thumb(self) -> HeatmapWidget:
        """A thumbnail that, once in the grid as head h, reports clicks, hovers and right-clicks as head h."""
        w = HeatmapWidget(self.grid_host, compact=True, ticks=False, colorbar=False, square=True)
        w.hide()
        w.clicked.connect(lambda _r, _c, w=w: self.main.set_head(self.thumbs.index(w)))
        w.hovered.connect(self.main.show_hover)
        w.export_requested.connect(self.main.request_export)
        w.menu_hook = lambda menu, _cell, w=w: self._head_menu(menu, self.thumbs.index(w))
        return w

    def prebuild(self) -> list:
        """One thumbnail per head of the model shown (8, the paper's, before the first run)."""
        bundle = self.main.current_bundle()
        wanted = bundle.config.n_heads if bundle is not None else 8

        def build() -> None:
            if len(self.thumbs) + len(self._spare) < wanted:
                self._spare.append(self._new_thumb())

        return [build] * max(0, wanted - len(self.thumbs) - len(self._spare)) + super().prebuild()

    def _arrange(self) -> None:
        """Lay the thumbnails out in the grid that draws them largest in the space they have now."""
        if not self.thumbs:
            return
        rows, cols = self._maps[0].shape if self._maps else (1, 1)
        aspects = [rows / max(cols, 1)] * len(self.thumbs)
        size = self.grid_host.size()
        dims = grid_shape(aspects, size.width(), size.height(), THUMB_CHROME)
        if dims != self.grid_dims:
            self.grid_dims = dims
            place_in_grid(self.grid, self.thumbs, *dims)

    def preparation(self, trace, batch: int) -> list:
        """Recomputed off the UI thread before this tab draws: the attention step whose heads it shows (not
        always the current step)."""
        step = heads_step(trace, self.main.current_step())
        return step_work([step], batch) if step is not None else []

    def refresh(self) -> None:
        trace = self.main.current_trace()
        step = heads_step(trace, self.main.current_step()) if trace is not None else None
        self.empty.setVisible(step is None)
        self.splitter.setVisible(step is not None)
        if step is None:
            self.caption.setText("")
            self._maps = []
            return
        batch, head = self.main.current_batch(), self.main.current_head()
        if step is not self._step or not self._maps or self._batch != batch:
            shape_before = self._maps[0].shape if self._maps else None
            self._maps = heads_grid(trace, step, batch)
            self._step, self._batch = step, batch
            if self._maps and self._maps[0].shape != shape_before:
                self.grid_dims = (0, 0)  # another shape may want another grid
            self._ensure_thumbs(len(self._maps))
            self._arrange()
            for w, m in zip(self.thumbs, self._maps):
                w.setToolTip(f"{m.title}: click to enlarge")
                w.set_heatmap(m)
        head = min(head, len(self._maps) - 1)
        for h, w in enumerate(self.thumbs):
            w.setStyleSheet("border: 2px solid #d62728;" if h == head else "")
            w.title_label.setStyleSheet("color: #d62728;" if h == head else "")
        large = self.main.heatmap_for(step, batch, head)
        large.levels = self._maps[head].levels  # the same scale as the thumbnails
        self.large.set_heatmap(large)
        note = "" if step is self.main.current_step() else "  (nearest attention step to the current one)"
        bundle = self.main.current_bundle()
        shared = kv_sharing_text(trace, step.sublayer, bundle.config.d_head if bundle is not None else None)
        self.caption.setText(f"{step.title} — {step.name}, {len(self._maps)} heads, shared colour scale{note}"
                             + (f"\n{shared}" if shared else ""))

    def _head_menu(self, menu, head: int) -> None:
        """Right-click on a head: ablate it, keep it alone, or undo (app/panels/interventions_panel.py)."""
        step = self._step
        if step is not None and step.attention_type and self._maps:
            self.main.add_head_menu(menu, step.sublayer, min(head, len(self._maps) - 1))

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._maps)

    def view_title(self) -> str:
        return f"All heads: {self._step.name}" if self._step is not None else "Heads"
