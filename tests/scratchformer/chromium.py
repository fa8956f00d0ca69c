"""Test tooling: a headless Chromium driven over the DevTools protocol through a pipe, with no extra package.

Chromium started with `--remote-debugging-pipe` reads protocol messages on file descriptor 3 and writes its
answers and events on 4; each message is one JSON object followed by a NUL byte. `Browser` starts it with a
fresh profile and no network (a proxy that leads nowhere, and the Network domain's offline emulation), attaches
to its first page and offers what the page tests need: open a file, evaluate JavaScript, dispatch real mouse and
key events, and the list of every request the page made that was not for a file: or data: URL. Every wait is
bounded by a timeout (the waits and what runs on evaluate() alone are tests/scratchformer/browser_base.py's, shared
with the Firefox driver). `Browser(loopback=True)` lets the page reach this machine's own servers (a local Jupyter
server, tests/test_notebook_browser.py) and still nothing beyond: the proxy that leads nowhere stays.

    with Browser() as b:
        b.open(path)                                   # file:// URL, waits for the load event
        b.wait_for("document.body.dataset.ready === '1'")
        b.evaluate("document.title")
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tests.scratchformer.browser_base import BrowserBase, ProtocolError, find_executable

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NOT_INSTALLED = "Chromium is not installed; scripts/setup.sh installs it on Debian."


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, or None. $CHROMIUM names one explicitly."""
    return find_executable("CHROMIUM", CANDIDATES)


# argv: read end, write end, executable, arguments. Both ends first move to fresh numbers (from 10, closed on exec),
# so that placing one on 3 or 4 can never overwrite the other before it has moved; Chromium keeps only 3 and 4.
TRAMPOLINE = """
import fcntl, os, sys
given = [int(fd) for fd in sys.argv[1:3]]
moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in given]
for fd in given:
    os.close(fd)
os.dup2(moved[0], 3)
os.dup2(moved[1], 4)
os.execv(sys.argv[3], sys.argv[3:])
"""


class Browser(BrowserBase):
    """One headless Chromium and one page target, spoken to over the DevTools pipe."""

    NAME = "Chromium"

    def __init__(self, timeout: float = 30.0, width: int = 1280, height: int = 900, loopback: bool = False) -> None:
        # with loopback, Chromium never sends loopback requests through a proxy: only those get through
        super().__init__(timeout, width, height, loopback, prefix="scratchformer-chromium-")
        self.session: str | None = None

    # --- start and stop -------------------------------------------------------------------------------------

    def start(self) -> None:
        exe = find_chromium()
        if exe is None:
            raise RuntimeError(NOT_INSTALLED)
        to_browser_r, to_browser_w = os.pipe()  # we write commands; Chromium reads them on fd 3
        from_browser_r, from_browser_w = os.pipe()  # Chromium writes on fd 4; we read
        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "--metrics-recording-only",
                "--proxy-server=127.0.0.1:9",  # a proxy that leads nowhere: no request can leave the machine
                "--allow-file-access-from-files", f"--window-size={self.size[0]},{self.size[1]}"]

        # Chromium expects the pipe on fds 3 and 4: a small Python trampoline moves the two ends there and becomes
        # Chromium (a shell's `3<&N` takes only one-digit N in dash; preexec_fn is unsafe with threads)
        self._log = open(os.path.join(self.profile, "chromium.log"), "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, "-c", TRAMPOLINE, str(to_browser_r), str(from_browser_w), exe,
                                      *args], stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     pass_fds=(to_browser_r, from_browser_w))  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        target_id = page["targetId"] if page else self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target_id, flatten=True)["sessionId"]
        self.page("Page.enable")
        self.page("Runtime.enable")
        self.page("Network.enable")
        if not self.loopback:
            self.page("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1,
                      uploadThroughput=-1)  # fmt: skip

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._send("Browser.close", {}, None)
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a browser that will not close is killed below
                pass
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for f in (getattr(self, "_out", None), getattr(self, "_in", None), getattr(self, "_log", None)):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        shutil.rmtree(self.profile, ignore_errors=True)

    # --- the protocol ---------------------------------------------------------------------------------------

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._in.read(1 << 16)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                self._answered(None)
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    self._answered(message)
                else:
                    self._event(message)

    def _event(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                self.requests.append(url)
        elif method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.console.append("exception: " + details.get("exception", {}).get("description", details["text"]))
        self._events.put(message)

    def _send(self, method: str, params: dict, session: str | None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._out.write(json.dumps(message).encode() + b"\0")
        return self._next_id

    def call(self, method: str, session: str | None = None, timeout: float | None = None, **params) -> dict:
        """Send one command and wait (bounded) for its answer; a protocol error raises ProtocolError."""
        answer = self._answer(self._send(method, params, session), method, timeout)
        if "error" in answer:
            raise ProtocolError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def log_tail(self, lines: int = 5) -> str:
        """The last lines Chromium wrote on stdout and stderr, for failure messages (its D-Bus noise left out)."""
        try:
            text = Path(self.profile, "chromium.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join([line for line in text.splitlines() if "dbus" not in line][-lines:])

    def page(self, method: str, **params) -> dict:
        """A command to the attached page."""
        return self.call(method, self.session, **params)

    # --- what the tests use ---------------------------------------------------------------------------------

    def open(self, path: Path | str, timeout: float | None = None) -> None:
        """Navigate to a file (or a file: or http: URL, e.g. with a #fragment) and wait for its load event."""
        self.page("Page.navigate", url=self._navigation_url(path))
        self.wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str, await_promise: bool = False):
        """The value of a JavaScript expression in the page (JSON-able values only)."""
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in result:
            raise ProtocolError(f"{expression!r} threw: {result['exceptionDetails'].get('exception', {})}")
        return result["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A real left click (mouse moved, pressed and released) at viewport point (x, y)."""
        self.page("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        self.page("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left", clickCount=1)
        self.page("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left", clickCount=1)

    def hover(self, x: float, y: float) -> None:
        self.page("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def key(self, key: str, code: str, key_code: int) -> None:
        """A key press and release (e.g. "ArrowRight", "ArrowRight", 39)."""
        for kind in ("rawKeyDown", "keyUp"):
            self.page("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=key_code)

    def screenshot(self) -> bytes:
        """The viewport as PNG bytes."""
        return base64.b64decode(self.page("Page.captureScreenshot", format="png")["data"])
