"""LayerNorm: per-token mean and std before and after, and what BatchNorm would have normalised instead.

Shows the current step when it is a LayerNorm, otherwise the next LayerNorm at or after it (and says so).
All numbers come from scratchformer.plotdata.norm_comparison, which the exporters can call too. The bar charts'
token labels are thinned to what the plot's width holds (every k-th token), again when the plot is resized, so
thirteen tokens never run into each other ("[CLS]thebankraised…").
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from scratchformer.plotdata import (
    Heatmap,
    NormComparison,
    abbreviate,
    layer_norm_step_near,
    norm_comparison,
)
from scratchformer.recording.trace import step_breadcrumb

from ..widgets.heatmap import HeatmapWidget
from .base import View, fix_value_axis, placeholder

BEFORE, AFTER, REFERENCE = "#7f7f7f", "#1f77b4", "#d62728"
PER_TOKEN, PER_FEATURE = "token", "feature"
NORMALIZED, OUTPUT = "normalized", "output"

CAPTION = (
    "LayerNorm gives each token's row mean 0 and std 1 (then scales by γ, shifts by β). BatchNorm would do that "
    "to each feature's column across the batch, tying a token to the other sentences it is batched with."
)
CAPTION_TIP = (
    "LayerNorm normalises each token on its own: its d_model numbers get mean 0 and standard deviation 1, then a "
    "learned scale γ and shift β per feature. BatchNorm, the norm of convolutional networks, would normalise each "
    "feature across the batch and positions instead, so a token's result would depend on the other sentences in "
    "the batch — awkward for sentences of different lengths, for padding, and for decoding one token at a time."
)


class NormView(View):
    title = "LayerNorm"
    explains = "layernorm"
    tooltip = "LayerNorm's per-token mean and std before and after, next to what BatchNorm would have done"

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.where = QLabel()
        self.where.setWordWrap(True)
        self.where.setTextFormat(Qt.TextFormat.PlainText)
        font = self.where.font()
        font.setBold(True)
        self.where.setFont(font)
        layout.addWidget(self.where)
        self.caption = QLabel(CAPTION)
        self.caption.setWordWrap(True)
        self.caption.setStyleSheet("color: #555;")
        self.caption.setToolTip(CAPTION_TIP)
        layout.addWidget(self.caption)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Statistics"))
        self.stats_mode = QComboBox()
        self.stats_mode.addItem("Per token", PER_TOKEN)
        self.stats_mode.addItem("Per feature", PER_FEATURE)
        self.stats_mode.setItemData(0, "Each token's row: what LayerNorm normalises", Qt.ItemDataRole.ToolTipRole)
        self.stats_mode.setItemData(1, "Each feature's column over batch and positions: what BatchNorm would "
                                       "normalise", Qt.ItemDataRole.ToolTipRole)
        self.stats_mode.setToolTip("Mean and standard deviation of each token's row (LayerNorm), or of each "
                                   "feature's column across the batch (BatchNorm)")
        bar.addWidget(self.stats_mode)
        bar.addSpacing(12)
        bar.addWidget(QLabel("Left map"))
        self.ln_mode = QComboBox()
        self.ln_mode.addItem("z = (x − μ)/σ", NORMALIZED)
        self.ln_mode.addItem("γ·z + β", OUTPUT)
        self.ln_mode.setToolTip("LayerNorm's side: the normalised rows z = (x − μ)/σ, or the step's output γ·z + β")
        bar.addWidget(self.ln_mode)
        bar.addStretch(1)
        layout.addLayout(bar)
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        layout.addWidget(self.legend)
        self.empty = placeholder("This run has no LayerNorm step.")
        layout.addWidget(self.empty)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        plots = QWidget()
        pl = QHBoxLayout(plots)
        pl.setContentsMargins(0, 0, 0, 0)
        self.mean_plot = self._stat_plot()
        self.std_plot = self._stat_plot()
        pl.addWidget(self.mean_plot)
        pl.addWidget(self.std_plot)
        self.splitter.addWidget(plots)
        maps = QWidget()
        ml = QHBoxLayout(maps)
        ml.setContentsMargins(0, 0, 0, 0)
        self.ln_map = HeatmapWidget(compact=True)
        self.bn_map = HeatmapWidget(compact=True)
        for w in (self.ln_map, self.bn_map):
            self.connect_heatmap(w)
            ml.addWidget(w)
        self.splitter.addWidget(maps)
        self.splitter.setSizes([220, 380])
        self.splitter.setChildrenCollapsible(False)
        layout.addWidget(self.splitter, 1)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555;")
        layout.addWidget(self.note)

        self.stats_mode.currentIndexChanged.connect(lambda _i: self._draw())
        self.ln_mode.currentIndexChanged.connect(lambda _i: self._draw())
        self._comparison: NormComparison | None = None
        self._token_labels: list[str] | None = None  # the per-token charts' labels, thinned on every resize
        for plot in (self.mean_plot, self.std_plot):
            plot.getViewBox().sigResized.connect(lambda vb, p=plot: self._apply_token_ticks(p))
        self._key = None
        self._prepared: dict = {}  # (run, step, batch) → the comparison preparation() made, taken by refresh()
        self._shown: list[Heatmap] = []

    @staticmethod
    def _stat_plot() -> pg.PlotWidget:
        plot = pg.PlotWidget()
        plot.setMenuEnabled(False)
        plot.showGrid(x=False, y=True, alpha=0.25)
        plot.setMinimumSize(160, 120)
        for name in ("left", "bottom"):
            plot.getAxis(name).enableAutoSIPrefix(False)
        fix_value_axis(plot)  # new comparisons do not re-lay out the view
        return plot

    # --- data ------------------------------------------------------------------------------------------------

    def preparation(self, trace, batch: int) -> list:
        """The window runs this off the UI thread before this tab draws: the comparison of the LayerNorm step
        shown (it reads every batch item of the step and of the residual sum it normalises, which a long lazy
        trace recomputes); refresh() then only draws."""
        current = self.main.current_step()
        step = layer_norm_step_near(trace, current.index if current is not None else 0)
        key = (id(self.main.current_result()), step.index, batch) if step is not None else None
        if step is None or key == self._key or key in self._prepared:
            return []
        eps = self._eps()

        def prepare() -> None:
            self._prepared = {key: norm_comparison(trace, step, batch, eps)}

        return [prepare]

    def _eps(self) -> float:
        bundle = self.main.current_bundle()
        return bundle.config.layer_norm_eps if bundle is not None else 1e-5

    def refresh(self) -> None:
        trace = self.main.current_trace()
        if trace is None:
            return
        current = self.main.current_step()
        step = layer_norm_step_near(trace, current.index if current is not None else 0)
        self.empty.setVisible(step is None)
        self.splitter.setVisible(step is not None)
        if step is None:
            self._comparison, self._shown = None, []
            self.where.setText("")
            self.note.setText("")
            return
        batch = self.main.current_batch()
        key = (id(self.main.current_result()), step.index, batch)
        if key != self._key:
            if key in self._prepared:  # made off the UI thread (None when there is nothing to compare)
                self._comparison = self._prepared.pop(key)
            else:
                self._comparison = norm_comparison(trace, step, batch, self._eps())
            self._key = key
        place = " › ".join(step_breadcrumb(step))
        if current is not None and current.index == step.index:
            self.where.setText(f"{place} ({step.name})")
        elif current is not None and step.index > current.index:
            self.where.setText(f"Not a LayerNorm step; showing the next one: {place} ({step.name})")
        else:
            self.where.setText(f"No LayerNorm follows this step; showing the last one: {place} ({step.name})")
        self._draw()

    # --- drawing ---------------------------------------------------------------------------------------------

    def _draw(self) -> None:
        c = self._comparison
        for plot in (self.mean_plot, self.std_plot):
            plot.clear()
        if c is None:
            self.ln_map.set_heatmap(None)
            self.bn_map.set_heatmap(None)
            self._shown = []
            self.note.setText("This LayerNorm's input was not recorded, so there is nothing to compare.")
            return
        if self.stats_mode.currentData() == PER_FEATURE:
            self._draw_per_feature(c)
        else:
            self._draw_per_token(c)
        ln = c.output if self.ln_mode.currentData() == OUTPUT else c.layer_norm
        self.ln_map.set_heatmap(ln)
        self.bn_map.set_heatmap(c.batch_norm)
        self._shown = [ln, c.batch_norm]
        notes = [f"Input: {c.input_step}. LayerNorm divides by √(σ² + ε), ε = {c.eps:g}."] + c.notes
        self.note.setText(" ".join(notes))

    def _draw_per_token(self, c: NormComparison) -> None:
        self.legend.setText(
            f"{_swatch(BEFORE)} before (the input)&nbsp;&nbsp; {_swatch(AFTER)} after LayerNorm&nbsp;&nbsp; "
            f"<span style='color:{REFERENCE}'>- - -</span> mean 0 / std 1"
        )
        n = len(c.labels)
        x = np.arange(n, dtype=np.float64)
        self._token_labels = list(c.labels)
        for plot, before, after, target, what in (
            (self.mean_plot, c.mean_before, c.mean_after, 0.0, "Mean of each token's row"),
            (self.std_plot, c.std_before, c.std_after, 1.0, "Std of each token's row"),
        ):
            plot.setTitle(what, size="9pt")
            plot.addItem(pg.BarGraphItem(x=x - 0.2, height=before, width=0.38, brush=BEFORE, pen=None))
            plot.addItem(pg.BarGraphItem(x=x + 0.2, height=after, width=0.38, brush=AFTER, pen=None))
            plot.addItem(pg.InfiniteLine(pos=target, angle=0,
                                         pen=pg.mkPen(REFERENCE, width=1, style=Qt.PenStyle.DashLine)))
            plot.setLabel("bottom", c.pos_dim)
            plot.enableAutoRange()
            plot.setXRange(-0.5, n - 0.5, padding=0.02)
            self._apply_token_ticks(plot)

    def _draw_per_feature(self, c: NormComparison) -> None:
        self.legend.setText(
            f"{_swatch(BEFORE)} the input, each feature over {c.n_rows} rows (batch · positions)&nbsp;&nbsp; "
            f"{_swatch(AFTER)} after BatchNorm"
        )
        d = c.feature_mean.shape[0]
        x = np.arange(d, dtype=np.float64)
        self._token_labels = None
        for plot, values, target, what in (
            (self.mean_plot, c.feature_mean, 0.0, "Mean of each feature (column)"),
            (self.std_plot, c.feature_std, 1.0, "Std of each feature (column)"),
        ):
            plot.setTitle(what, size="9pt")
            plot.getAxis("bottom").setTicks(None)
            plot.setLabel("bottom", "d_model")
            plot.plot(x, values, pen=pg.mkPen(BEFORE, width=1.5))
            plot.plot([0, d - 1], [target, target], pen=pg.mkPen(AFTER, width=2))
            plot.enableAutoRange()

    def _apply_token_ticks(self, plot: pg.PlotWidget) -> None:
        """Label every k-th token bar, k as small as the plot's width allows without labels touching."""
        if self._token_labels is None:
            return
        axis = plot.getAxis("bottom")
        font = axis.style.get("tickFont") or axis.font()
        (x0, x1), _ = plot.getViewBox().viewRange()
        per_bar = plot.getViewBox().width() / max(x1 - x0, 1e-9)  # pixels between neighbouring bars
        axis.setTicks([_token_ticks(self._token_labels, per_bar, QFontMetricsF(font))])

    def current_heatmaps(self) -> list[Heatmap]:
        return list(self._shown)

    def view_title(self) -> str:
        c = self._comparison
        return f"LayerNorm vs BatchNorm: {c.step}" if c is not None else self.title


def _swatch(colour: str) -> str:
    return f"<span style='color:{colour}'>■</span>"


LABEL_CHARS = 6  # a token label's length on the bar charts (the full token is on the heatmaps' hover)
LABEL_GAP_PX = 6.0  # at least this much space between neighbouring labels


def _token_ticks(labels: list[str], per_bar: float, metrics: QFontMetricsF) -> list[tuple[float, str]]:
    """Every stride-th token with its label abbreviated: the stride is the smallest for which the widest label
    plus LABEL_GAP_PX fits between two labelled bars (`per_bar`: pixels from one bar to the next)."""
    texts = [abbreviate(t, LABEL_CHARS) for t in labels]
    widest = max((metrics.horizontalAdvance(t) for t in texts), default=0.0)
    stride = max(1, int(np.ceil((widest + LABEL_GAP_PX) / max(per_bar, 1e-9))))
    return [(float(i), texts[i]) for i in range(0, len(texts), stride)]
