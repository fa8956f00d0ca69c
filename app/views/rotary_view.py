"""Rotary positions (RoPE), in the Encoding group beside the positional encoding: what the rotation does (the angle
pos · ω_i of every pair of dimensions at every position) and why it works, on this run's own numbers: one query
and one key of a chosen attention, head and pair of positions, turned to positions shifted together by s, give the
same score at every shift — and, for contrast, a score that moves when the paper's sinusoids are added instead.

Models without rotary positions get a sentence saying what they do instead. The numbers come from
scratchformer.plotdata.rotary; the query and key are read off the UI thread (PickedView), after the attention's
steps are recomputed where a lazy trace did not keep them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSizePolicy, QSplitter, QVBoxLayout, QWidget

from scratchformer.errors import UserError
from scratchformer.plotdata import Heatmap
from scratchformer.plotdata.neuron import AttentionPick
from scratchformer.plotdata.rotary import (
    DEFAULT_SHIFTS,
    RotaryShift,
    kv_head_of,
    layer_of,
    omegas,
    rotary_angles,
    rotary_shift,
    rotary_vectors,
)

from ..widgets.heatmap import HeatmapWidget
from .base import fix_value_axis, placeholder
from .pe_view import bold_label, caption
from .picked_view import PickedView

ANGLE_ROWS = 48  # positions the angle map shows at least, beyond a short input: the slow pairs need room to turn
ROTARY_PEN, ADDED_PEN, RUN_PEN = "#1f77b4", "#d62728", "#555555"


@dataclass
class RotaryPick:
    """What the view shows for one pick: the angle map and the shift demonstration."""

    pick: AttentionPick
    key: int
    kv_head: int
    shared: int  # query heads per key/value head
    angles: Heatmap
    shift: RotaryShift
    query_label: str
    key_label: str


def _label(trace, dim: str, batch: int, pos: int) -> str:
    labels = trace.labels(dim, batch) or []
    return f"{pos} · {labels[pos].strip() or labels[pos]}" if pos < len(labels) else str(pos)


class RotaryView(PickedView):
    title = "Rotary positions"
    tooltip = ("RoPE: each pair of query and key dimensions turned by position × its frequency; the score depends "
               "on distance only")
    explains = "rotary"
    with_key = True
    empty_text = "Run a model to see its rotary positions."

    def __init__(self, window) -> None:
        super().__init__(window)
        self.other = placeholder("")
        self.other.setAlignment(Qt.AlignmentFlag.AlignTop)
        # its wrapped paragraphs must not make the window taller than a small screen: shown from the top, cut below
        self.other.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        self.layout_.insertWidget(1, self.other)
        self.body = QSplitter(Qt.Orientation.Vertical)
        self.angles = HeatmapWidget()
        self.connect_heatmap(self.angles)
        self.body.addWidget(self.angles)
        lower = QWidget()
        ll = QVBoxLayout(lower)
        ll.setContentsMargins(0, 0, 0, 0)
        self.shift_title = bold_label()
        ll.addWidget(self.shift_title)
        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.plot.setLabel("bottom", "shift s: the query at m + s, the key at n + s")
        self.plot.setLabel("left", "score q·k")
        fix_value_axis(self.plot)
        self.legend = self.plot.addLegend(offset=(-10, -10), brush=pg.mkBrush(255, 255, 255, 210))
        ll.addWidget(self.plot, 1)
        self.difference = caption(
            "How this differs from the 2017 paper: there a position vector of sines and cosines is added to each "
            "embedding once, below the first layer, so every query and key carries where its token stands, and "
            "moving both tokens along the text changes their score (red). RoPE adds nothing to the embeddings: in "
            "every attention it turns q and k by their positions, so only the distance between them reaches the "
            "score (blue, flat), and the turn keeps every vector's length."
        )
        ll.addWidget(self.difference)
        self.body.addWidget(lower)
        self.body.setSizes([380, 420])
        self.layout_.addWidget(self.body, 1)
        self._angle_key: tuple | None = None

    # --- choosing and making (off the UI thread) ----------------------------------------------------------------
    def show_pair(self, sublayer: str, head: int, query: int, key: int | None) -> None:
        """Turn this query and key of this head (a lesson page, or any caller)."""
        self.show_pick(sublayer, head, query, key)

    def refresh(self) -> None:
        result, trace = self.main.current_result(), self.main.current_trace()
        config = result.bundle.config if result is not None else None
        rotary = config is not None and config.positional == "rotary" and trace is not None
        self.other.setVisible(config is not None and not rotary)
        if config is not None and not rotary:
            self.other.setText(_not_rotary(config))
            self.empty.setVisible(False)
            for w in (self.bar, self.summary, *self.body_widgets()):
                w.setVisible(False)
            self.value, self._maps = None, []
            return
        super().refresh()

    def make(self, trace, pick: AttentionPick, key: int | None) -> RotaryPick:
        config = self.main.current_result().bundle.config
        if trace.find(f"{pick.sublayer}.q_rotated") is None:
            raise UserError(f"{pick.sublayer} does not rotate its queries and keys.")
        weights = trace[f"{pick.sublayer}.weights"]
        _, heads, queries, keys = weights.shape
        head, query = min(pick.head, heads - 1), min(pick.query, queries - 1)
        if key is None:  # the key the query attends to most, other than itself when it can
            row = weights.item(pick.batch)[head, query].double().numpy()  # (keys,)
            key = int(np.argmax(row))
        key = min(key, keys - 1)
        layer = layer_of(pick.sublayer)
        q, k, traced = rotary_vectors(trace, config, pick.sublayer, head, query, key, pick.batch)
        omega = omegas(config, layer)
        shift = rotary_shift(q, k, omega, query, key, DEFAULT_SHIFTS, traced)
        labels = trace.labels(weights.dims[2], pick.batch)
        angles = rotary_angles(config, max(queries, ANGLE_ROWS), layer, labels)
        return RotaryPick(pick=pick, key=key, kv_head=kv_head_of(config, head),
                          shared=max(config.n_heads // config.kv_heads, 1), angles=angles, shift=shift,
                          query_label=_label(trace, weights.dims[2], pick.batch, query),
                          key_label=_label(trace, weights.dims[3], pick.batch, key))  # fmt: skip

    # --- drawing ------------------------------------------------------------------------------------------------
    def body_widgets(self) -> list:
        return [self.body]

    def draw(self, value: RotaryPick) -> list:
        angle_key = (value.angles.title, value.angles.subtitle, len(value.angles.row_labels),
                     tuple(value.angles.row_labels[:4]))  # fmt: skip
        if angle_key != self._angle_key:  # the same table for every head and position of a layer
            self._angle_key = angle_key
            self.angles.set_heatmap(value.angles)
        s = value.shift
        self.shift_title.setText(
            f"Query {value.query_label} (m = {s.m}) and key {value.key_label} (n = {s.n}), head "
            f"{value.pick.head + 1}: both moved s positions further along the text"
        )
        self.plot.clear()
        self.legend.clear()
        x = np.arange(len(s.shifts), dtype=np.float64)
        self.plot.plot(x, s.rotary, pen=pg.mkPen(ROTARY_PEN, width=3), symbol="o", symbolBrush=ROTARY_PEN,
                       symbolPen=None, name="rotated (RoPE): rot(q, m+s)·rot(k, n+s)")
        self.plot.plot(x, s.added, pen=pg.mkPen(ADDED_PEN, width=2, style=Qt.PenStyle.DashLine), symbol="s",
                       symbolBrush=ADDED_PEN, symbolPen=None, name="sinusoids added: (q + PE)·(k + PE)")
        if s.traced is not None:
            self.plot.addItem(pg.InfiniteLine(
                pos=s.traced, angle=0, pen=pg.mkPen(RUN_PEN, width=1, style=Qt.PenStyle.DotLine),
                label="this run's score", labelOpts={"position": 0.08, "color": RUN_PEN}))
        self.plot.getAxis("bottom").setTicks([[(float(i), str(v)) for i, v in enumerate(s.shifts)]])
        values = np.concatenate([s.rotary, s.added])
        lo, hi = float(values.min()), float(values.max())
        pad = max((hi - lo) * 0.1, 0.05 * max(abs(lo), abs(hi), 1.0))
        self.plot.setRange(xRange=(-0.3, len(s.shifts) - 0.7), yRange=(lo - pad, hi + pad), padding=0)
        return [value.angles, s.heatmap(f"Score of query {value.query_label} and key {value.key_label}, "
                                        "both moved by s positions")]

    def headline(self, value: RotaryPick) -> str:
        s = value.shift
        return (f"{self.where(value.pick)} · query {value.query_label}, key {value.key_label}: the score is "
                f"{s.rotary[0]:.4g} at every shift")

    def text(self, value: RotaryPick) -> str:
        s = value.shift
        shared = (f"Head {value.pick.head + 1} reads key/value head {value.kv_head + 1} (shared by {value.shared} "
                  "query heads). " if value.shared > 1 else "")
        run = f" (this run's score: {s.traced:.4g})" if s.traced is not None else ""
        return "\n".join([
            f"{shared}Turned to positions {s.m} + s and {s.n} + s for s = {', '.join(map(str, s.shifts))}: "
            f"q·k = {s.rotary[0]:.6g} every time, varying by {s.spread:.1g} (rounding){run}. It depends on "
            f"m − n = {s.m - s.n} only.",
            f"Lengths kept: |q| = {s.q_norm:.4g} and |k| = {s.k_norm:.4g} at every position.",
            f"With the paper's sinusoids added to the same q and k instead, the score would run from "
            f"{s.added.min():.4g} to {s.added.max():.4g} over the same shifts: it would depend on where the pair "
            f"stands. Without any positions: q·k = {s.unturned:.4g}.",
        ])  # fmt: skip

    def view_title(self) -> str:
        return "Rotary positions"


def _not_rotary(config) -> str:
    """What a model without rotary positions does instead, in one paragraph."""
    how = {
        "sinusoidal": "adds the 2017 paper's sinusoids to its embeddings (the Positional encoding tab shows them)",
        "sinusoidal_halves": "adds sinusoids to its embeddings (the Positional encoding tab shows them)",
        "learned": "adds a learned vector per position to its embeddings (the Positional encoding tab)",
    }.get(config.positional, "adds no positions to its embeddings"
          + (": a bias on the attention scores says how far apart two tokens are (T5)" if config.relative_buckets
             else ""))
    return (f"{config.name or 'This model'} does not use rotary positions: it {how}.\n\nModels such as Llama, "
            "Mistral, Qwen, Gemma, Phi-3 and Pythia instead turn every query and key inside each attention by an "
            "angle that grows with its position (RoPE). Open one of them, or the bundled llama-tiny, to see the "
            "rotation and why a score then depends only on the distance between two tokens.")
