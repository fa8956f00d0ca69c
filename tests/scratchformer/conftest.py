"""Fixtures the interactive page's browser tests in this folder share (tests/scratchformer/page_browsers.py says
more): `engine_browser`, one headless browser per engine for the module (a test that takes it runs in Chromium and
in Firefox); `page_run`, the en-hi model, the prepared inputs of SOURCE and its recorded trace; `page_file`, the
page of that run written to a file. All three are module-scoped: each module that takes them gets its own."""

from __future__ import annotations

import pytest

from scratchformer.loading.bundle import load_model
from scratchformer.page import page_data, run_arguments, write_page
from tests.scratchformer.page_browsers import SOURCE, browser_fixture

engine_browser = browser_fixture()


@pytest.fixture(scope="module")
def page_run():
    """The en-hi model, the prepared inputs of SOURCE and its recorded trace."""
    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare_run(SOURCE)
    _, trace = bundle.run(inputs, keep_output=False)
    return bundle, inputs, trace


@pytest.fixture(scope="module")
def page_file(page_run, tmp_path_factory):
    """The page of that run, written to a file."""
    bundle, inputs, trace = page_run
    path = tmp_path_factory.mktemp("page") / "page.html"
    write_page(path, page_data(bundle, trace, inputs, run_args=run_arguments("en-hi", SOURCE)))
    return path
