"""The interactive page in a real browser, in both engines (tests/scratchformer/page_browsers.py): Debian's Chromium
(tests/scratchformer/chromium.py, the DevTools protocol) and Firefox ESR (tests/scratchformer/firefox.py, WebDriver
BiDi), headless and offline, the same test body for both. It loads the page from disk, draws the steps, reacts to
real clicks, hovers and keys, shows a stored derivation, and asks the network for nothing; the request list that
says so catches a page that does ask."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from scratchformer.analyses import derive
from scratchformer.page import notebook_html, page_data, page_html
from scratchformer.plotdata.cells import cell_index
from tests.scratchformer.page_browsers import READY, canvas, cell_centre

# engine_browser, page_run and page_file: tests/scratchformer/conftest.py


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # IHDR: width, height


def test_the_page_draws_the_steps_and_the_stepper_changes_the_map(page_run, page_file, engine_browser):
    trace = page_run[2]
    b = engine_browser
    b.requests.clear()
    b.console.clear()
    b.open(page_file)
    b.wait_for(READY, timeout=30)
    print(f"en-hi page in {b.engine}: data-ready {b.evaluate('document.body.dataset.readyMs')} ms after navigation "
          "started")  # fmt: skip
    assert b.evaluate("document.querySelectorAll('#sf-steps li').length") == len(trace)
    assert b.evaluate("document.getElementById('sf-counter').textContent") == f"Step 1 of {len(trace)}"
    assert b.evaluate("document.getElementById('sf-translation').textContent") == page_run[1].translation
    assert b.evaluate("document.querySelectorAll('.sf-block').length") > 20  # the architecture strip
    width, height = _png_size(b.screenshot())
    assert (width, height) == tuple(b.evaluate("[innerWidth, innerHeight].map((v) => v * devicePixelRatio)"))
    before = canvas(b)
    b.click(*b.centre_of("#sf-next"))  # a real mouse click on the stepper
    b.wait_for("document.body.dataset.step === '1'")
    assert b.evaluate("document.getElementById('sf-title').textContent").endswith(trace[1].title)
    assert canvas(b) != before  # the token ids' map gave way to the embedding's
    b.key("ArrowRight", "ArrowRight", 39)
    b.wait_for("document.body.dataset.step === '2'")
    b.key("ArrowLeft", "ArrowLeft", 37)
    b.wait_for("document.body.dataset.step === '1'")
    assert b.evaluate("document.body.dataset.error") is None and not b.console
    assert b.requests == []


def test_hovering_a_cell_shows_its_value_and_a_click_its_derivation(page_run, page_file, engine_browser):
    bundle, _, trace = page_run
    b = engine_browser
    b.requests.clear()
    b.open(page_file)
    b.wait_for(READY, timeout=30)
    step = trace["decoder.1.cross_attn.weights"]
    b.click(*b.centre_of(f"#sf-steps li:nth-child({step.index + 1})"))  # a click on the step list
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    b.evaluate("(() => { const s = document.getElementById('sf-head'); s.value = '2';"
               " s.dispatchEvent(new Event('change')); })()")  # head 3, as the select reports a choice
    b.wait_for("document.body.dataset.head === '2'")
    for row, col in ((3, 4), (1, 2), (1, 2)):  # the same cell twice: a second hover there still reads it
        b.evaluate("document.getElementById('sf-readout').textContent = ''")
        b.hover(*cell_centre(b, row, col))
        readout = b.evaluate("document.getElementById('sf-readout').textContent")
        target, source = trace.target_tokens[0][row], trace.source_tokens[0][col]
        assert readout.startswith(f"Head 3 · “{target}” ({row}) · “{source}” ({col}) = ")
        shown = float(readout.rsplit("= ", 1)[1].replace("−", "-"))
        value = float(step.tensor[0, 2, row, col])
        assert shown == pytest.approx(float(np.float16(value)), rel=5e-4)  # float16, printed to 4 figures
    assert b.evaluate("!document.getElementById('sf-tip').hidden")
    row, col = 3, 4
    b.click(*cell_centre(b, row, col))
    text = b.evaluate("document.getElementById('sf-derivation').textContent")
    d = derive.compute(bundle, trace, step.name, cell_index(step, 0, 2, row, col))
    assert d.expression in text and d.formula in text and "equal" in text
    assert f"{step.shape[3]} cells of step {step.index}" in text  # the masked scores it reads, linked
    assert b.requests == []


def test_a_cell_without_a_stored_derivation_shows_the_command_for_it(page_run, page_file, engine_browser):
    trace = page_run[2]
    b = engine_browser
    b.open(page_file)
    b.wait_for(READY, timeout=30)
    step = trace["encoder.1.ffn.hidden"]  # 6 × 256 cells: over the page's budget of derivations
    b.click(*b.centre_of(f"#sf-steps li:nth-child({step.index + 1})"))
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    b.click(*cell_centre(b, 2, 5))
    text = b.evaluate("document.getElementById('sf-derivation').textContent")
    assert f"scratchformer derive --model en-hi --source 'the girl eats an apple' {step.name} 0 2 5" in text


def test_the_request_list_has_what_the_page_and_its_iframes_ask_for(tmp_path, engine_browser):
    """The checks above can fail: an image, a script, a fetch and an iframe's image, each for an address elsewhere,
    are all caught, with their addresses as the page wrote them (the proxy leads nowhere: nothing leaves)."""
    page = tmp_path / "remote.html"
    page.write_text('<html><body><img src="http://198.51.100.7/x.png"><script src="http://198.51.100.8/s.js">'
                    '</script><iframe srcdoc="<img src=&quot;http://198.51.100.9/in-frame.png&quot;>"></iframe>'
                    '<script>fetch("https://198.51.100.10/f").catch(() => 0); document.body.dataset.ready = "1"'
                    "</script></body></html>")  # fmt: skip
    b = engine_browser
    b.requests.clear()
    b.open(page)
    b.wait_for(READY)
    wanted = ("http://198.51.100.7/x.png", "http://198.51.100.8/s.js", "http://198.51.100.9/in-frame.png",
              "https://198.51.100.10/f")  # fmt: skip
    b.wait_for("true")  # one more round trip, for events still on their way
    for url in wanted:
        assert url in b.requests, b.requests


def test_two_views_in_one_notebook_do_not_interfere(page_run, tmp_path, engine_browser):
    bundle, inputs, trace = page_run
    other_inputs = bundle.prepare_run("we are friends")
    _, other = bundle.run(other_inputs, keep_output=False)
    first = notebook_html(page_html(page_data(bundle, trace, inputs, derive_cells=0)), height=500)
    second = notebook_html(page_html(page_data(bundle, other, other_inputs, derive_cells=0)), height=500)
    notebook = tmp_path / "notebook.html"
    notebook.write_text(f"<html><body><div>{first}</div><div>{second}</div></body></html>", encoding="utf-8")
    b = engine_browser
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


def test_a_link_to_a_step_opens_there_and_the_address_follows(page_run, page_file, engine_browser, tmp_path):
    trace = page_run[2]
    b = engine_browser
    linked = tmp_path / "linked.html"  # another file: a new document, not a jump within the one already open
    linked.write_bytes(page_file.read_bytes())
    b.open(linked.as_uri() + "#decoder.1.cross_attn.weights")
    b.wait_for(READY, timeout=30)
    assert b.evaluate("document.body.dataset.step") == str(trace["decoder.1.cross_attn.weights"].index)
    b.key("ArrowRight", "ArrowRight", 39)
    b.wait_for(f"document.body.dataset.step === '{trace['decoder.1.cross_attn.weights'].index + 1}'")
    following = trace[trace["decoder.1.cross_attn.weights"].index + 1].name
    assert b.evaluate("decodeURIComponent(location.hash)") == "#" + following
    assert b.requests == []
