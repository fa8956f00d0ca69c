"""The page itself: the viewer (viewer.html, viewer.css, viewer.js, shipped beside this file) with the data inline.

The data sit in `<script type="application/x-scratchformer">` elements, which the browser neither runs nor
renders: the index (id "sf-index") and one per map (data-chunk="step/item"), each base64 of gzip (packing.py).
A Content-Security-Policy in the page forbids every load (default-src 'none'): even a mistake could not make
the browser ask the network for anything.

A live page (page_data(…, live=…)) also holds the model (data-chunk="live", live/part.py), and its script adds the
engine (live/engine.js, live/bpe.js with GPT-2's tokenizer, then live/run.js), the optional plug-ins
that explain and derive a typed sentence (live/explain.js, live/derive.js, each only where the package
has it) and live/page.js, which reruns the model as the reader types. A recorded page carries none of them.
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


# a live page's scripts, in this order after viewer.js; the plug-ins (explain, derive: LIVE_OPTIONAL) may be absent
LIVE_SCRIPTS = ("live/engine.js", "live/bpe.js", "live/run.js", "live/format.js",
                "live/explain.js", "live/derive_kit.js", "live/derive_rules.js",
                "live/derive.js", "live/page.js")  # fmt: skip
LIVE_OPTIONAL = ("live/explain.js", "live/derive_kit.js", "live/derive_rules.js",
                 "live/derive.js")  # fmt: skip
# A live page's boxes, filled in and run by live/page.js (disabled until the model is read); a target box
# only for a model with an encoder (a decoder alone reads its text and continues it)
LIVE_FORM = """<div id="sf-live" class="sf-live">
  <label>{source} <input id="sf-source" type="text" dir="auto" spellcheck="false" value="{source_text}" \
disabled></label>
  {target}<span id="sf-live-status" class="sf-small" role="status" aria-live="polite">Reading the model…</span>
  <span id="sf-live-shown" class="sf-small"></span>
</div>
"""
TARGET_BOX = """<label>Target <input id="sf-target" type="text" dir="auto" spellcheck="false" value="{text}" \
placeholder="empty: the model translates" disabled></label>
  """


@cache
def viewer_file(name: str) -> str:
    """One of the viewer's files (package data)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def viewer_script(live: bool = False) -> str:
    """The page's JavaScript: the graph's and the viewer's, and for a live page the engine and its page part."""
    names = ["viewer_unpack.js", "viewer_graph.js", "viewer.js"]
    if live:
        names += [n for n in LIVE_SCRIPTS if n not in LIVE_OPTIONAL or _has(n)]
    return "\n".join(viewer_file(n) for n in names)


def _has(name: str) -> bool:
    return resources.files(__package__).joinpath(name).is_file()


def live_form(live: dict | None) -> str:
    """The live page's text boxes, opening with the recorded run's text; "" for a recorded page."""
    if live is None:
        return ""
    target = TARGET_BOX.format(text=_attribute(live["target"])) if live["has_encoder"] else ""
    return LIVE_FORM.format(source="Source" if live["has_encoder"] else "Text", target=target,
                            source_text=_attribute(live["source"]))  # fmt: skip


def _attribute(text: str) -> str:
    """Text for an attribute's value: HTML-escaped, and its braces too, so that no text can be taken for one of
    the viewer's {{PLACEHOLDERS}} filled after it."""
    return html.escape(text).replace("{", "&#123;").replace("}", "&#125;")


def page_html(data: dict) -> str:
    """The whole page for page_data's result: one self-contained HTML text."""
    index, chunks = data["index"], data["chunks"]
    parts = [f'<script type="application/x-scratchformer" id="sf-index">{pack_json(index)}</script>']
    parts += [f'<script type="application/x-scratchformer" data-chunk="{html.escape(key)}">{text}</script>'
              for key, text in chunks.items()]  # fmt: skip
    page = viewer_file("viewer.html")
    for name, value in (("TITLE", html.escape(index["title"])), ("CSS", viewer_file("viewer.css")),
                        ("LIVE", live_form(index.get("live"))), ("JS", viewer_script("live" in index)),
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
