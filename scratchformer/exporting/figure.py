"""What one exported picture holds: a title and one or more heatmaps laid out in a grid (Qt-free data).

app/export/render.py draws a Figure with QPainter for PNG, SVG and PDF; the window builds one from its current
view, and the headless export builds them from the trace, both through these functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..plotdata import Heatmap, VocabLabels, head_count, heads_grid, step_heatmap
from ..recording.trace import Step, Trace, step_path


@dataclass
class Figure:
    """A title, an optional subtitle and formula, and heatmaps drawn side by side in `columns` columns."""

    title: str
    heatmaps: list[Heatmap] = field(default_factory=list)
    subtitle: str = ""
    formula: str = ""
    columns: int | None = None  # None: as square a grid as the panels allow
    panel_titles: bool = True  # draw each heatmap's own title above it (heads grid: "Head 1", …)

    def grid(self) -> tuple[int, int]:
        """(rows, columns) of the panel grid."""
        n = max(1, len(self.heatmaps))
        cols = self.columns or math.ceil(math.sqrt(n))
        cols = max(1, min(cols, n))
        return math.ceil(n / cols), cols


def single_figure(heatmap: Heatmap) -> Figure:
    """One heatmap as the whole picture: its title on top, no separate panel title."""
    return Figure(heatmap.title, [heatmap], heatmap.subtitle, heatmap.formula, columns=1, panel_titles=False)


def step_figure(
    trace: Trace, step: Step | str, batch: int = 0, vocab_labels: VocabLabels | None = None
) -> Figure:
    """What the window's step view shows for one step: every head side by side when it has a head axis."""
    step = step if isinstance(step, Step) else trace[step]
    if head_count(step) > 1:
        maps = heads_grid(trace, step, batch)
        title = step_path(step)
        subtitle = f"{step.name}  ·  {step.shape_text()}  ·  batch item {batch + 1}"
        return Figure(title, maps, subtitle, step.formula, columns=None if len(maps) > 4 else len(maps))
    return single_figure(step_heatmap(trace, step, batch, 0, vocab_labels))


def figure_for_view(title: str, heatmaps: list[Heatmap]) -> Figure:
    """A window view's current heatmaps under the view's title (what is exported is what is shown)."""
    if len(heatmaps) == 1:
        only = heatmaps[0]
        fig = single_figure(only)
        if title and title != only.title:
            fig.title, fig.subtitle = title, " · ".join(x for x in (only.title, only.subtitle) if x)
        return fig
    subtitle = heatmaps[0].subtitle.rsplit("  ·  head", 1)[0] if heatmaps else ""
    return Figure(title, list(heatmaps), subtitle, heatmaps[0].formula if heatmaps else "")
