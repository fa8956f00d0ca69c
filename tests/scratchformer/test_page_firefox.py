"""The interactive page in a second engine: Debian's Firefox ESR, headless and offline, driven over WebDriver BiDi
(tests/scratchformer/firefox.py). The page checks take `engine_browser` (tests/scratchformer/page_browsers.py) and
so run in Chromium and in Firefox alike, the same test body for both: the page draws, steps with a click and the
arrow keys, shows a cell's value on hover and its derivation on a click, and asks the network for nothing. The
last tests check the Firefox driver itself: its request list, and that it leaves no process or profile behind."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from scratchformer.analyses import derive
from scratchformer.plotdata.cells import cell_index
from tests.scratchformer import firefox
from tests.scratchformer.page_browsers import READY, canvas, cell_centre, engine_browser, page_file, run  # noqa: F401


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # IHDR: width, height


def test_the_page_draws_and_a_click_and_the_arrow_keys_step_it(run, page_file, engine_browser):  # noqa: F811
    trace = run[2]
    b = engine_browser
    b.requests.clear()
    b.console.clear()
    b.open(page_file)
    b.wait_for(READY, timeout=30)
    print(f"{b.engine}: data-ready {b.evaluate('document.body.dataset.readyMs')} ms after navigation started")
    assert b.evaluate("document.querySelectorAll('#sf-steps li').length") == len(trace)
    assert b.evaluate("document.getElementById('sf-counter').textContent") == f"Step 1 of {len(trace)}"
    assert b.evaluate("document.getElementById('sf-translation').textContent") == run[1].translation
    width, height = _png_size(b.screenshot())
    assert (width, height) == tuple(b.evaluate("[innerWidth, innerHeight].map((v) => v * devicePixelRatio)"))
    before = canvas(b)
    b.click(*b.centre_of("#sf-next"))  # a real mouse click on Next
    b.wait_for("document.body.dataset.step === '1'")
    assert b.evaluate("document.getElementById('sf-title').textContent").endswith(trace[1].title)
    assert canvas(b) != before  # the token ids' map gave way to the embedding's
    b.key("ArrowRight", "ArrowRight", 39)
    b.wait_for("document.body.dataset.step === '2'")
    b.key("ArrowLeft", "ArrowLeft", 37)
    b.wait_for("document.body.dataset.step === '1'")
    assert b.evaluate("document.body.dataset.error") is None and not b.console
    assert b.requests == []


def test_hovering_a_cell_shows_its_value_and_a_click_its_derivation(run, page_file, engine_browser):  # noqa: F811
    bundle, _, trace = run
    b = engine_browser
    b.requests.clear()
    b.open(page_file)
    b.wait_for(READY, timeout=30)
    step = trace["decoder.1.cross_attn.weights"]
    b.click(*b.centre_of(f"#sf-steps li:nth-child({step.index + 1})"))  # a click on the step list
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    b.evaluate("(() => { const s = document.getElementById('sf-head'); s.value = '2';"
               " s.dispatchEvent(new Event('change')); })()")  # fmt: skip
    b.wait_for("document.body.dataset.head === '2'")
    for row, col in ((3, 4), (1, 2), (1, 2)):  # the same cell twice: a second hover there still reads it
        b.evaluate("document.getElementById('sf-readout').textContent = ''")
        b.hover(*cell_centre(b, row, col))
        readout = b.evaluate("document.getElementById('sf-readout').textContent")
        target, source = trace.target_tokens[0][row], trace.source_tokens[0][col]
        assert readout.startswith(f"Head 3 · “{target}” ({row}) · “{source}” ({col}) = ")
        shown = float(readout.rsplit("= ", 1)[1].replace("−", "-"))
        assert shown == pytest.approx(float(np.float16(step.tensor[0, 2, row, col])), rel=5e-4)
    assert b.evaluate("!document.getElementById('sf-tip').hidden")
    row, col = 3, 4
    b.click(*cell_centre(b, row, col))
    text = b.evaluate("document.getElementById('sf-derivation').textContent")
    d = derive.compute(bundle, trace, step.name, cell_index(step, 0, 2, row, col))
    assert d.expression in text and d.formula in text and "equal" in text
    assert b.requests == []


def test_the_request_list_has_what_the_page_and_its_iframes_ask_for(tmp_path, engine_browser):  # noqa: F811
    """The check above can fail: an image, a script, a fetch and an iframe's image, each for an address elsewhere,
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


def test_evaluate_awaits_a_promise_and_gives_plain_values(tmp_path, engine_browser):  # noqa: F811
    b = engine_browser
    page = tmp_path / "plain.html"
    page.write_text("<html><body></body></html>")
    b.open(page)
    assert b.evaluate("new Promise((r) => setTimeout(() => r({a: [1, 'b', null]}), 50))", await_promise=True) == {
        "a": [1, "b", None]
    }
    assert b.evaluate("undefined") is None and b.evaluate("1.5") == 1.5 and b.evaluate("true") is True


@pytest.mark.skipif(firefox.find_firefox() is None, reason=firefox.NOT_INSTALLED)
def test_firefox_leaves_no_process_and_no_profile_behind():
    with firefox.Browser() as b:
        profile, pid = Path(b.profile), b.proc.pid
        assert (profile / "user.js").is_file()
        b.evaluate("1")
    assert not profile.exists()
    assert b.proc.returncode is not None
    assert _live_in_group(pid) == []  # nor any of its content processes


def _live_in_group(group: int) -> list[str]:
    """The processes of a process group that still run (ended ones waiting to be reaped, state Z, left out)."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc to list processes in")
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended meanwhile
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == group and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            live.append(name)
    return live


def test_a_firefox_that_cannot_start_leaves_no_profile_behind(monkeypatch, tmp_path):
    monkeypatch.setenv("FIREFOX", "/bin/false")
    browser = firefox.Browser(startup_timeout=20)
    with pytest.raises(firefox.ProtocolError, match="ended"), browser:
        pass
    assert not Path(browser.profile).exists()
