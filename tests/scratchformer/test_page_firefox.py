"""The browser drivers themselves (tests/scratchformer/chromium.py and firefox.py; the page's own checks, run in both
engines, are test_page_browser.py's): evaluate() gives the same plain values in both, and Firefox leaves no process
or profile behind, also when it cannot start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scratchformer import firefox

# engine_browser: tests/scratchformer/conftest.py


def test_evaluate_awaits_a_promise_and_gives_plain_values(tmp_path, engine_browser):
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
