"""Masks of every attention type (causal, padding, combined) and one head's scores before and after softmax."""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from scratchformer.plotdata import (
    ATTENTION_TITLES,
    MASK,
    Heatmap,
    attention_types,
    before_after_softmax,
    mask_heatmaps,
    mask_step,
)
from scratchformer.plotdata.masks import softmax_steps
from scratchformer.recording.trace import breadcrumb

from ..widgets.heatmap import HeatmapWidget, masked_swatch_css
from ..work.warmup import step_work
from .base import View, placeholder
from .heads_view import heads_step


class MasksView(View):
    title = "Masks"
    explains = "masks"
    tooltip = "What each attention type may not look at, and what the mask does to the softmax"

    def __init__(self, window) -> None:
        super().__init__(window)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        legend = QLabel(
            f"<span style='{masked_swatch_css()}'>−∞</span> blocked: the softmax gives these cells weight 0. "
            "<span style='background:#e3eef9; padding: 0 4px;'>0</span> may attend."
        )
        legend.setWordWrap(True)  # a narrow window wraps the lines instead of widening the window
        outer.addWidget(legend)
        pad_row = QHBoxLayout()
        self.pad_note = QLabel("This run has no padding, so the padding masks block nothing.")
        self.pad_note.setStyleSheet("color: #555;")
        self.pad_note.setWordWrap(True)
        self.pad_button = QPushButton("Build a padded batch from this sentence")
        self.pad_button.setToolTip("Run the sentence and two shorter versions of it as one batch, padded at the end "
                                   "to the same length: the padding masks then block the <pad> columns")
        self.pad_button.clicked.connect(lambda: self.main.run(padded=True))
        pad_row.addWidget(self.pad_note, 1)
        pad_row.addWidget(self.pad_button)
        self.pad_bar = QWidget()
        self.pad_bar.setLayout(pad_row)
        pad_row.setContentsMargins(0, 0, 0, 0)
        self.pad_bar.setVisible(False)
        outer.addWidget(self.pad_bar)
        self.empty = placeholder("Run a model to see its masks.")
        outer.addWidget(self.empty)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        self.host = QWidget()
        self.grid = QGridLayout(self.host)
        self.grid.setSpacing(8)
        scroll.setWidget(self.host)
        outer.addWidget(scroll, 1)
        self.widgets: list[HeatmapWidget] = []
        self._spare: dict[bool, list[HeatmapWidget]] = {False: [], True: []}  # by colour bar: built, not shown
        self.headers: list[QLabel] = []
        self._maps: list[Heatmap] = []
        self._signature: list = []

    def _build(self, rows: list[tuple[str, list[Heatmap]]]) -> None:
        """(Re)create the grid only when its shape changes; otherwise just redraw the heatmaps."""
        signature = [[m.colormap == MASK for m in maps] for _, maps in rows]
        if signature != self._signature:
            for w in self.headers:
                self.grid.removeWidget(w)
                w.deleteLater()
            for w in self.widgets:  # kept for the next grid: building a plot is the slow part
                self.grid.removeWidget(w)
                w.hide()
                self._spare[w.has_colorbar].append(w)
            self.widgets, self.headers = [], []
            for r, (_, maps) in enumerate(rows):
                label = QLabel()
                self.grid.addWidget(label, 2 * r, 0, 1, 4)
                self.headers.append(label)
                for col, m in enumerate(maps):
                    spare = self._spare[m.colormap != MASK]
                    w = spare.pop(0) if spare else self._new_widget(m.colormap != MASK)
                    self.grid.addWidget(w, 2 * r + 1, col)
                    w.show()
                    self.widgets.append(w)
            self._signature = signature
        flat = [m for _, maps in rows for m in maps]
        for label, (header, _) in zip(self.headers, rows):
            label.setText(f"<b>{header}</b>")
        for w, m in zip(self.widgets, flat):
            w.set_heatmap(m)

    def _new_widget(self, colorbar: bool) -> HeatmapWidget:
        w = HeatmapWidget(self.host, compact=True, colorbar=colorbar)  # masks (0 or −∞) need no colour bar
        w.hide()
        w.setMinimumSize(220, 220)
        self.connect_heatmap(w)
        return w

    def prebuild(self) -> list:
        """The grid's maps: each attention type's masks (at most three) and the softmax's before and after."""
        trace = self.main.current_trace()
        n_types = len(attention_types(trace)) if trace is not None else 3
        wanted = {False: 3 * n_types, True: 2}  # colour bar or not → how many

        def build(colorbar: bool) -> None:
            shown = sum(w.has_colorbar == colorbar for w in self.widgets)
            if shown + len(self._spare[colorbar]) < wanted[colorbar]:
                self._spare[colorbar].append(self._new_widget(colorbar))

        builds = [lambda c=c: build(c) for c in (True, False) for _ in range(wanted[c])]
        return builds + [self.build_one_colorbar] * wanted[True] + super().prebuild()

    def _steps(self, trace) -> list:
        """The steps this tab reads: each attention type's combined mask (plotdata.mask_step) in the current step's
        layer, and the softmax input and output of the attention nearest the current step."""
        step = self.main.current_step()
        layer = (step.layer or 0) if step is not None and step.attention_type else 0
        found = [mask_step(trace, kind, layer) for kind in attention_types(trace)]
        attn = heads_step(trace, step)
        if attn is not None:
            found += softmax_steps(trace, attn.sublayer)
        return [s for s in found if s is not None]

    def preparation(self, trace, batch: int) -> list:
        """Recomputed off the UI thread before this tab draws: every step it reads (see _steps)."""
        return step_work(self._steps(trace), batch)

    def refresh(self) -> None:
        trace, result = self.main.current_trace(), self.main.current_result()
        self.empty.setVisible(trace is None)
        if trace is None:
            return
        # the trace keeps the padding the run used (given, or found in the ids): None means there was none
        no_padding = trace.source_pad is None and trace.target_pad is None
        self.pad_bar.setVisible(no_padding and result.request.windows is None)
        step = self.main.current_step()
        batch, head = self.main.current_batch(), self.main.current_head()
        layer = (step.layer or 0) if step is not None and step.attention_type else 0
        pad_id = result.bundle.config.pad_id
        rows: list[tuple[str, list[Heatmap]]] = []
        for kind in attention_types(trace):
            maps = mask_heatmaps(trace, kind, layer, batch, pad_id)
            for m in maps:
                m.title = m.title.split(": ", 1)[-1]
            shown = mask_step(trace, kind, layer)  # the layer asked for, or the first where a stack has fewer
            number = (shown.layer or 0) + 1 if shown is not None else layer + 1
            rows.append((f"{ATTENTION_TITLES[kind]} (layer {number})", maps))
        attn = heads_step(trace, step)
        if attn is not None:
            pair = before_after_softmax(trace, attn.sublayer, batch, head)
            for m, name in zip(pair, ["Scores + mask, before softmax", "Attention weights, after softmax"]):
                m.title = name
            where = " › ".join(breadcrumb(attn.sublayer))
            rows.append((f"{where}, head {head + 1}: before and after softmax", pair))
        self._maps = [m for _, maps in rows for m in maps]
        self._build(rows)

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._maps)

    def view_title(self) -> str:
        return "Masks"
