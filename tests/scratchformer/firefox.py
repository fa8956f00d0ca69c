"""Test tooling: a headless Firefox driven over WebDriver BiDi, the second engine the page tests run in.

Firefox has no pipe like Chromium's: started with `--remote-debugging-port 0` it opens a WebSocket server on a
free loopback port and says where on stderr ("WebDriver BiDi listening on ws://127.0.0.1:PORT"). A client connects
to ws://127.0.0.1:PORT/session and speaks JSON over it: a command is `{"id": N, "method": "module.command",
"params": {...}}`, its answer `{"type": "success" | "error", "id": N, ...}`, and events the session subscribed to
arrive as `{"type": "event", "method": ..., "params": ...}`. A command is sent to one browsing context (a tab or
an iframe in it) by naming its id in the params. No geckodriver is needed: Firefox itself is the BiDi server.

`Browser` here has the same names and behaviour as tests/scratchformer/chromium.py's wherever the page tests use
them: open a file and wait for its load, evaluate JavaScript (awaiting a promise if asked), wait for a condition,
dispatch real mouse and key events, take a screenshot, and keep the list of every request the page (its tab and
the iframes in it) made that was not for a file: or data: URL. The profile is fresh and made to stay quiet:
a proxy that leads nowhere for every address (loopback too, unless `loopback=True`), and no telemetry, updates,
captive-portal checks, Remote Settings, Safe Browsing or Normandy; Firefox's own background requests (no browsing
context) are left out of the list in any case. Every wait is bounded by a timeout; the process (with its content
processes) and the profile go away in close(), also when starting failed. The waits and what runs on evaluate()
alone are tests/scratchformer/browser_base.py's, shared with the Chromium driver.

    with Browser() as b:
        b.open(path)                                   # file:// URL, waits for the load event
        b.wait_for("document.body.dataset.ready === '1'")
        b.evaluate("document.title")

Differences from Chromium a test author should know are listed in FIREFOX_NOTES below.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from tests.scratchformer.browser_base import BrowserBase, ProtocolError, find_executable

CANDIDATES = ("firefox-esr", "firefox")
NOT_INSTALLED = "Firefox is not installed; scripts/setup.sh installs firefox-esr on Debian."

FIREFOX_NOTES = """
- evaluate() gives JSON-like values as Chromium's returnByValue does: numbers, strings, booleans, None (undefined
  and null), lists, dicts; an object with no such value (a DOM node, a function, a promise not awaited, a window)
  comes back as {}, a Map as a dict, a Set as a list, NaN and the infinities as Python's floats.
- Input events are dispatched before the command answers (as in Chromium): a handler's effect can be read at once.
- Mouse coordinates are CSS pixels of the viewport and must lie inside it (else "move target out of bounds");
  scroll the element into view first, as centre_of() does. Firefox's MouseEvent.clientX/Y are whole pixels: a
  fractional point is rounded.
- A pointer moved to the point it already is at dispatches no mousemove (the pointer's position is kept between
  calls); hover() moves one pixel aside first, so a second hover() on the same cell still reaches the page.
- `console` also gets Firefox's own errors about the page (a blocked cross-origin request, a CSP refusal), as
  "exception: ..." lines; Chromium's list has only console calls and uncaught exceptions.
- A page read from a file is a secure context in Firefox (isSecureContext is true; in Chromium too): left alone,
  Firefox would fetch its http: images as https:, which the profile turns off so the request list keeps the
  addresses as written.
- Firefox refuses "unsafe" ports (1, 9, 25, ...) before any request is made, so a page meant to make a request
  the recorder sees must aim at an ordinary port (80 by default).
"""
LISTENING = re.compile(r"WebDriver BiDi listening on (ws://\S+)")

# Written into the fresh profile's user.js (read at every start, over prefs.js). Most of these Firefox's remote
# agent would also set itself ("recommended preferences"); they are here so the profile is quiet whatever it does.
QUIET_PREFS = {
    # every request goes to a proxy that leads nowhere (port 9, discard: nothing listens there)
    "network.proxy.type": 1,
    "network.proxy.http": "127.0.0.1",
    "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1",
    "network.proxy.ssl_port": 9,
    "network.proxy.socks": "127.0.0.1",
    "network.proxy.socks_port": 9,
    "network.proxy.share_proxy_settings": True,
    "network.proxy.no_proxies_on": "",
    "network.proxy.allow_hijacking_localhost": True,  # loopback too (Firefox otherwise never proxies it)
    "network.proxy.failover_direct": False,  # a proxy that does not answer is never gone round
    # a page read from a file counts as secure, so Firefox would record its http: images as https: ones; the
    # list of requests keeps the addresses as the page wrote them
    "security.mixed_content.upgrade_display_content": False,
    "dom.security.https_first": False,
    "dom.security.https_first_schemeless": False,
    "network.trr.mode": 5,  # no DNS over HTTPS
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "network.http.speculative-parallel-limit": 0,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    # telemetry, studies, experiments
    "datareporting.healthreport.uploadEnabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.usage.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False,
    "toolkit.telemetry.archive.enabled": False,
    "toolkit.telemetry.server": "data:,",
    "browser.ping-centre.telemetry": False,
    "browser.newtabpage.activity-stream.telemetry": False,
    "browser.newtabpage.activity-stream.feeds.telemetry": False,
    "app.normandy.enabled": False,
    "app.normandy.api_url": "",
    "app.shield.optoutstudies.enabled": False,
    "messaging-system.rsexperimentloader.enabled": False,
    "nimbus.rollouts.enabled": False,
    # updates, add-ons, plugins
    "app.update.auto": False,
    "app.update.disabledForTesting": True,
    "app.update.checkInstallTime": False,
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "extensions.systemAddon.update.enabled": False,
    "extensions.systemAddon.update.url": "",
    "extensions.blocklist.enabled": False,
    "media.gmp-manager.url": "",
    "media.gmp-gmpopenh264.enabled": False,
    "media.gmp-widevinecdm.enabled": False,
    "media.gmp-manager.updateEnabled": False,
    "media.gmp-manager.chromium-update-url": "",  # else Widevine is asked of update.googleapis.com
    "media.gmp-provider.enabled": False,
    "media.eme.enabled": False,
    # Remote Settings (a data: server, as Firefox's own test harnesses set it; a release build heeds it only with
    # MOZ_REMOTE_SETTINGS_DEVTOOLS=1 in the environment, which start() sets), Safe Browsing, certificate lists
    "services.settings.server": "data:,#remote-settings-dummy/v1",
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.blockedURIs.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.downloads.remote.enabled": False,
    "browser.safebrowsing.provider.google.updateURL": "",
    "browser.safebrowsing.provider.google4.updateURL": "",
    "browser.safebrowsing.provider.mozilla.updateURL": "",
    "security.OCSP.enabled": 0,
    "security.remote_settings.crlite_filters.enabled": False,
    "security.remote_settings.intermediates.enabled": False,
    # the start page, region and search lookups, push, accounts
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0,
    "browser.startup.homepage": "about:blank",
    "browser.startup.homepage_override.mstone": "ignore",
    "startup.homepage_welcome_url": "about:blank",
    "startup.homepage_welcome_url.additional": "",
    "browser.newtabpage.enabled": False,
    "browser.topsites.contile.enabled": False,
    "browser.region.network.url": "",
    "browser.region.update.enabled": False,
    "browser.search.geoip.url": "",
    "browser.search.update": False,
    "geo.provider.network.url": "",
    "dom.push.connection.enabled": False,
    "dom.push.serverURL": "",
    "identity.fxaccounts.enabled": False,
    "browser.discovery.enabled": False,
    "browser.aboutwelcome.enabled": False,
    # a crash or a slow start never turns into a dialog nobody can see
    "browser.sessionstore.resume_from_crash": False,
    "toolkit.startup.max_resumed_crashes": -1,
    "browser.tabs.warnOnClose": False,
    "dom.max_script_run_time": 0,
    # a page read from a file may read its own iframes' documents, as Chromium's --allow-file-access-from-files
    "security.fileuri.strict_origin_policy": False,
}

# WebDriver's key values for the named keys the tests press (single characters are sent as they are)
KEYS = {
    "Backspace": "\ue003", "Tab": "\ue004", "Enter": "\ue007", "Shift": "\ue008", "Control": "\ue009",
    "Alt": "\ue00a", "Escape": "\ue00c", " ": " ", "PageUp": "\ue00e", "PageDown": "\ue00f", "End": "\ue010",
    "Home": "\ue011", "ArrowLeft": "\ue012", "ArrowUp": "\ue013", "ArrowRight": "\ue014", "ArrowDown": "\ue015",
    "Delete": "\ue017", "Meta": "\ue03d",
}  # fmt: skip


def find_firefox() -> str | None:
    """The path of a Firefox executable (Debian's firefox-esr first), or None. $FIREFOX names one explicitly."""
    return find_executable("FIREFOX", CANDIDATES)


def user_js(prefs: dict) -> str:
    """A user.js text setting each preference."""
    return "".join(f"user_pref({json.dumps(name)}, {json.dumps(value)});\n" for name, value in prefs.items())


def from_remote(value: dict):
    """A BiDi RemoteValue (what script.evaluate answers) as a Python value, as Chromium's returnByValue would
    give it: numbers, strings, booleans, None for undefined and null, lists and dicts, {} for what has no value."""
    kind = value.get("type")
    if kind in ("undefined", "null"):
        return None
    if kind in ("string", "boolean"):
        return value["value"]
    if kind == "number":
        special = {"NaN": math.nan, "-0": -0.0, "Infinity": math.inf, "-Infinity": -math.inf}
        raw = value["value"]
        return special[raw] if isinstance(raw, str) else raw
    if kind == "bigint":
        return int(value["value"])
    if kind in ("array", "set"):
        return [from_remote(v) for v in value.get("value", [])]
    if kind in ("object", "map"):
        return {(k if isinstance(k, str) else str(from_remote(k))): from_remote(v) for k, v in value.get("value", [])}
    if kind == "date":
        return value["value"]
    return {}  # a node, window, function, promise, error, regexp...: nothing JSON-like to give


class Browser(BrowserBase):
    """One headless Firefox and one tab, spoken to over WebDriver BiDi."""

    NAME = "Firefox"

    def __init__(self, timeout: float = 30.0, width: int = 1280, height: int = 900, loopback: bool = False,
                 startup_timeout: float = 90.0) -> None:  # fmt: skip
        super().__init__(timeout, width, height, loopback, prefix="scratchformer-firefox-")
        self.startup_timeout = startup_timeout  # the first start in a fresh profile can take a while on 2 cores
        self.ws = None
        self._send_lock = threading.Lock()
        self._log_lines: deque[str] = deque(maxlen=200)
        self._url: str | None = None
        self.context: str | None = None  # the tab's browsing context
        self._family: set[str] = set()  # the tab and every iframe context created in it

    # --- start and stop -------------------------------------------------------------------------------------

    def start(self) -> None:
        import websocket  # websocket-client, in the test extra

        exe = find_firefox()
        if exe is None:
            raise RuntimeError(NOT_INSTALLED)
        prefs = dict(QUIET_PREFS)
        if self.loopback:  # this machine's own servers are reached directly; everything else still goes nowhere
            prefs["network.proxy.allow_hijacking_localhost"] = False
            prefs["network.proxy.no_proxies_on"] = "localhost, 127.0.0.1, [::1]"
        Path(self.profile, "user.js").write_text(user_js(prefs), encoding="utf-8")
        env = dict(os.environ, MOZ_CRASHREPORTER_DISABLE="1", MOZ_CRASHREPORTER_SHUTDOWN="1",
                   MOZ_DISABLE_AUTO_SAFE_MODE="1", MOZ_HEADLESS="1",
                   MOZ_REMOTE_SETTINGS_DEVTOOLS="1")  # fmt: skip
        args = [exe, "-headless", "--no-remote", "-profile", self.profile, "--remote-debugging-port", "0",
                "--remote-allow-hosts", "127.0.0.1,localhost", "about:blank"]  # fmt: skip
        # its own session (process group), so that close() can end the content processes with it
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)  # fmt: skip
        self._listening = threading.Event()
        self._output = threading.Thread(target=self._read_output, name="firefox-output", daemon=True)
        self._output.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._listening.wait(0.2):
            if self.proc.poll() is not None:
                raise ProtocolError(f"Firefox ended (status {self.proc.returncode}) before it listened: "
                                    f"{self.log_tail()}")  # fmt: skip
            if time.monotonic() > deadline:
                raise ProtocolError(f"Firefox did not listen for WebDriver BiDi within {self.startup_timeout} s: "
                                    f"{self.log_tail()}")  # fmt: skip
        # no Origin header: Firefox refuses a WebSocket handshake from an origin it was not told to allow
        self.ws = websocket.create_connection(self._url + "/session", timeout=self.startup_timeout,
                                              suppress_origin=True)  # fmt: skip
        self.ws.settimeout(None)  # the reader blocks until a message comes or close() shuts the socket
        self._reader = threading.Thread(target=self._read_loop, name="bidi-reader", daemon=True)
        self._reader.start()
        self.call("session.new", capabilities={}, timeout=self.startup_timeout)
        tree = self.call("browsingContext.getTree", maxDepth=0)["contexts"]
        self.context = tree[0]["context"] if tree else self.call("browsingContext.create", type="tab")["context"]
        self._family = {self.context}
        # events for this tab (and its iframes) only: Firefox's own requests belong to no browsing context
        self.call("session.subscribe", events=["network.beforeRequestSent", "log.entryAdded",
                                               "browsingContext.contextCreated", "browsingContext.load"],
                  contexts=[self.context])  # fmt: skip
        self.call("browsingContext.setViewport", context=self.context,
                  viewport={"width": self.size[0], "height": self.size[1]})  # fmt: skip

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.ws is not None:
                try:
                    self._send("browser.close", {})
                    self.proc.wait(timeout=15)
                except Exception:  # noqa: BLE001 - a browser that will not close is killed below
                    pass
            if self.proc.poll() is None:
                self._kill_group(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        if self.proc is not None:
            self._kill_group(signal.SIGKILL)  # content processes the main one left behind, if any
            if self.proc.poll() is None:
                self.proc.wait(timeout=10)
        if self.ws is not None:
            try:
                self.ws.shutdown()
            except Exception:  # noqa: BLE001 - already closed by the browser
                pass
        for thread in (getattr(self, "_reader", None), getattr(self, "_output", None)):
            if thread is not None:
                thread.join(timeout=5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _kill_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # the group is the main process's own (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass

    def _read_output(self) -> None:
        """Keeps Firefox's stdout and stderr (so that its pipe never fills) and finds the line with the address."""
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self._log_lines.append(line)
            found = LISTENING.search(line)
            if found and self._url is None:
                self._url = found.group(1)
                self._listening.set()

    def log_tail(self, lines: int = 5) -> str:
        """The last lines Firefox wrote on stdout and stderr, for failure messages."""
        return " | ".join(list(self._log_lines)[-lines:])

    # --- the protocol ---------------------------------------------------------------------------------------

    def _read_loop(self) -> None:
        while True:
            try:
                raw = self.ws.recv()
            except Exception:  # noqa: BLE001 - the socket closed: the browser ended or close() shut it
                raw = ""
            if not raw:
                self._answered(None)
                return
            message = json.loads(raw)
            if message.get("type") == "event":
                self._event(message)
            elif "id" in message and message["id"] is not None:
                self._answered(message)

    def _event(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "browsingContext.contextCreated":
            if params.get("parent") in self._family:
                self._family.add(params["context"])
        elif method == "network.beforeRequestSent":
            url = params["request"]["url"]
            if params.get("context") in self._family and not url.startswith(("file:", "data:", "about:")):
                self.requests.append(url)
        elif method == "log.entryAdded":
            if params.get("source", {}).get("context") in self._family:
                text = params.get("text") or ""
                self.console.append(("exception: " + text) if params.get("type") == "javascript" else text)
        self._events.put(message)

    def _send(self, method: str, params: dict) -> int:
        with self._send_lock:
            self._next_id += 1
            ident = self._next_id
            self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        return ident

    def call(self, method: str, timeout: float | None = None, **params) -> dict:
        """Send one command and wait (bounded) for its answer; an error answer raises ProtocolError."""
        answer = self._answer(self._send(method, params), method, timeout)
        if answer.get("type") == "error":
            raise ProtocolError(f"{method}: {answer.get('error')}: {answer.get('message')}")
        return answer.get("result", {})

    # --- what the tests use ---------------------------------------------------------------------------------

    def open(self, path: Path | str, timeout: float | None = None) -> None:
        """Navigate to a file (or a file: or http: URL, e.g. with a #fragment) and wait for its load event."""
        url, limit = self._navigation_url(path), timeout or self.timeout
        self.call("browsingContext.navigate", timeout=limit + 5, context=self.context, url=url, wait="complete")

    def evaluate(self, expression: str, await_promise: bool = False):
        """The value of a JavaScript expression in the page (JSON-able values only; see FIREFOX_NOTES)."""
        result = self.call("script.evaluate", expression=expression, target={"context": self.context},
                           awaitPromise=await_promise, resultOwnership="none")  # fmt: skip
        if result.get("type") == "exception":
            details = result.get("exceptionDetails", {})
            raise ProtocolError(f"{expression!r} threw: {details.get('text')}")
        return from_remote(result["result"])

    def _actions(self, *sources: dict) -> None:
        self.call("input.performActions", context=self.context, actions=list(sources))

    def _mouse(self, *steps: dict) -> dict:
        return {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": list(steps)}

    def click(self, x: float, y: float) -> None:
        """A real left click (mouse moved, pressed and released) at viewport point (x, y)."""
        self._actions(self._mouse({"type": "pointerMove", "x": x, "y": y}, {"type": "pointerDown", "button": 0},
                                  {"type": "pointerUp", "button": 0}))  # fmt: skip

    def hover(self, x: float, y: float) -> None:
        """The mouse moved to (x, y): from a pixel beside it, so that a mousemove is dispatched there even when
        the pointer already was at that point (see FIREFOX_NOTES)."""
        beside = x - 1 if x >= 1 else x + 1
        self._actions(self._mouse({"type": "pointerMove", "x": beside, "y": y},
                                  {"type": "pointerMove", "x": x, "y": y}))  # fmt: skip

    def key(self, key: str, code: str = "", key_code: int = 0) -> None:
        """A key press and release (e.g. "ArrowRight", "ArrowRight", 39: Chromium's arguments; Firefox needs only
        the key, its code and key code follow from it)."""
        value = KEYS.get(key, key)
        steps = [{"type": "keyDown", "value": value}, {"type": "keyUp", "value": value}]
        self._actions({"type": "key", "id": "keyboard", "actions": steps})

    def screenshot(self) -> bytes:
        """The viewport as PNG bytes."""
        return base64.b64decode(self.call("browsingContext.captureScreenshot", context=self.context)["data"])

