"""All layers × heads of each attention type as thumbnail mosaics; a click goes to that layer's step and head.

Each type is one image (plotdata.overview_mosaic), not one plot per head: the paper model's 3 × 6 × 8 = 144
maps at 512 tokens draw as three block-averaged images. The mosaics sit in the grid (stacked, side by side or
two by two) that draws them largest in the space there is, chosen again on every resize.
"""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from scratchformer.plotdata import (
    ATTENTION_TITLES,
    Heatmap,
    attention_types,
    overview_cell,
    overview_mosaic,
    overview_tick_positions,
)

from ..widgets.heatmap import HeatmapWidget
from .base import View, placeholder
from .heads_view import _OnResize, grid_shape, place_in_grid

TILE = 48  # cells per thumbnail side at most (longer sequences are block-averaged)
MOSAIC_CHROME = (110.0, 50.0)  # pixels a mosaic loses to its title, axes and colour bar (width, height)


class OverviewView(View):
    title = "Overview"
    explains = "overview"
    tooltip = "Every layer and head at a glance; click a thumbnail to go there"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        hint = QLabel("Rows are layers, columns are heads; each thumbnail is one head's attention weights "
                      "(queries down, keys across). Click one to step there.")
        hint.setWordWrap(True)
        layout.addWidget(hint)
        self.empty = placeholder("Run a model with attention to see the overview.")
        layout.addWidget(self.empty)
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.grid_host, 1)
        self.widgets: dict[str, HeatmapWidget] = {}
        self._maps: dict[str, Heatmap] = {}
        self._key = None
        self._prepared: dict = {}  # (id(trace), batch) → mosaics made by preparation(), taken by refresh()
        self.grid_dims: tuple[int, int] = (0, 0)  # (rows, columns) of the mosaics now
        self._placed: list[str] = []
        self._resize_watch = _OnResize(self.grid_host, self._arrange)

    def _widget(self, kind: str) -> HeatmapWidget:
        w = self.widgets.get(kind)
        if w is None:
            w = HeatmapWidget(compact=True, square=True)
            w.clicked.connect(lambda r, c, k=kind: self._clicked(k, r, c))
            w.hovered.connect(self.main.show_hover)
            w.export_requested.connect(self.main.request_export)
            w.describe = lambda r, c, k=kind: self._describe(k, r, c)
            w.menu_hook = lambda menu, cell, k=kind: self._head_menu(k, menu, cell)
            self.grid.addWidget(w, 0, 0)  # parented now (never a window of its own); _arrange places it
            self.widgets[kind] = w
            self.grid_dims = (0, 0)
        return w

    def prebuild(self) -> list:
        """One mosaic per attention type of the run shown (all three before the first run), built hidden."""
        trace = self.main.current_trace()
        kinds = attention_types(trace) if trace is not None else list(ATTENTION_TITLES)

        def build(kind: str) -> None:
            if kind not in self.widgets:
                self._widget(kind).setVisible(kind in self._maps)

        builds = [lambda k=k: build(k) for k in kinds if k not in self.widgets]
        return builds + [self.build_one_colorbar] * len(builds) + super().prebuild()

    def _arrange(self) -> None:
        """Lay the mosaics out in the grid that draws them largest in the space they have now."""
        shown = [k for k in self.widgets if k in self._maps]
        if not shown:
            return
        aspects = [self._maps[k].shape[0] / max(1, self._maps[k].shape[1]) for k in shown]
        size = self.grid_host.size()
        dims = grid_shape(aspects, size.width(), size.height(), MOSAIC_CHROME)
        if (dims, shown) != (self.grid_dims, self._placed):
            self.grid_dims, self._placed = dims, shown
            for kind, w in self.widgets.items():
                if kind not in shown:
                    self.grid.removeWidget(w)
            place_in_grid(self.grid, [self.widgets[k] for k in shown], *dims)

    def _describe(self, kind: str, row: int, col: int) -> str:
        mosaic = self._maps.get(kind)
        cell = overview_cell(mosaic, row, col) if mosaic is not None else None
        if cell is None:
            return ""
        li, head = cell
        return f"{mosaic.title.split(':')[0]}, layer {mosaic.extra['layers'][li] + 1}, head {head + 1}: click to open"

    def _head_menu(self, kind: str, menu, cell) -> None:
        """Right-click on a thumbnail: that layer's head can be ablated from here
        (app/panels/interventions_panel.py)."""
        mosaic = self._maps.get(kind)
        found = overview_cell(mosaic, *cell) if mosaic is not None and cell is not None else None
        if found is not None:
            li, head = found
            self.main.add_head_menu(menu, mosaic.extra["steps"][li].rpartition(".")[0], head)

    def _clicked(self, kind: str, row: int, col: int) -> None:
        mosaic = self._maps.get(kind)
        cell = overview_cell(mosaic, row, col) if mosaic is not None and row >= 0 else None
        if cell is not None:
            li, head = cell
            self.main.go_to_step(mosaic.extra["steps"][li], head=head)

    def preparation(self, trace, batch: int) -> list:
        """The window runs this off the UI thread before refresh(): the mosaics of every attention map of one
        batch item (a long run recomputes each sublayer for them; they keep only the shrunk maps)."""
        key = (id(trace), batch)
        if key == self._key or key in self._prepared or all(s.ready(batch) for s in trace.attention_steps()):
            return []  # drawn already, prepared already, or nothing to recompute: refresh() reads held maps

        def prepare() -> None:
            maps = {k: m for k in attention_types(trace) if (m := overview_mosaic(trace, k, batch, TILE)) is not None}
            self._prepared = {key: maps}

        return [prepare]

    def refresh(self) -> None:
        trace = self.main.current_trace()
        batch = self.main.current_batch()
        kinds = attention_types(trace) if trace is not None else []
        self.empty.setVisible(not kinds)
        key = (id(trace), batch)
        if key != self._key:
            self._key = key
            prepared = self._prepared.pop(key, None)
            if prepared is None:  # the maps are all held (or the window did not ask for a preparation)
                prepared = {k: m for k in kinds if (m := overview_mosaic(trace, k, batch, TILE)) is not None}
            self._maps = prepared
            for kind, w in self.widgets.items():
                w.setVisible(kind in self._maps)
            for kind, mosaic in self._maps.items():
                w = self._widget(kind)
                w.setVisible(True)
                rows, cols = overview_tick_positions(mosaic)
                w.custom_ticks = (list(zip(rows, mosaic.row_labels)), [(c, f"H{i + 1}") for i, c in enumerate(cols)])
                # values only where a tile cell is one attention weight, not the mean of a block of them
                w.show_values = not _averaged(trace, mosaic)
                w.set_heatmap(mosaic)
            self._arrange()
        step = self.main.current_step()
        for kind, w in self.widgets.items():
            here = step is not None and step.attention_type == kind
            w.title_label.setStyleSheet("color: #d62728;" if here else "")

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._maps.values())

    def view_title(self) -> str:
        return "Attention overview: layers × heads"


def _averaged(trace, mosaic: Heatmap) -> bool:
    """True when the mosaic's tiles are block-averaged (longer sequences than TILE)."""
    step = trace.find(mosaic.extra["steps"][0])
    return step is None or tuple(step.shape[-2:]) != (mosaic.extra["tile_rows"], mosaic.extra["tile_cols"])
