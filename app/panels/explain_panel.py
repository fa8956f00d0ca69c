"""The explanation beside the views: for the current step, what happens, why, and the equation with this run's
numbers (texts and numbers come from scratchformer.explain; this panel only lays them out). Links to related
steps ("the V from step 17") move the stepper there.

The text is made off the UI thread: its numbers read the step's tensor (a 512 × 512 map converted to float64, or a
sublayer a lazy trace reruns), which would stall the window. Only the latest request is shown."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QTimer, QUrl, Signal
from PySide6.QtWidgets import QLabel, QTextBrowser, QVBoxLayout, QWidget

from scratchformer.recording.trace import Step

from ..work.jobs import JobRunner
from .stepper import step_path

CSS = """
h3 { margin: 0 0 4px 0; color: #14457a; }
p { margin: 3px 0 6px 0; }
.numbers { background: #eef5ff; border-left: 3px solid #5b8fd1; padding: 4px; }
.formula { font-family: 'DejaVu Sans Mono', monospace; color: #333; }
.params { color: #444; }
.muted { color: #777; }
"""


def explanation_html(step: Step, explanation, params: list[tuple[str, str]] | None = None) -> str:
    """HTML for one step: title, what, why, this run's numbers, formula, related steps and parameter counts."""
    e = html.escape
    parts = [f"<style>{CSS}</style>", f"<h3>{e(step_path(step))}</h3>"]
    if explanation is not None:
        parts.append(f"<p>{e(explanation.what)}</p>")
        if explanation.why:
            parts.append(f"<p><b>Why:</b> {e(explanation.why)}</p>")
        if explanation.numbers:
            parts.append(f"<p class='numbers'><b>In this run:</b> {e(explanation.numbers)}</p>")
    parts.append(f"<p class='formula'>{e(step.formula)}</p>")
    if explanation is not None and explanation.links:
        links = " · ".join(f"<a href='step:{i}'>{e(text)} (step {i + 1})</a>" for i, text in explanation.links)
        parts.append(f"<p><b>See also:</b> {links}</p>")
    if params:
        rows = "".join(f"<br>{e(name)}: {e(text)}" for name, text in params)
        parts.append(f"<p class='params'><b>Parameters</b>{rows}</p>")
    return "".join(parts)


def tab_html(title: str, explanation) -> str:
    """HTML for a tab (scratchformer.explain.tabs): what it shows, why, and this run's numbers."""
    e = html.escape
    parts = [f"<style>{CSS}</style>", f"<h3>{e(title)} tab</h3>", f"<p>{e(explanation.what)}</p>"]
    if explanation.why:
        parts.append(f"<p><b>Why:</b> {e(explanation.why)}</p>")
    if explanation.numbers:
        parts.append(f"<p class='numbers'><b>In this run:</b> {e(explanation.numbers)}</p>")
    parts.append("<p class='muted'>The Step and Heads tabs explain the current step.</p>")
    return "".join(parts)


STEP_TITLE = "<b>Explanation</b> — what this step does, and why"
TAB_TITLE = "<b>Explanation</b> — what this tab shows, and why"
REST_MS = 40  # show_later waits this long after the last step change


class ExplanationFailed(Exception):
    """Raised by a make_html function that still has something to show (`html`) beside its one-sentence error."""

    def __init__(self, html_text: str, message: str) -> None:
        super().__init__(message)
        self.html = html_text


def _made(make_html: Callable[[], str]) -> tuple[str | None, str]:
    """(html or None, error sentence or '') of one make_html call."""
    try:
        return make_html(), ""
    except ExplanationFailed as exc:
        return exc.html, str(exc)
    except Exception as exc:  # noqa: BLE001 - a missing text must not take the window down
        return None, f"No explanation here: {exc}"


class ExplainPanel(QWidget):
    """'Explanation' title above a read-only rich-text browser; `step_link(index)` when a link is clicked.

    Stepping shows the heatmap at once and the explanation a moment later (`show_later`): laying out rich text
    costs a few milliseconds a step, and while Next is held down only the step you stop at needs its text."""

    step_link = Signal(int)
    failed = Signal(str)  # one sentence: an explanation could not be made

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.title = QLabel(STEP_TITLE)
        layout.addWidget(self.title)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.setOpenExternalLinks(False)
        self.browser.anchorClicked.connect(self._clicked)
        self.browser.setStyleSheet("QTextBrowser { background: #fcfcfd; }")
        layout.addWidget(self.browser, 1)
        self._pending: Callable[[], str] | None = None  # the latest request, until REST_MS have passed
        self._jobs = JobRunner("scratchformer-explanation", latest_only=True)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REST_MS)
        self._timer.timeout.connect(self._start)

    def set_title(self, text: str) -> None:
        """The line above the text; set only when it changes (a rich-text label relays out the panel)."""
        if self.title.text() != text:
            self.title.setText(text)

    def show_html(self, text: str) -> None:
        self.stop()
        self.browser.setHtml(text)

    def show_later(self, make_html: Callable[[], str]) -> None:
        """Show make_html() — made on a worker thread — once REST_MS have passed without another request."""
        self._pending = make_html
        self._jobs.cancel()  # what a job still makes for an older request is no longer wanted
        self._timer.start()

    def _start(self) -> None:
        """REST_MS passed: make the latest request off the UI thread (after the job running now, if any)."""
        make, self._pending = self._pending, None
        if make is not None:
            self._jobs.start(lambda job: _made(make), on_result=self._show)

    def _show(self, made: tuple[str | None, str]) -> None:
        text, error = made
        if text is not None:
            self.browser.setHtml(text)
        if error:
            self.failed.emit(error)

    def is_busy(self) -> bool:
        """Whether an explanation is still being made (tests wait for it)."""
        return self._jobs.busy() or self._pending is not None

    def flush(self) -> None:
        """Make and show a pending explanation now, on this thread (tests, and reading the text)."""
        make, self._pending = self._pending, None
        self._timer.stop()
        if make is None:  # the latest one may be being made: wait for it, and show it now
            self._jobs.wait()
            return
        self._jobs.cancel()  # a job still running for an older request is no longer wanted
        self._show(_made(make))

    def stop(self) -> None:
        """Drop pending requests and wait for a job in flight (the window calls it as it closes)."""
        self._pending = None
        self._timer.stop()
        self._jobs.shutdown()

    def plain_text(self) -> str:
        self.flush()
        return self.browser.toPlainText()

    def _clicked(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith("step:") and text[5:].isdigit():
            self.step_link.emit(int(text[5:]))
