"""What a notebook receives from scratchformer, checked in Python (tests/test_notebook_browser.py shows it in
JupyterLab and Notebook 7): a figure that fits the output area, a page view that still shows something where the
notebook is not trusted, and nothing on stderr (a red box) in a Jupyter kernel."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

import scratchformer as sf
from scratchformer.notebook import FIT_WIDTH, TRUST_SENTENCE, fit_svg, png_size

formatters = pytest.importorskip("IPython.core.formatters", reason="IPython comes with ipykernel, a test extra")

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "the girl eats an apple"
PT = 96 / 72  # CSS pixels per point: the figures are laid out in points


@pytest.fixture(scope="module")
def run():
    return sf.run("en-hi", SOURCE)


def _root(svg: str | bytes) -> ET.Element:
    return ET.fromstring(svg.encode("utf-8") if isinstance(svg, str) else svg)


def _style(element: ET.Element) -> dict[str, str]:
    parts = (p.split(":", 1) for p in (element.get("style") or "").split(";") if ":" in p)
    return {k.strip(): v.strip() for k, v in parts}


def test_a_figure_of_every_head_takes_the_output_areas_width_and_no_more(run):
    plot = run.plot("decoder.1.cross_attn.weights", head=None)
    root = _root(plot._repr_svg_())
    _x, _y, w, h = map(float, root.get("viewBox").split())
    assert w * PT > FIT_WIDTH  # 1,392 px: wider than any notebook's output area at its own size
    assert root.get("width") == "100%" and root.get("height") is None  # the viewBox keeps the proportions
    assert _style(root) == {"max-width": f"{w * PT:.0f}px", "height": "auto"}  # inline: never past its own size
    assert root.tag.endswith("svg") and any(e.tag.endswith("text") for e in root.iter())  # text stays text
    saved = _root(plot.to_bytes("svg"))  # the file keeps its printed size
    assert saved.get("width").endswith("mm") and saved.get("viewBox") == root.get("viewBox")

    data, meta = formatters.DisplayFormatter().format(plot)  # what the kernel sends
    assert data["image/svg+xml"] == plot._repr_svg_() and "scratchformer plot" in data["text/plain"]
    png = base64.b64decode(data["image/png"])
    assert png == plot.to_bytes("png")
    # Jupyter shows the PNG (2 pixels a point) at the SVG's size in CSS pixels, shrunk to the area, never more
    assert meta["image/png"] == {"width": round(w * PT), "height": round(h * PT)}
    assert png_size(png) == (round(w * 2), round(h * 2))


def test_a_figure_of_one_head_keeps_its_own_size(run):
    root = _root(run.plot("decoder.1.cross_attn.weights", head=0)._repr_svg_())
    _x, _y, w, h = map(float, root.get("viewBox").split())
    width, height = float(root.get("width").removesuffix("px")), float(root.get("height").removesuffix("px"))
    assert width == pytest.approx(w * PT, abs=0.5) and height == pytest.approx(h * PT, abs=0.5)
    assert width <= FIT_WIDTH  # 692 px: it fits the output areas at its own size, drawn neither larger nor smaller
    assert _style(root) == {"max-width": "100%", "height": "auto"}


def test_fit_svg_reads_any_unit_and_leaves_an_svg_without_a_viewbox_alone():
    svg = '<?xml version="1.0"?>\n<svg width="600pt" height="150pt"\n viewBox="0 0 600 150" xmlns="x"><g/></svg>'
    root = _root(fit_svg(svg))
    assert root.get("width") == "100%" and _style(root)["max-width"] == "800px"
    assert _root(fit_svg(svg, fit=900)).get("width") == "800px"
    bare = '<svg width="600" height="150" xmlns="x"/>'
    assert fit_svg(bare) == bare


class _Sanitized(HTMLParser):
    """What a notebook that is not trusted keeps of an HTML output: JupyterLab's sanitizer drops <script>, <style>
    and <iframe> (the first two with their text) and keeps <div>, <p> and <img> with a data: source."""

    DROPPED = {"script", "style", "iframe"}

    def __init__(self) -> None:
        super().__init__()
        self.inside: list[str] = []
        self.text: list[str] = []
        self.images: list[str] = []
        self.classes: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.DROPPED:
            self.inside.append(tag)
        elif not self.inside:
            attrs = dict(attrs)
            self.classes.append(attrs.get("class") or "")
            if tag == "img":
                self.images.append(attrs["src"])

    def handle_endtag(self, tag):
        if self.inside and self.inside[-1] == tag:
            self.inside.pop()

    def handle_data(self, data):
        if not self.inside:
            self.text.append(data)


def test_the_page_view_carries_a_picture_and_a_sentence_beside_the_page(run):
    view = run.show()
    data, meta = formatters.DisplayFormatter().format(view)
    assert {"text/html", "image/png", "text/plain"} <= set(data)
    png = base64.b64decode(data["image/png"])
    still = view.still()
    assert png == still.to_bytes("png") and still.figure.title == run.plot(0, head=None).figure.title
    w, h = png_size(png)
    assert meta["image/png"] == {"width": round(w / 2 * PT), "height": round(h / 2 * PT)}
    assert data["text/plain"].endswith(TRUST_SENTENCE) and "scratchformer page" in data["text/plain"]
    assert TRUST_SENTENCE.count(". ") == 0 and TRUST_SENTENCE.endswith(".")  # one sentence
    assert "Trust Notebook" in TRUST_SENTENCE and "run this cell" in TRUST_SENTENCE

    page = data["text/html"]
    assert page == view._repr_html_() and "<iframe srcdoc=" in page
    mark = page.split('"', 2)[1]
    assert page.startswith(f'<div class="{mark}"><style>.{mark} > .sf-still {{ display: none; }}</style><iframe')
    # trusted, the style hides the stand-in; sanitized, the iframe and the style are gone and the stand-in shows
    kept = _Sanitized()
    kept.feed(page)
    assert kept.images == ["data:image/png;base64," + data["image/png"]]
    assert "".join(kept.text).strip() == TRUST_SENTENCE
    assert "sf-still" in kept.classes


def test_a_jupyter_kernel_shows_no_red_box(tmp_path):
    """In a process that looks like a Jupyter kernel (ipykernel's shell imported: what tqdm.autonotebook checks),
    importing scratchformer, running a sentence and making every output the example notebook shows writes nothing
    on stderr. tqdm.auto, imported by transformers, warned 'IProgress not found' there without ipywidgets."""
    pytest.importorskip("ipykernel.zmqshell", reason="ipykernel is a test extra")
    code = (
        "import ipykernel.zmqshell, IPython\n"
        "import scratchformer as sf\n"
        "from IPython.core.formatters import DisplayFormatter\n"
        "show = DisplayFormatter().format\n"
        f"run = sf.run('en-hi', {SOURCE!r})\n"
        "figure, _ = show(run.plot('decoder.1.cross_attn.weights', head=None))\n"
        "page, _ = show(run.show())\n"
        "import sys\n"
        "print(sorted(figure), sorted(page), 'tqdm.auto' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ("['image/png', 'image/svg+xml', 'text/plain'] ['image/png', 'text/html', "
                                   "'text/plain'] True")  # fmt: skip
    assert done.stderr == ""
