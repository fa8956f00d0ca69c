"""What the interactive page's browser tests share: both engines, and helpers for the recorded en-hi page.

A browser fixture made by `browser_fixture()` is one headless browser per engine the module's tests run in: the
fixture is parametrised over ENGINES, so a test that takes it runs once in Chromium (tests/scratchformer/chromium.py,
the DevTools protocol) and once in Firefox (tests/scratchformer/firefox.py, WebDriver BiDi), each shown in the
test's id (`test_x[chromium]`, `test_x[firefox]`). Both drivers offer the same methods (open, evaluate, wait_for,
centre_of, click, hover, key, screenshot) and the same `requests` and `console` lists; the browser's `engine` says
which it is, for the rare check that differs. An engine that is not installed skips its half with one sentence.
One browser serves the whole module (starting Firefox takes a few seconds); a test that needs a clean `requests`
list clears it. tests/scratchformer/conftest.py offers the folder's tests one such fixture, `engine_browser`, with
`page_run` and `page_file` (the recorded en-hi run of SOURCE and the page written from it); a module that wants
another timeout, or a report once its tests are done, makes its own (`browser = browser_fixture(timeout=60)`).

`canvas` and `cell_centre` read the single map the recorded page shows.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.scratchformer import chromium, firefox

ENGINES = ("chromium", "firefox")
DRIVERS = {"chromium": chromium, "firefox": firefox}

SOURCE = "the girl eats an apple"
READY = "document.body.dataset.ready === '1'"


def installed(engine: str) -> bool:
    return (chromium.find_chromium() if engine == "chromium" else firefox.find_firefox()) is not None


def not_installed(engine: str) -> str:
    """The sentence a test skips with when the engine is missing."""
    return DRIVERS[engine].NOT_INSTALLED


def start_browser(engine: str, **options):
    """A browser of that engine, not yet started: use it as a context manager (`with start_browser(e) as b:`)."""
    browser = DRIVERS[engine].Browser(**options)
    browser.engine = engine
    return browser


def browser_fixture(timeout: float = 30.0, after: Callable[[str], None] | None = None):
    """A module-scoped fixture: one started browser per engine (its waits bounded by `timeout` seconds), an engine
    that is not installed skipped; `after(engine)` runs once the module's tests in that engine are done (to print
    what they measured). The browser's `shown` starts as None, for a module that keeps one page open across tests."""

    @pytest.fixture(scope="module", params=ENGINES)
    def browser(request):
        engine = request.param
        if not installed(engine):
            pytest.skip(not_installed(engine))
        with start_browser(engine, timeout=timeout) as b:
            b.shown = None
            yield b
        if after is not None:
            after(engine)

    return browser


def canvas(b) -> str:
    """The drawn map, as PNG data (changes when the map does)."""
    return b.evaluate("document.querySelector('#sf-maps canvas').toDataURL()")


def cell_centre(b, row: int, col: int) -> tuple[float, float]:
    """Viewport point of a cell's centre on the (single) map."""
    x, y = b.evaluate("(() => { const c = document.querySelector('#sf-maps canvas');"
                      " c.scrollIntoView({block: 'center'}); const r = c.getBoundingClientRect(), s = c.sf;"
                      f" return [r.left + s.left + ({col} + 0.5) * s.cs,"
                      f" r.top + s.top + ({row} + 0.5) * s.cs]; }})()")  # fmt: skip
    return x, y
