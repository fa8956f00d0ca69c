"""Fixtures the interactive page's browser tests share (import them into a test module to use them there).

`engine_browser` is one headless browser per engine the module's tests run in: the fixture is parametrised over
ENGINES, so a test that takes it runs once in Chromium (tests/scratchformer/chromium.py, the DevTools protocol)
and once in Firefox (tests/scratchformer/firefox.py, WebDriver BiDi), each shown in the test's id
(`test_x[chromium]`, `test_x[firefox]`). Both drivers offer the same methods (open, evaluate, wait_for,
centre_of, click, hover, key, screenshot) and the same `requests` and `console` lists; the browser's `engine`
says which it is, for the rare check that differs. An engine that is not installed skips its half with one
sentence. One browser serves the whole module (starting Firefox takes a few seconds); a test that needs a clean
`requests` list clears it.

`run` and `page_file` are the recorded en-hi run of SOURCE and the page written from it, made as
test_page_browser.py makes its own; `canvas` and `cell_centre` read the single map the page shows. A test module
imports the fixtures it takes (`from tests.scratchformer.page_browsers import engine_browser, page_file, run`)
and marks the tests that take them `# noqa: F811` (ruff reads a fixture argument as the import redefined).
"""

from __future__ import annotations

import pytest

from scratchformer.loading.bundle import load_model
from scratchformer.page import page_data, run_arguments, write_page
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


@pytest.fixture(scope="module", params=ENGINES)
def engine_browser(request):
    """One started browser per engine, for the module's tests; skips an engine that is not installed."""
    engine = request.param
    if not installed(engine):
        pytest.skip(not_installed(engine))
    with start_browser(engine) as b:
        yield b


@pytest.fixture(scope="module")
def run():
    """The en-hi model, the prepared inputs of SOURCE and its recorded trace."""
    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare_run(SOURCE)
    _, trace = bundle.run(inputs, keep_output=False)
    return bundle, inputs, trace


@pytest.fixture(scope="module")
def page_file(run, tmp_path_factory):
    """The page of that run, written to a file."""
    bundle, inputs, trace = run
    path = tmp_path_factory.mktemp("page") / "page.html"
    write_page(path, page_data(bundle, trace, inputs, run_args=run_arguments("en-hi", SOURCE)))
    return path


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
