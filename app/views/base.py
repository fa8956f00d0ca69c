"""What every view of the window provides: redraw on demand, what it shows for the exporters, and its hooks
(preparation before drawing, widgets built ahead, shutdown on close, busy while its own jobs run) that the window
calls on every view."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from scratchformer.plotdata import Heatmap

from ..widgets.heatmap import HeatmapWidget


class View(QWidget):
    """A tab. The window calls refresh() when the view is visible and the run, step, batch or head changed."""

    title = "View"
    tooltip = ""
    explains: str | None = None  # its key in scratchformer.explain.tabs: the explanation panel then shows the tab

    def __init__(self, window) -> None:
        super().__init__()
        self.main = window

    def refresh(self) -> None:
        """Redraw from main.current_result(), current_step(), current_batch(), current_head()."""

    def preparation(self, trace, batch: int) -> list:
        """What must be recomputed off the UI thread before refresh() can draw (app/work/warmup.py step_work jobs);
        the window runs it in a recompute job (app/work/jobs.py) first. Nothing by default."""
        return []

    def ahead_work(self, steps: list, batch: int, head: int) -> list:
        """Work that makes what drawing these coming steps would make on the UI thread (their maps and images),
        each a function of nothing run on the window's prefetch thread after the recomputes; it must only read
        the trace and write to thread-safe caches. Nothing by default."""
        return []

    def prebuild(self) -> list:
        """Widgets this view will want, each built by one function of nothing that does nothing when its widget
        is already there; the window builds them one per event-loop turn while it waits (app/work/prebuild.py), so a
        first visit does not build many plots at once. By default: its heatmaps' colour bars."""
        pending = [w for w in self.findChildren(HeatmapWidget) if w.has_colorbar and w.colorbar is None]
        return [self.build_one_colorbar] * len(pending)

    def build_one_colorbar(self) -> None:
        """Build the colour bar of one of this view's heatmaps that has none yet (a prebuild job)."""
        w = next((w for w in self.findChildren(HeatmapWidget) if w.has_colorbar and w.colorbar is None), None)
        if w is not None:
            w.ensure_colorbar()

    def shutdown(self) -> None:
        """Stop this view's own background work; the window calls it once, as it closes."""

    def is_busy(self) -> bool:
        """Whether this view's own background work (its jobs, app/work/jobs.py) is still under way; a screenshot waits
        for it. Nothing by default."""
        return False

    def explain_facts(self) -> dict:
        """What only this view knows for the explanation panel's numbers (the pair or query it shows)."""
        return {}

    def current_heatmaps(self) -> list[Heatmap]:
        """The heatmaps this view shows now (for export)."""
        return []

    def view_title(self) -> str:
        return self.title

    def connect_heatmap(self, widget) -> None:
        """Hover read-out to the inspector, right-click export to the window."""
        widget.hovered.connect(self.main.show_hover)
        widget.export_requested.connect(self.main.request_export)


def placeholder(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setStyleSheet("color: #666; padding: 24px; font-size: 11pt;")
    return label


VALUE_LABELS_PX = 44  # room for a chart's value labels: "-0.0000" fits


def fix_value_axis(plot) -> None:
    """Give a chart's value (left) axis a fixed room for its labels. pyqtgraph otherwise widens or narrows the axis
    to each new set of numbers while painting, which re-lays out the view and paints every plot in it again."""
    plot.getAxis("left").setStyle(autoExpandTextSpace=False, tickTextWidth=VALUE_LABELS_PX)
