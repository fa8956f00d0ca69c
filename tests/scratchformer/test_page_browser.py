"""The interactive page in a real browser: Debian's Chromium, headless, offline, driven over the DevTools protocol
(tests/scratchformer/chromium.py). It loads the page from disk, draws the steps, reacts to real clicks, hovers and
keys, shows a stored derivation, and asks the network for nothing."""

from __future__ import annotations

import numpy as np
import pytest

from scratchformer.analyses import derive
from scratchformer.loading.bundle import load_model
from scratchformer.page import notebook_html, page_data, page_html, run_arguments, write_page
from scratchformer.plotdata.cells import cell_index
from tests.scratchformer.chromium import NOT_INSTALLED, Browser, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None, reason=NOT_INSTALLED)

SOURCE = "the girl eats an apple"
READY = "document.body.dataset.ready === '1'"


@pytest.fixture(scope="module")
def run():
    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare_run(SOURCE)
    _, trace = bundle.run(inputs, keep_output=False)
    return bundle, inputs, trace


@pytest.fixture(scope="module")
def page_file(run, tmp_path_factory):
    bundle, inputs, trace = run
    path = tmp_path_factory.mktemp("page") / "page.html"
    write_page(path, page_data(bundle, trace, inputs, run_args=run_arguments("en-hi", SOURCE)))
    return path


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def _canvas(b: Browser) -> str:
    """The drawn map, as PNG data (changes when the map does)."""
    return b.evaluate("document.querySelector('#sf-maps canvas').toDataURL()")


def _cell_centre(b: Browser, row: int, col: int) -> tuple[float, float]:
    """Viewport point of a cell's centre on the (single) map."""
    x, y = b.evaluate("(() => { const c = document.querySelector('#sf-maps canvas');"
                      " c.scrollIntoView({block: 'center'}); const r = c.getBoundingClientRect(), s = c.sf;"
                      f" return [r.left + s.left + ({col} + 0.5) * s.cs, r.top + s.top + ({row} + 0.5) * s.cs]; }})()")
    return x, y


def test_the_page_draws_the_steps_and_the_stepper_changes_the_map(run, page_file, browser):
    trace = run[2]
    b = browser
    b.requests.clear()
    b.open(page_file)
    b.wait_for(READY, timeout=20)
    print(f"en-hi page: data-ready {b.evaluate('document.body.dataset.readyMs')} ms after navigation started")
    assert b.evaluate("document.querySelectorAll('#sf-steps li').length") == len(trace)
    assert b.evaluate("document.getElementById('sf-counter').textContent") == f"Step 1 of {len(trace)}"
    assert b.evaluate("document.getElementById('sf-translation').textContent") == run[1].translation
    assert b.evaluate("document.querySelectorAll('.sf-block').length") > 20  # the architecture strip
    before = _canvas(b)
    b.click(*b.centre_of("#sf-next"))  # a real mouse click on the stepper
    b.wait_for("document.body.dataset.step === '1'")
    assert b.evaluate("document.getElementById('sf-title').textContent").endswith(trace[1].title)
    assert _canvas(b) != before  # the token ids' map gave way to the embedding's
    b.key("ArrowRight", "ArrowRight", 39)
    b.wait_for("document.body.dataset.step === '2'")
    b.key("ArrowLeft", "ArrowLeft", 37)
    b.wait_for("document.body.dataset.step === '1'")
    assert b.evaluate("document.body.dataset.error") is None and not b.console
    assert b.requests == []


def test_hovering_a_cell_shows_its_value_and_a_click_its_derivation(run, page_file, browser):
    bundle, _, trace = run
    b = browser
    b.requests.clear()
    b.open(page_file)
    b.wait_for(READY, timeout=20)
    step = trace["decoder.1.cross_attn.weights"]
    b.click(*b.centre_of(f"#sf-steps li:nth-child({step.index + 1})"))  # a click on the step list
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    b.evaluate("(() => { const s = document.getElementById('sf-head'); s.value = '2';"
               " s.dispatchEvent(new Event('change')); })()")  # head 3, as the select reports a choice
    b.wait_for("document.body.dataset.head === '2'")
    row, col = 3, 4
    b.hover(*_cell_centre(b, row, col))
    readout = b.evaluate("document.getElementById('sf-readout').textContent")
    target, source = trace.target_tokens[0][row], trace.source_tokens[0][col]
    assert readout.startswith(f"Head 3 · “{target}” ({row}) · “{source}” ({col}) = ")
    shown = float(readout.rsplit("= ", 1)[1].replace("−", "-"))
    value = float(step.tensor[0, 2, row, col])
    assert shown == pytest.approx(float(np.float16(value)), rel=5e-4)  # float16, printed to 4 figures
    assert b.evaluate("!document.getElementById('sf-tip').hidden")
    b.click(*_cell_centre(b, row, col))
    text = b.evaluate("document.getElementById('sf-derivation').textContent")
    d = derive.compute(bundle, trace, step.name, cell_index(step, 0, 2, row, col))
    assert d.expression in text and d.formula in text and "equal" in text
    assert f"{step.shape[3]} cells of step {step.index}" in text  # the masked scores it reads, linked
    assert b.requests == []


def test_a_cell_without_a_stored_derivation_shows_the_command_for_it(run, page_file, browser):
    trace = run[2]
    b = browser
    b.open(page_file)
    b.wait_for(READY, timeout=20)
    step = trace["encoder.1.ffn.hidden"]  # 6 × 256 cells: over the page's budget of derivations
    b.click(*b.centre_of(f"#sf-steps li:nth-child({step.index + 1})"))
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    b.click(*_cell_centre(b, 2, 5))
    text = b.evaluate("document.getElementById('sf-derivation').textContent")
    assert f"scratchformer derive --model en-hi --source 'the girl eats an apple' {step.name} 0 2 5" in text


def test_the_recorder_sees_a_request_when_a_page_makes_one(tmp_path, browser):
    """The check above can fail: a page that loads an image from an address is caught (the proxy leads nowhere,
    so nothing leaves the machine)."""
    page = tmp_path / "remote.html"
    page.write_text('<html><body><img src="http://198.51.100.7/x.png"><script>document.body.dataset.ready = "1"'
                    "</script></body></html>")  # fmt: skip
    browser.requests.clear()
    browser.open(page)
    browser.wait_for(READY)
    assert any("198.51.100.7" in url for url in browser.requests)


def test_two_views_in_one_notebook_do_not_interfere(run, tmp_path, browser):
    bundle, inputs, trace = run
    other_inputs = bundle.prepare_run("we are friends")
    _, other = bundle.run(other_inputs, keep_output=False)
    first = notebook_html(page_html(page_data(bundle, trace, inputs, derive_cells=0)), height=500)
    second = notebook_html(page_html(page_data(bundle, other, other_inputs, derive_cells=0)), height=500)
    notebook = tmp_path / "notebook.html"
    notebook.write_text(f"<html><body><div>{first}</div><div>{second}</div></body></html>", encoding="utf-8")
    b = browser
    b.requests.clear()
    b.open(notebook)
    frames = "[...document.querySelectorAll('iframe')].map((f) => f.contentDocument.body.dataset"
    b.wait_for(f"{frames}.ready).every((r) => r === '1')", timeout=20)
    x, y = b.evaluate("(() => { const f = document.querySelector('iframe'); f.scrollIntoView();"
                      " const a = f.getBoundingClientRect(), e = f.contentDocument.getElementById('sf-next')"
                      ".getBoundingClientRect();"
                      " return [a.left + e.left + e.width / 2, a.top + e.top + e.height / 2]; })()")
    b.click(x, y)  # Next in the first view only
    b.wait_for(f"{frames}.step)[0] === '1'")
    assert b.evaluate(f"{frames}.step)") == ["1", "0"]
    titles = b.evaluate("[...document.querySelectorAll('iframe')].map((f) => "
                        "f.contentDocument.getElementById('sf-heading').textContent)")  # fmt: skip
    assert titles == ["scratchformer · en-hi"] * 2
    tokens = b.evaluate("[...document.querySelectorAll('iframe')].map((f) => [...f.contentDocument"
                        ".querySelectorAll('#sf-run .sf-tokens')[0].querySelectorAll('span')]"
                        ".map((s) => s.textContent))")
    assert tokens == [trace.source_tokens[0], other.source_tokens[0]]
    assert b.requests == []


def test_a_link_to_a_step_opens_there_and_the_address_follows(run, page_file, browser, tmp_path):
    trace = run[2]
    b = browser
    linked = tmp_path / "linked.html"  # another file: a new document, not a jump within the one already open
    linked.write_bytes(page_file.read_bytes())
    b.open(linked.as_uri() + "#decoder.1.cross_attn.weights")
    b.wait_for(READY, timeout=20)
    assert b.evaluate("document.body.dataset.step") == str(trace["decoder.1.cross_attn.weights"].index)
    b.key("ArrowRight", "ArrowRight", 39)
    b.wait_for(f"document.body.dataset.step === '{trace['decoder.1.cross_attn.weights'].index + 1}'")
    following = trace[trace["decoder.1.cross_attn.weights"].index + 1].name
    assert b.evaluate("decodeURIComponent(location.hash)") == "#" + following
    assert b.requests == []
