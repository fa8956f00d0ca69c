"""What a notebook shows of a run: `Plot`, a figure drawn like the exports, and `PageView`, the interactive page.

Both follow IPython's display protocol, so Jupyter, JupyterLab and VS Code show them inline without scratchformer
knowing which one runs: `Plot` gives `_repr_svg_` and `_repr_png_` (the same Figure and renderer as `scratchformer
export`), `PageView` gives `_repr_html_` (the one-file page of `export --format html`, inside an iframe of its own
so that several views in one notebook never share a script or a style, with no request to any network address).
"""

from __future__ import annotations

from pathlib import Path

from .errors import UserError
from .exporting.figure import Figure, single_figure, step_figure
from .exporting.files import atomic_write_bytes
from .plotdata import head_count, step_heatmap
from .trace import Step, Trace

IMAGE_SUFFIXES = ("png", "svg", "pdf")


def _renderer():
    from .frontends import load

    return load("renderer", "Drawing a figure")(2.0)  # (figure, format) → bytes; a Qt application made if needed


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
        return self.to_bytes("svg").decode("utf-8")

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

    def __init__(self, run, height: int | None = None) -> None:
        self.run = run
        self.height = height
        self._html: str | None = None

    def html(self) -> str:
        """The whole self-contained page (scratchformer.page), made on first use."""
        if self._html is None:
            from .page import page_data, page_html, run_arguments

            run = self.run
            # what repeats this run on the command line: the spec that opened the model (a folder's display name
            # cannot reopen it) and the decoder input as it was read
            again = run_arguments(run.spec, run.source, run.target or "", run._start_only)
            self._html = page_html(page_data(run.bundle, run.trace, run.inputs, run_args=again))
        return self._html

    def _repr_html_(self) -> str:
        from .page import NOTEBOOK_HEIGHT, notebook_html

        return notebook_html(self.html(), self.height or NOTEBOOK_HEIGHT)

    def save(self, path: str | Path, overwrite: bool = True) -> Path:
        """Write the page as one .html file that opens anywhere, offline. Returns the path written."""
        from .page import write_page

        path = Path(path).expanduser()
        if path.suffix.lower() not in (".html", ".htm"):
            raise UserError(f"Name the page with an .html suffix, not {path.name!r}.")
        write_page(path, self.html(), overwrite)
        return path
