"""The example notebook as a user meets it: a local Jupyter server, the notebook opened in headless Chromium
(tests/scratchformer/chromium.py, over the DevTools pipe), every cell run from the UI.

- Live in JupyterLab: every cell runs, nothing is written on stderr (no red box), the figure of every head is no
  wider than its output area, and the interactive page's frame gets ready (`<body data-ready="1">`).
- Saved with its outputs and opened where it was never trusted (a teacher's file on a student's machine), in
  Notebook 7: the page's output shows the first step's picture and how to make it live, not a blank; the figure
  shows its PNG, within the output area.

The server runs on a port of the system's choosing, with a token, no browser, its own configuration and runtime
folders, and a temporary copy of examples/python-api.ipynb; it is stopped, its kernels with it, even when a check
fails. Skipped when JupyterLab, Notebook 7 or Chromium is not installed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (a test extra: pip install -e .[test]).")
pytest.importorskip("notebook", reason="Notebook 7 is not installed (a test extra: pip install -e .[test]).")

from tests.scratchformer.chromium import NOT_INSTALLED, Browser, find_chromium  # noqa: E402

# every wait below is bounded, and together they stay under this, so a slow machine fails a check and still stops
# the server (pytest-timeout would end the process without teardown)
pytestmark = [pytest.mark.skipif(find_chromium() is None, reason=NOT_INSTALLED), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "python-api.ipynb"
FIGURE_CELL, PAGE_CELL = 3, 6  # code cells (from 0): run.plot(…, head=None) and run.show()

# the notebook panel on show, and its code cells (JupyterLab and Notebook 7 alike: window.jupyterapp)
PANEL = "window.jupyterapp.shell.currentWidget"
CODE_CELLS = f"{PANEL}.content.widgets.filter((c) => c.model.type === 'code')"


# Linux: the server gets SIGTERM when the process that started it ends, even killed (it then stops its kernels),
# so a test run that dies leaves no server behind; the setting outlives exec. argv: the command to become.
WITH_PARENT = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
os.execv(sys.argv[1], sys.argv[1:])
"""


class JupyterServer:
    """`python -m jupyterlab` on 127.0.0.1, a port the system picks (port 0), a token, in a folder of its own."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.notebooks = home / "notebooks"
        self.runtime = home / "runtime"
        self.token = secrets.token_hex(16)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = home / "server.log"

    def start(self, timeout: float = 60.0) -> None:
        self.notebooks.mkdir(parents=True)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # this checkout's
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(self.home / "config"), JUPYTER_DATA_DIR=str(self.home / "data"),
                   JUPYTER_RUNTIME_DIR=str(self.runtime), IPYTHONDIR=str(self.home / "ipython"),
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
                   PYTHONPATH=path)  # fmt: skip
        args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", "--port=0",
                "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.notebooks}", "--ServerApp.terminals_enabled=False",
                "--LabApp.expose_app_in_browser=True", "--JupyterNotebookApp.expose_app_in_browser=True",
                "--LabApp.extension_manager=readonly", "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]  # fmt: skip
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--allow-root")  # CI containers run as root; the server refuses that unless told
        if sys.platform.startswith("linux"):
            args = [sys.executable, "-c", WITH_PARENT, *args]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # a session of its own: stop() ends the server and anything it started in its group
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:  # the server writes jpserver-PID.json once it listens
            info = self.runtime / f"jpserver-{self.proc.pid}.json"
            if info.is_file():
                try:
                    self.port = json.loads(info.read_text())["port"]
                    return
                except (ValueError, KeyError):
                    pass  # written, not yet complete
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Jupyter server ended (status {self.proc.returncode}): {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Jupyter server did not start within {timeout} s: {self.log_tail()}")
            time.sleep(0.1)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def log_tail(self, lines: int = 12) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM (the server shuts its kernels down), then SIGKILL to its group if it lingers; then any kernel
        still running from this server's runtime folder (kernels run in sessions of their own) is killed."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for pid in _processes_naming(str(self.runtime)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if getattr(self, "_log", None) is not None:
            self._log.close()


def _processes_naming(text: str) -> list[int]:
    """The ids of this user's processes whose command line contains `text` (a kernel names its connection file,
    which lies in the server's runtime folder: a path no other process has)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = JupyterServer(tmp_path_factory.mktemp("jupyter"))
    try:
        srv.start()
        shutil.copy(NOTEBOOK, srv.notebooks / NOTEBOOK.name)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser():
    with Browser(timeout=60, loopback=True) as b:  # the local server, and still nothing beyond this machine
        yield b


def _open_notebook(b: Browser, srv: JupyterServer, path: str) -> None:
    """Open a notebook page and wait until its cells are on screen."""
    b.open(srv.url(path), timeout=60)
    b.wait_for(f"window.jupyterapp && {PANEL} && {PANEL}.content && {CODE_CELLS}.length > 0 && "
               f"{PANEL}.context.isReady", timeout=60)  # fmt: skip


def _output(b: Browser, cell: int) -> dict:
    """What code cell `cell` shows, scrolled into view first: its outputs' mime types, the widths of its output
    area and of the picture (an <img>, <svg> or <iframe>) in it, whether its overflow is hidden from view."""
    return b.evaluate(f"""(() => {{
        const cell = {CODE_CELLS}[{cell}].node;
        cell.scrollIntoView({{block: 'start'}});
        return [...cell.querySelectorAll('.jp-OutputArea-output')].map((o) => {{
            const area = o.getBoundingClientRect();
            const pictures = [...o.querySelectorAll('img, svg, iframe')].filter((e) => e.getClientRects().length)
                .map((e) => ({{tag: e.tagName.toLowerCase(), width: e.getBoundingClientRect().width,
                              height: e.getBoundingClientRect().height, loaded: e.tagName !== 'IMG' ||
                              (e.complete && e.naturalWidth > 0)}}));
            return {{mime: o.dataset.mimeType, width: area.width, scroll: o.scrollWidth, client: o.clientWidth,
                     text: o.innerText.slice(0, 2000), pictures}};
        }});
    }})()""")


@pytest.fixture(scope="module")
def live(server, browser):
    """The example, opened in JupyterLab and run cell by cell (Run All Cells), then saved with its outputs: what
    the page showed, and the saved file."""
    b = browser
    _open_notebook(b, server, f"lab/tree/{NOTEBOOK.name}")
    kernel = f"{PANEL}.sessionContext.session && {PANEL}.sessionContext.session.kernel"
    b.wait_for(f"{kernel} && {kernel}.status === 'idle'", timeout=90)
    b.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
    seconds = b.wait_for(f"{CODE_CELLS}.every((c) => c.model.executionCount !== null) && "
                         f"{kernel}.status === 'idle'", timeout=180)  # fmt: skip
    outputs = [_output(b, i) for i in range(b.evaluate(f"{CODE_CELLS}.length"))]
    frame = f"{CODE_CELLS}[{PAGE_CELL}].node.querySelector('iframe')"
    b.evaluate(f"{frame} && {frame}.scrollIntoView()")
    ready = None
    try:
        b.wait_for(f"{frame}?.contentDocument?.body?.dataset.ready === '1'", timeout=60)
        ready = "1"
    except Exception:  # noqa: BLE001 - reported by the test that reads it
        ready = b.evaluate(f"{frame} ? String({frame}.contentDocument?.body?.dataset.ready) : 'no frame'")
    still_shown = b.evaluate(f"[...{CODE_CELLS}[{PAGE_CELL}].node.querySelectorAll('.sf-still')]"
                             ".some((e) => e.getClientRects().length > 0)")  # fmt: skip
    b.evaluate("window.jupyterapp.commands.execute('docmanager:save')", await_promise=True)
    saved = server.notebooks / NOTEBOOK.name
    deadline = time.monotonic() + 30
    while not any(c.get("outputs") for c in json.loads(saved.read_text(encoding="utf-8"))["cells"]):
        assert time.monotonic() < deadline, "the notebook was not saved with its outputs"
        time.sleep(0.2)
    remote = [url for url in b.requests if not url.startswith((f"http://127.0.0.1:{server.port}/", "blob:"))]
    return {"outputs": outputs, "ready": ready, "still_shown": still_shown, "seconds": seconds, "saved": saved,
            "console": list(b.console), "remote": remote}  # fmt: skip


def _fits(out: dict) -> bool:
    """Every picture within its output area, and nothing hidden past its right edge."""
    return all(p["width"] <= out["width"] + 0.5 for p in out["pictures"]) and out["scroll"] <= out["client"] + 1


def test_the_example_runs_live_in_jupyterlab_and_its_figure_fits(live):
    outputs = live["outputs"]
    every = [o for cell in outputs for o in cell]
    assert not [o for o in every if o["mime"] == "application/vnd.jupyter.stderr"], \
        [o["text"] for o in every if o["mime"] == "application/vnd.jupyter.stderr"]  # fmt: skip
    assert not [o for o in every if o["mime"] == "application/vnd.jupyter.error"]
    assert "लड़की" in outputs[0][-1]["text"]  # the translation
    figure = outputs[FIGURE_CELL]
    assert [o["mime"] for o in figure] == ["image/svg+xml"], figure
    (picture,) = figure[0]["pictures"]
    assert picture["loaded"] and picture["width"] > 0.9 * figure[0]["width"], figure  # it fills the area…
    assert _fits(figure[0]), figure  # …and goes no further (it was drawn 1,392 px wide in 833)
    page = outputs[PAGE_CELL]
    assert [o["mime"] for o in page] == ["text/html"]
    assert [p["tag"] for p in page[0]["pictures"]] == ["iframe"] and _fits(page[0])
    assert not live["still_shown"]  # live, the picture that stands in for the page stays hidden
    assert live["ready"] == "1", live["console"][-5:]
    assert live["remote"] == []  # the notebook, its figure and its page asked nothing of any other address


def test_a_received_notebook_shows_the_picture_and_how_to_make_it_live(live, server, browser):
    """Notebook 7 opens the saved file as a student would: outputs saved, never trusted on this server (one
    changed metadata field makes it content the server never signed, as a student's server never signed the
    teacher's)."""
    received = server.notebooks / "received.ipynb"
    nb = json.loads(live["saved"].read_text(encoding="utf-8"))
    nb["metadata"]["scratchformer_test"] = "received, not trusted"
    received.write_text(json.dumps(nb), encoding="utf-8")
    b = browser
    _open_notebook(b, server, f"notebooks/{received.name}")
    b.wait_for(f"{CODE_CELLS}[{PAGE_CELL}].node.querySelector('.jp-OutputArea-output')", timeout=60)
    assert b.evaluate(f"{CODE_CELLS}.every((c) => !c.model.trusted)"), "the received notebook should not be trusted"
    b.wait_for(f"[...{CODE_CELLS}[{PAGE_CELL}].node.querySelectorAll('img')].every((i) => i.complete) && "
               f"[...{CODE_CELLS}[{FIGURE_CELL}].node.querySelectorAll('img')].every((i) => i.complete)")  # fmt: skip
    page = _output(b, PAGE_CELL)
    assert [o["mime"] for o in page] == ["text/html"], page
    assert [p["tag"] for p in page[0]["pictures"]] == ["img"], page  # the iframe is gone; the picture is there
    assert page[0]["pictures"][0]["loaded"] and page[0]["pictures"][0]["width"] > 100 and _fits(page[0]), page
    assert "Trust Notebook" in page[0]["text"] and "run this cell" in page[0]["text"], page[0]["text"]
    figure = _output(b, FIGURE_CELL)  # an untrusted SVG is not shown: its PNG is
    assert [o["mime"] for o in figure] == ["image/png"], figure
    assert figure[0]["pictures"][0]["loaded"] and _fits(figure[0]), figure

    # what the sentence says works: File › Trust Notebook, confirmed, and the page is live in its place
    b.evaluate("void window.jupyterapp.commands.execute('notebook:trust')")
    b.wait_for("document.querySelector('.jp-Dialog .jp-mod-accept')", timeout=30)
    b.evaluate("document.querySelector('.jp-Dialog .jp-mod-accept').click()")
    frame = f"{CODE_CELLS}[{PAGE_CELL}].node.querySelector('iframe')"
    b.wait_for(f"{frame}?.contentDocument?.body?.dataset.ready === '1'", timeout=60)
    trusted = _output(b, PAGE_CELL)
    assert [p["tag"] for p in trusted[0]["pictures"]] == ["iframe"], trusted  # and the stand-in is hidden again
