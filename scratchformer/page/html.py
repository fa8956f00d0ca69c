"""The page itself: the viewer (viewer.html, viewer.css, viewer.js, shipped beside this file) with the data inline.

The data sit in `<script type="application/x-scratchformer">` elements, which the browser neither runs nor
renders: the index (id "sf-index") and one per map (data-chunk="step/item"), each base64 of gzip (packing.py).
A Content-Security-Policy in the page forbids every load (default-src 'none'): even a mistake could not make
the browser ask the network for anything.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib import resources
from pathlib import Path

from ..exporting.files import atomic_write_bytes, check_name
from .packing import pack_json, unpack_json

NOTEBOOK_HEIGHT = 780  # pixels: the iframe a notebook shows the page in (the page scrolls inside it)
_CHUNK = re.compile(r'<script type="application/x-scratchformer" (id="sf-index"|data-chunk="([^"]+)")>([^<]*)</script>')


@cache
def viewer_file(name: str) -> str:
    """One of the viewer's files (package data)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def page_html(data: dict) -> str:
    """The whole page for page_data's result: one self-contained HTML text."""
    index, chunks = data["index"], data["chunks"]
    parts = [f'<script type="application/x-scratchformer" id="sf-index">{pack_json(index)}</script>']
    parts += [f'<script type="application/x-scratchformer" data-chunk="{html.escape(key)}">{text}</script>'
              for key, text in chunks.items()]  # fmt: skip
    page = viewer_file("viewer.html")
    for name, value in (("TITLE", html.escape(index["title"])), ("CSS", viewer_file("viewer.css")),
                        ("JS", viewer_file("viewer_graph.js") + "\n" + viewer_file("viewer.js")),
                        ("DATA", "\n".join(parts))):  # fmt: skip
        page = page.replace("{{" + name + "}}", value, 1)
    return page


def write_page(path: Path | str, page: str | dict, overwrite: bool = False) -> int:
    """Write the page (its text, or page_data's result) to `path` atomically; returns its size in bytes. An
    existing file is replaced only with `overwrite`; any reason it cannot be written is one UserError sentence."""
    path = Path(path).expanduser()
    check_name(path.name)
    text = page if isinstance(page, str) else page_html(page)
    return atomic_write_bytes(path, text.encode("utf-8"), overwrite)


def notebook_html(page: str, height: int = NOTEBOOK_HEIGHT) -> str:
    """What a notebook's `_repr_html_` returns to show the page inline: the page as the `srcdoc` of an iframe.

    The iframe gives each view its own document, so several views in one notebook never share a script, a style
    or an element id, and arrow keys step only the view that has the focus. The attribute is the page escaped for
    HTML (& and " and < and >; base64 needs none of it), so the notebook grows by the page's size and no more.
    JupyterLab, the classic notebook and VS Code run a trusted output's iframe with its scripts; the page loads
    nothing from anywhere (its Content-Security-Policy forbids it), so it works offline."""
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" title="scratchformer" '
            f'style="width: 100%; height: {int(height)}px; border: 1px solid #ddd; border-radius: 4px;" '
            'loading="eager"></iframe>')  # fmt: skip


def read_page(text: str) -> tuple[dict, dict[str, str]]:
    """(index, chunks) of a page's text: what page_html put in, for tests and tools."""
    index, chunks = None, {}
    for match in _CHUNK.finditer(text):
        if match.group(2) is None:
            index = unpack_json(match.group(3))
        else:
            chunks[html.unescape(match.group(2))] = match.group(3)
    if index is None:
        raise ValueError("This is not a scratchformer page: it holds no index.")
    return index, chunks
