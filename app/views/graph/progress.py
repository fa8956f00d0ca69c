"""The Graph view's progress bar, Cancel and status line: every job of the view (the build, the pruning, the cards,
the QK splits) shows the same bar while it works and says what it made, or its one sentence, in the status line. A
mixin of GraphView (app/views/graph/view.py): its methods read the view's jobs, bar, Cancel button and status."""

from __future__ import annotations

from ...widgets.steady_label import SteadyLabel


class StatusLine(SteadyLabel):
    """The view's status: at least two lines high, so that a new message seldom changes its height — a new height
    re-lays out the view, and the plot, resized, paints every edge again."""

    def __init__(self) -> None:
        super().__init__(word_wrap=True)

    def _needed_height(self) -> int:
        return max(super()._needed_height(), 2 * self.label.fontMetrics().height())


class GraphProgress:
    """The bar while a job works, Cancel, and the status line."""

    def _working(self, text: str) -> None:
        self.progress.setRange(0, 0)
        self.progress.setFormat("")
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._say(text)

    def _progressed(self, *news) -> None:
        if len(news) == 2 and all(isinstance(n, int) for n in news):  # the cards: (inputs read, all inputs)
            self.progress.setRange(0, news[1])
            self.progress.setValue(news[0])
            self.progress.setFormat("input %v of %m")
        elif news:
            self.progress.setRange(0, 0)
            self.progress.setFormat(str(news[0]))

    def _idle(self) -> None:
        if any(jobs.busy() for jobs in (self._build_jobs, self._layout_jobs, self._card_jobs, self._qk_jobs)):
            return
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)

    def cancel(self) -> None:
        """Stop what is being made (its result is dropped when it ends); the graph drawn, if any, stays."""
        building = self._build_jobs.busy()
        for jobs in (self._build_jobs, self._layout_jobs, self._card_jobs, self._qk_jobs):
            jobs.cancel()
        self._prune_timer.stop()
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        if building:
            self._asked = None  # Build (or the next change) asks again
            self._say("Cancelled; nothing new is drawn. Build builds the graph again.")
        else:
            self._say("Cancelled.")

    def _say(self, text: str, error: bool = False) -> None:
        self.status.label.setStyleSheet("color: #b00020; font-weight: bold;" if error else "")
        self.status.setText(text)
