"""The current step's tensor as a heatmap, with batch item and head selectors for rank-3 and rank-4 tensors.

Heatmaps and their display images are kept per (step, batch item, head) of the current run, so stepping back
and forth redraws from memory. Token-id steps (kind "tokens") show the walkthrough's table of position · token
· id instead of a colour strip; their heatmap is still what the exporters draw.
"""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from scratchformer.plotdata import Heatmap, display_blocks
from scratchformer.plotdata.cells import map_cell
from scratchformer.plotdata.heatmap import token_columns
from scratchformer.plotdata.special import heatmap_classes

from ..widgets.cell_links import derive_cell, derive_from_map
from ..widgets.heatmap import HeatmapWidget, ImageCache, display_image
from ..widgets.steady_label import SteadyLabel
from ..widgets.token_table import TokenTable
from .base import View
from .step_diff_panel import StepDiffPanel

KEPT_HEATMAPS = 64  # per run; a Heatmap mostly views the trace's tensor, so this is little memory
TABLE_NOTE = (
    "Each id is the token's row in the embedding matrix: the next step looks those rows up. "
    "Hover a cell to read it; right-click to export."
)
TABLE_BATCH_ITEMS = 8  # a token table shows every batch item up to this many; beyond, the chosen one only


def map_key(step, batch: int, head: int) -> tuple[int, int, int]:
    """(step index, batch item, head) of the map the Step view shows: batch and head clamped to the step's own
    axes, 0 where it has none."""
    def clamp(dim: str | None, i: int) -> int:
        return min(i, step.shape[step.dims.index(dim)] - 1) if dim in step.dims else 0

    return step.index, clamp("batch", batch), clamp(step.head_dim, head)


class StepView(View):
    title = "Step"
    tooltip = "The tensor of the current step, one batch item and head at a time"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar_widget = QWidget()
        bar = QHBoxLayout(bar_widget)
        bar.setContentsMargins(0, 0, 0, 0)
        self.batch_label = QLabel("Batch item")
        self.batch_spin = QSpinBox()
        self.batch_spin.setToolTip("Which sentence (window) of the batch to show")
        self.head_label = QLabel("Head")
        self.head_spin = QSpinBox()
        self.head_spin.setToolTip("Which attention head to show")
        self.shape_label = SteadyLabel()  # a new shape every step: no layout of the window for it
        self.shape_label.setStyleSheet("color: #555;")
        for w in (self.batch_label, self.batch_spin, self.head_label, self.head_spin):
            bar.addWidget(w)
        # The head picker comes and goes as the steps go in and out of the heads: it keeps its room, so the shape
        # beside it stays put and no layout of the view (and repaint of the window around it) follows each time.
        for w in (self.head_label, self.head_spin):
            policy = w.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            w.setSizePolicy(policy)
        bar.addSpacing(12)
        bar.addWidget(self.shape_label, 1)
        # A fixed height: showing or hiding the selectors must not resize the plot (a resize re-lays out and
        # repaints every axis, twice).
        bar_widget.setFixedHeight(max(self.batch_spin.sizeHint().height(), self.shape_label.sizeHint().height()))
        layout.addWidget(bar_widget)
        self.heatmap = HeatmapWidget()
        self.heatmap.image_cache = ImageCache()
        self._heatmaps: OrderedDict[tuple[int, int, int], Heatmap] = OrderedDict()
        self._ahead: dict[tuple[int, int, int], Heatmap] = {}  # made by the prefetch thread, not yet shown
        self._cached_run = None
        self.connect_heatmap(self.heatmap)
        self.heatmap.menu_hook = self._head_menu
        self.heatmap.clicked.connect(self._cell_clicked)
        self._highlight: tuple[str, list[tuple[int, ...]]] | None = None  # (step, full indices) to outline
        layout.addWidget(self.heatmap, 1)
        self.table_host = QWidget()
        table_layout = QVBoxLayout(self.table_host)
        table_layout.setContentsMargins(0, 0, 0, 0)
        self.table_title = QLabel()
        self.table_title.setStyleSheet("font-weight: bold;")
        self.table_note = QLabel(TABLE_NOTE)
        self.table_note.setWordWrap(True)
        self.table_note.setStyleSheet("color: #555;")
        self.token_table = TokenTable()
        self.connect_heatmap(self.token_table)
        self.token_table.cell_clicked.connect(self._token_clicked)
        table_layout.addWidget(self.table_title)
        table_layout.addWidget(self.table_note)
        table_layout.addWidget(self.token_table, 1, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.table_host.setVisible(False)
        layout.addWidget(self.table_host, 1)
        # A, B and A − B while two models are compared (app/compare/model_diff.py)
        self.diff_panel = StepDiffPanel(self)
        self.diff_panel.setVisible(False)
        layout.addWidget(self.diff_panel, 1)
        self.batch_spin.valueChanged.connect(lambda v: self.main.set_batch(v - 1))
        self.head_spin.valueChanged.connect(lambda v: self.main.set_head(v - 1))
        self._shown: Heatmap | None = None

    def refresh(self) -> None:
        step = self.main.current_step()
        if step is None:
            self.heatmap.set_heatmap(None)
            self.shape_label.setText("")
            self._show_table(False)
            return
        batch, head = self.main.current_batch(), self.main.current_head()
        has_batch = "batch" in step.dims
        has_head = step.head_dim is not None  # the queries' heads, or the shared key/value heads (GQA)
        n_batch = step.shape[step.dims.index("batch")] if has_batch else 1
        n_head = step.n_heads
        head_word = "K/V head" if step.head_dim == "kv_head" else "Head"  # keys and values shared by query heads
        if self.head_label.text() != head_word:
            self.head_label.setText(head_word)
        for label, spin, on, n, value in (
            (self.batch_label, self.batch_spin, has_batch and n_batch > 1, n_batch, batch),
            (self.head_label, self.head_spin, has_head, n_head, head),
        ):
            # only what changed: a new range re-measures the spin box and re-lays out the window around it
            spin.blockSignals(True)
            if spin.maximum() != max(1, n) or spin.minimum() != 1:
                spin.setRange(1, max(1, n))
            if spin.value() != min(value, n - 1) + 1:
                spin.setValue(min(value, n - 1) + 1)
            spin.blockSignals(False)
            if spin.isVisibleTo(self) != on:
                spin.setVisible(on)
                label.setVisible(on)
        self.shape_label.setText(step.shape_text())
        key = map_key(step, batch, head)
        if self._show_diff(step, key):
            return
        previous = self._shown
        self._shown = self._heatmap(step, key)
        if step.kind == "tokens":  # ids are labels, not magnitudes: a table, not a colour strip
            pos_dim, columns = token_columns(self.main.current_trace(), step)
            if len(columns) > TABLE_BATCH_ITEMS:
                columns = [c for c in columns if c.batch == key[1]]
            self.token_table.set_columns(pos_dim, columns, chosen=key[1])
            self.token_table.highlight([c[:2] for c in self._highlighted(step)])
            self.table_title.setText(self._shown.title)
            self._show_table(True)
            return
        self._show_table(False)
        same_place = previous is not None and previous.shape == self._shown.shape
        self.heatmap.set_heatmap(self._shown, reset_view=not same_place, key=key)
        ids = self._shown.extra.get("vocab_ids")
        cells = [map_cell(step, c, ids) for c in self._highlighted(step)]
        self.heatmap.set_highlight([c for b, h, c in cells if c is not None and (b, h) == key[1:]])

    def _show_diff(self, step, key: tuple[int, int, int]) -> bool:
        """While two models are compared: the step's A, B and A − B maps instead of the one map (False: the
        comparison is off, or B has no step of this name, which the shape line then says)."""
        diff = getattr(getattr(self.main, "comparison", None), "diff", None)
        shown = diff is not None and self.diff_panel.show_step(diff, step, key[1], key[2], self._vocab_labels())
        if diff is not None and not shown:
            self.shape_label.setText(f"{step.shape_text()}  ·  B has no step of this name")
        if self.diff_panel.isVisibleTo(self) != shown:
            self.diff_panel.setVisible(shown)
            if shown:
                self.heatmap.setVisible(False)
                self.table_host.setVisible(False)
            else:
                self.heatmap.setVisible(True)
        return shown

    def _vocab_labels(self):
        result = self.main.current_result()
        return getattr(result, "vocab_labels", None)

    def highlight(self, step_name: str, cells: list[tuple[int, ...]]) -> None:
        """Outline these cells (full indices) when `step_name` is drawn: a derivation's inputs."""
        self._highlight = (step_name, list(cells))

    def _highlighted(self, step) -> list[tuple[int, ...]]:
        return self._highlight[1] if self._highlight is not None and self._highlight[0] == step.name else []

    def _cell_clicked(self, row: int, col: int) -> None:
        """A click on a cell derives it (How this number was made)."""
        derive_from_map(self.main, self._shown, row, col)

    def _token_clicked(self, batch: int, pos: int) -> None:
        step = self.main.current_step()
        if step is not None and step.kind == "tokens":
            derive_cell(self.main, step.name, (batch, pos))

    def _head_menu(self, menu, _cell) -> None:
        """Right-click on an attention step with a head axis: the shown head's what-if actions."""
        step = self.main.current_step()
        if step is not None and step.attention_type and "head" in step.dims:  # query heads: what-ifs act on them
            n = step.shape[step.dims.index("head")]
            self.main.add_head_menu(menu, step.sublayer, min(self.main.current_head(), n - 1))

    def _show_table(self, on: bool) -> None:
        if self.table_host.isVisibleTo(self) != on:
            self.table_host.setVisible(on)
            self.heatmap.setVisible(not on)

    def _heatmap(self, step, key: tuple[int, int, int]) -> Heatmap:
        """The heatmap of (step, batch, head), from memory when this run already showed it."""
        self._heatmap_cache_for(self.main.current_result())
        hm = self._heatmaps.get(key)
        if hm is None:
            hm = self._ahead.pop(key, None)  # made ahead by the prefetch thread
            if hm is None:
                hm = self.main.heatmap_for(step, key[1], key[2])
            self._heatmaps[key] = hm
            if len(self._heatmaps) > KEPT_HEATMAPS:
                self._heatmaps.popitem(last=False)
        else:
            self._heatmaps.move_to_end(key)
        return hm

    def ahead_work(self, steps: list, batch: int, head: int) -> list:
        """The next steps' maps and display images, made on the prefetch thread: holding Next then only hands a
        ready image to the plot. For the steps whose numbers are at hand now, drawn whole at the plot's present
        size (as a step of a new shape is); token steps are tables and are left out."""
        run = self.main.current_result()
        if run is None or not self.isVisible() or self.heatmap.image_cache is None:
            return []
        self._heatmap_cache_for(run)
        pixels = self.heatmap._plot_pixels()  # read here, on the UI thread
        work = []
        if len(self._ahead) > KEPT_HEATMAPS:  # made for steps the user never went to (a jump, another head)
            self._ahead = {}
        for step in steps:
            if step.kind == "tokens":
                continue
            key = map_key(step, batch, head)
            if not step.ready(key[1]):
                continue  # (a step still to be recomputed is looked at again by the next prefetch)
            made = self._heatmaps.get(key) or self._ahead.get(key)
            if made is not None and self.heatmap.image_cache.has((key, display_blocks(made.values.shape, pixels))):
                continue  # its map and its image at the plot's present size are at hand
            work.append(lambda step=step, key=key: self._make_ahead(run, step, key, pixels))
        return work

    def _make_ahead(self, run, step, key: tuple[int, int, int], pixels: tuple[float, float]) -> None:
        """(prefetch thread) One coming step's map and image, if its numbers are at hand and the run is current."""
        if run is not self._cached_run or not step.ready(key[1]):
            return  # a new run came, or the step waits for a recompute that this prefetch did not reach
        hm = self._heatmaps.get(key) or self._ahead.get(key)  # made before, its image for another size
        if hm is None:
            hm = run.heatmap_for(step, key[1], key[2])
        block = display_blocks(hm.values.shape, pixels)  # the whole map, as a step of a new shape is drawn
        self.heatmap.image_cache.put((key, block), display_image(hm, block, heatmap_classes(hm)))
        if key not in self._heatmaps:
            self._ahead[key] = hm  # one assignment: atomic for the UI thread, which takes it in _heatmap

    def _heatmap_cache_for(self, run) -> None:
        """Forget the maps and images of an earlier run."""
        if run is not self._cached_run:
            self._cached_run = run
            self._heatmaps.clear()
            self._ahead = {}
            self.heatmap.image_cache.clear()

    def current_heatmaps(self) -> list[Heatmap]:
        if self.diff_panel.isVisibleTo(self):
            return list(self.diff_panel.shown)
        return [self._shown] if self._shown is not None else []

    def is_busy(self) -> bool:
        return self.diff_panel.is_busy()

    def shutdown(self) -> None:
        self.diff_panel.shutdown()

    def view_title(self) -> str:
        if self.diff_panel.isVisibleTo(self) and self.diff_panel.shown:
            step = self.main.current_step()
            return f"A, B and A − B: {step.name if step is not None else ''}"
        return self._shown.title if self._shown is not None else "Step"
