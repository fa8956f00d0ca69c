"""What a notebook shows of a run: `Plot`, a figure drawn like the exports, and `PageView`, the interactive page.

Both follow IPython's display protocol, so Jupyter, JupyterLab and VS Code show them inline without scratchformer
knowing which one runs: `Plot` gives `_repr_svg_` and `_repr_png_` (the same Figure and renderer as `scratchformer
export`), `PageView` gives `_repr_html_` (the one-file page of `export --format html`, inside an iframe of its own
so that several views in one notebook never share a script or a style, with no request to any network address).

Two things the notebook itself decides, checked in JupyterLab and Notebook 7 (tests/test_notebook_browser.py):
- Width. JupyterLab and Notebook 7 show an SVG as an <img> that nothing keeps within the output area, so a figure
  wider than FIT_WIDTH is given `width="100%"` (and its viewBox): it takes the output area's width, never more,
  and its text stays sharp; a narrower one keeps its own size. The PNG carries its size in CSS pixels, so that
  Jupyter shows it as large as the SVG (not at its 2× pixels) and shrinks it, never stretches it.
- Trust. A notebook opened with its outputs saved and not trusted (a teacher's file on a student's machine) runs no
  script and shows no iframe: its HTML is sanitized, which drops <iframe> and <style> alike. So the page's HTML
  holds, beside the iframe, a picture of the page's first step and a sentence saying how to make it live, hidden
  by a <style> of its own: seen exactly where the iframe is not. The bundle also carries that picture as PNG and
  the sentence as text, for what shows no HTML at all (a terminal, a PDF).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import struct
from pathlib import Path

from .errors import UserError
from .exporting.figure import Figure, single_figure, step_figure
from .exporting.files import atomic_write_bytes
from .plotdata import head_count, step_heatmap
from .recording.trace import Step, Trace

IMAGE_SUFFIXES = ("png", "svg", "pdf")
PNG_SCALE = 2.0  # PNG pixels per point of the figure (144 dpi)
FIT_WIDTH = 720  # CSS pixels: a figure wider than this is drawn as wide as the output area (and no wider)
CSS_PX = {"": 1.0, "px": 1.0, "pt": 96 / 72, "pc": 16.0, "mm": 96 / 25.4, "cm": 96 / 2.54, "in": 96.0}
TRUST_SENTENCE = ("The interactive page of this run shows here once the notebook is trusted: run this cell, or "
                  "trust the notebook (File › Trust Notebook in Notebook 7; “Trust Notebook” in JupyterLab's "
                  "command palette).")  # fmt: skip


def _renderer():
    from .frontends import load

    # (figure, format) → bytes; a Qt application made if needed
    return load("renderer", "Drawing a figure")(PNG_SCALE)


_SVG_ROOT = re.compile(r"<svg\b[^>]*>")
_SVG_LENGTH = re.compile(r'\s(width|height)\s*=\s*"\s*([0-9.]+)\s*([a-z]*)\s*"')


def fit_svg(svg: str, fit: float = FIT_WIDTH) -> str:
    """The SVG sized for a notebook's output area: wider than `fit` CSS pixels, its root takes `width="100%"` and
    no height (its viewBox keeps the proportions; max-width keeps it from growing past its own size where the SVG
    is inline); otherwise its own size in pixels. Either way it shrinks to a narrower output area where the SVG
    is inline (style max-width); JupyterLab's <img> honours only the first. An SVG without a viewBox or a size is
    returned as it is."""
    root = _SVG_ROOT.search(svg)
    if root is None or "viewBox" not in root.group(0):
        return svg
    sizes = {m.group(1): float(m.group(2)) * CSS_PX.get(m.group(3), 1.0) for m in _SVG_LENGTH.finditer(root.group(0))}
    if "width" not in sizes or "height" not in sizes:
        return svg
    tag = _SVG_LENGTH.sub("", root.group(0)).replace("<svg", "<svg{}", 1)
    width, height = sizes["width"], sizes["height"]
    if width > fit:
        attrs = f' width="100%" style="max-width: {width:.0f}px; height: auto"'
    else:
        attrs = f' width="{width:.0f}px" height="{height:.0f}px" style="max-width: 100%; height: auto"'
    return svg[: root.start()] + tag.format(attrs) + svg[root.end() :]


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels of a PNG file's contents."""
    return struct.unpack(">II", png[16:24])


def _css_size(png: bytes) -> tuple[int, int]:
    """The size a figure's PNG is shown at, in CSS pixels: the SVG's (PNG_SCALE pixels a point, 4/3 pixels a point)."""
    w, h = png_size(png)
    return round(w / PNG_SCALE * CSS_PX["pt"]), round(h / PNG_SCALE * CSS_PX["pt"])


class Plot:
    """A figure of one step. Shown inline by Jupyter (SVG, with PNG beside it); `save(path)` writes PNG, SVG or
    PDF by the path's suffix; `figure` is the plot data (scratchformer.exporting.figure.Figure)."""

    def __init__(self, figure: Figure) -> None:
        self.figure = figure
        self._bytes: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"<scratchformer plot: {self.figure.title} ({len(self.figure.heatmaps)} map(s))>"

    def to_bytes(self, fmt: str = "png") -> bytes:
        """The picture as the contents of a .png, .svg or .pdf file."""
        fmt = fmt.lower().lstrip(".")
        if fmt not in IMAGE_SUFFIXES:
            raise UserError(f"A figure is saved as {', '.join(IMAGE_SUFFIXES)}, not {fmt!r}.")
        if fmt not in self._bytes:
            self._bytes[fmt] = _renderer()(self.figure, fmt)
        return self._bytes[fmt]

    def _repr_png_(self) -> bytes:
        return self.to_bytes("png")

    def _repr_svg_(self) -> str:
        """The SVG as a notebook shows it (fit_svg); `to_bytes("svg")` and `save` write it at its own size."""
        return fit_svg(self.to_bytes("svg").decode("utf-8"))

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        """SVG and PNG (the PNG with its size in CSS pixels, so that Jupyter shows it no larger than the SVG)."""
        png = self.to_bytes("png")
        width, height = _css_size(png)
        data = {"image/svg+xml": self._repr_svg_(), "image/png": base64.b64encode(png).decode("ascii")}
        return data, {"image/png": {"width": width, "height": height}}

    def save(self, path: str | Path, overwrite: bool = True) -> Path:
        """Write the figure; the format follows the suffix (.png, .svg or .pdf). Returns the path written."""
        path = Path(path).expanduser()
        fmt = path.suffix.lower().lstrip(".")
        if fmt not in IMAGE_SUFFIXES:
            raise UserError(f"Name the file with a .png, .svg or .pdf suffix, not {path.name!r}.")
        atomic_write_bytes(path, self.to_bytes(fmt), overwrite)
        return path


def step_plot(trace: Trace, step: Step, head: int | None = None, batch: int = 0, vocab_labels=None) -> Plot:
    """One step as exported: one head (from 0), or every head side by side (head=None)."""
    n_items = len(trace.source_tokens or trace.target_tokens) or 1
    if not 0 <= batch < n_items:
        raise UserError(f"batch {batch} is out of range; this run has {n_items} batch item(s), from 0.")
    if head is None:
        return Plot(step_figure(trace, step, batch, vocab_labels))
    n_heads = max(1, head_count(step))
    if not 0 <= head < n_heads:
        which = f"{n_heads} heads, from 0" if n_heads > 1 else "no head axis (head=None or 0)"
        raise UserError(f"head {head} is out of range; {step.name} has {which}.")
    return Plot(single_figure(step_heatmap(trace, step, batch, head, vocab_labels)))


class PageView:
    """The interactive page of a run, inline in a notebook (`_repr_html_`); `save(path)` writes the .html file."""

    def __init__(self, run, height: int | None = None, graph: bool = False, transcoders=None,
                 live: bool = False, note: str | None = None) -> None:  # fmt: skip
        self.run = run
        self.note = note  # one sentence shown above the page (why it is not live)
        self.height = height
        self.graph, self.transcoders = graph, transcoders
        self.live = live
        self._html: str | None = None
        self._still: Plot | None = None

    def html(self) -> str:
        """The whole self-contained page (scratchformer.page), made on first use."""
        if self._html is None:
            from .page import live_text, page_data, page_graph, page_html, run_arguments

            run = self.run
            # what repeats this run on the command line: the spec that opened the model (a folder's display name
            # cannot reopen it) and the decoder input as it was read
            again = run_arguments(run.spec, run.source, run.target or "", run._start_only)
            graph = None
            if self.graph:
                from .graph.build import build_graph

                graph = page_graph(build_graph(run.bundle, run.graph_inputs(), self.transcoders))
            live = live_text(run.spec, run.source, run.target or "") if self.live else None
            self._html = page_html(page_data(run.bundle, run.trace, run.inputs, run_args=again, graph=graph,
                                             live=live))  # fmt: skip
        return self._html

    def __repr__(self) -> str:
        return f"<scratchformer page: {self.run.bundle.name}, {len(self.run.trace)} steps>"

    def still(self) -> Plot:
        """The picture of the step the page opens at (its first), shown where the page cannot run."""
        if self._still is None:
            self._still = self.run.plot(0, head=None)
        return self._still

    def _repr_html_(self) -> str:
        """The page in its iframe, and beside it the still picture and TRUST_SENTENCE, which a <style> of this
        output hides; a notebook that is not trusted sanitizes the HTML, dropping the iframe and the style, and
        so shows the picture and the sentence instead of a blank."""
        from .page import NOTEBOOK_HEIGHT, notebook_html

        frame = notebook_html(self.html(), self.height or NOTEBOOK_HEIGHT)
        png = self.still().to_bytes("png")
        width, height = _css_size(png)
        mark = "sf-view-" + hashlib.sha1(frame.encode("utf-8")).hexdigest()[:12]
        picture = (f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" width="{width}" '
                   f'height="{height}" style="max-width: 100%; height: auto" '
                   f'alt="{html.escape(self.still().figure.title)}">')  # fmt: skip
        note = f'<p class="sf-note">{html.escape(self.note)}</p>' if self.note else ""
        return (f'<div class="{mark}"><style>.{mark} > .sf-still {{ display: none; }}</style>{note}{frame}'
                f'<div class="sf-still"><p>{html.escape(TRUST_SENTENCE)}</p>{picture}</div></div>')

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        """The page (text/html, as _repr_html_), the first step's picture (image/png) and how to make the page
        live (text/plain): a front end that shows no HTML, or drops it, still has something to show."""
        png = self.still().to_bytes("png")
        width, height = _css_size(png)
        data = {"text/html": self._repr_html_(), "image/png": base64.b64encode(png).decode("ascii"),
                "text/plain": "\n".join(x for x in (self.note, repr(self), TRUST_SENTENCE) if x)}  # fmt: skip
        return data, {"image/png": {"width": width, "height": height}}

    def save(self, path: str | Path, overwrite: bool = True) -> Path:
        """Write the page as one .html file that opens anywhere, offline. Returns the path written."""
        from .page import write_page

        path = Path(path).expanduser()
        if path.suffix.lower() not in (".html", ".htm"):
            raise UserError(f"Name the page with an .html suffix, not {path.name!r}.")
        write_page(path, self.html(), overwrite)
        return path
