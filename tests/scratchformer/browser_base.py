"""Test tooling: what the two browser drivers (tests/scratchformer/chromium.py, firefox.py) do alike.

Each driver speaks its own protocol, and that stays in its module: Chromium's DevTools protocol over a pipe, Firefox's
WebDriver BiDi over a WebSocket — starting the browser, framing and sending a command, reading its messages, what
an event means, evaluating JavaScript, dispatching mouse and key input, taking a screenshot. `BrowserBase` holds what
only waits, or runs JavaScript through the driver's own evaluate(): the bounded wait for a command's answer (the
driver's reader thread hands answers over with `_answered`) and for an event, the URL a path is opened at,
wait_for, centre_of, and the context manager that closes the browser also when starting it failed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from queue import Empty, Queue


class ProtocolError(RuntimeError):
    pass


def find_executable(variable: str, candidates: tuple[str, ...]) -> str | None:
    """The path of the first of `candidates` on PATH, or None; the environment variable `variable` names one
    explicitly (None when that is no file)."""
    explicit = os.environ.get(variable)
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in candidates:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserBase:
    """A headless browser spoken to over a protocol; a driver supplies start, close, log_tail and the protocol."""

    NAME = "The browser"  # in messages: "Chromium ended before answering …"

    def __init__(self, timeout: float, width: int, height: int, loopback: bool, prefix: str) -> None:
        self.timeout = timeout
        self.loopback = loopback
        self.size = (width, height)
        self.proc = None  # the browser's subprocess.Popen, once started
        self.profile = tempfile.mkdtemp(prefix=prefix)
        self._next_id = 0
        self._answers: dict[int, dict] = {}
        self._events: Queue = Queue()
        self._cond = threading.Condition()
        self.requests: list[str] = []  # URLs the page asked for other than file: and data:
        self.console: list[str] = []  # console messages and uncaught exceptions, for failure reports

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()  # a start that failed half-way leaves no process and no profile behind
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- for the driver's reader thread and its call() ------------------------------------------------------

    def _answered(self, message: dict | None) -> None:
        """An answer has come (None: the connection ended, so that a waiting call looks at the process again)."""
        with self._cond:
            if message is not None:
                self._answers[message["id"]] = message
            self._cond.notify_all()

    def _answer(self, ident: int, method: str, timeout: float | None) -> dict:
        """The answer to the command numbered `ident`, waited for (bounded); ProtocolError when none comes or the
        browser ends first."""
        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        with self._cond:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if self.proc.poll() is not None:
                    raise ProtocolError(f"{self.NAME} ended (status {self.proc.returncode}) before answering {method}: "
                                        f"{self.log_tail()}")  # fmt: skip
                if left <= 0:
                    raise ProtocolError(f"no answer to {method} within {limit} s")
                self._cond.wait(min(left, 0.5))
            return self._answers.pop(ident)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"no {method} event within {timeout or self.timeout} s")
            try:
                message = self._events.get(timeout=min(left, 0.5))
            except Empty:
                continue
            if message.get("method") == method:
                return message.get("params", {})

    def _navigation_url(self, path: Path | str) -> str:
        """The URL to open `path` at (a file, or a file: or http: URL kept as it is); events of the page before are
        dropped, so that a wait for the next page's events sees only them."""
        while not self._events.empty():
            self._events.get_nowait()
        return str(path) if str(path).startswith(("file:", "http:")) else Path(path).resolve().as_uri()

    # --- what the tests use, on top of the driver's evaluate() -----------------------------------------------

    def wait_for(self, expression: str, timeout: float | None = None) -> float:
        """Poll until the expression is truthy; returns the seconds waited. Fails with the console's messages."""
        start = time.monotonic()
        deadline = start + (timeout or self.timeout)
        while not self.evaluate(f"Boolean({expression})"):
            if time.monotonic() > deadline:
                raise ProtocolError(f"{expression!r} stayed false for {timeout or self.timeout} s; console: "
                                    f"{self.console[-5:]}")  # fmt: skip
            time.sleep(0.02)
        return time.monotonic() - start

    def centre_of(self, selector: str) -> tuple[float, float]:
        """The centre of an element's box, in the page's CSS pixels (scrolled into view first)."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                            "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                            "return [r.left + r.width / 2, r.top + r.height / 2]; })()")  # fmt: skip
        return float(box[0]), float(box[1])
