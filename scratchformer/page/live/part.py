"""What a live page adds to the recorded one: the model (model.py's live_model) in a chunk of its own, and in the
index the text its boxes open with, so that the page reruns the model in the browser as the reader types.

    live = live_text("en-hi", "the girl eats an apple")          # what the boxes open with
    data = page_data(bundle, trace, inputs, live=live)           # UserError with live_page_refusal's sentence
    page_html(data)                                              # inlines the engine and page.js

The engine (engine.js, run.js) computes every step of the trace; page.js turns its
run into the maps the viewer draws, as maps.py does in Python. Where the package has the plug-ins that explain a
typed sentence's steps and derive its cells in the browser (explain.py with explain.js,
derive.py with derive*.js), the chunk carries what they read beside the run (their contexts).

A page reruns one sentence of the model alone, so besides what live_refusal refuses (the engine's limits), a run
of several batch items, with dictionaries attached or with interventions is refused too, each in one sentence.
"""

from __future__ import annotations

import importlib

from ...commands.trace import decoder_input_text
from ...errors import UserError
from ...recording.trace import Trace
from ..packing import pack_json
from .model import live_model, live_refusal

LIVE_CHUNK = "live"  # the chunk (data-chunk="live") holding the model, packed JSON as the index is
CHARS_PER_POSITION = 40  # the page reads at most this many characters per position of the model (max_len) …
MIN_CHARS = 1000  # … and never fewer than this: longer text is refused before it is read


def live_text(model: str, source: str, target: str = "") -> dict:
    """What the live page's boxes open with: the run's source and target text, and the --model that opens the model
    again (for the page's `scratchformer derive` hint of a sentence typed in it)."""
    return {"model": model, "source": source, "target": target or ""}


def live_page_refusal(bundle, trace: Trace) -> str | None:
    """One sentence saying why this run's page cannot be live, or None when it can."""
    why = live_refusal(bundle)
    if why is not None:
        return why
    n_items = len(trace.source_tokens or trace.target_tokens) or 1
    if n_items > 1:
        return f"A live page reruns one sentence, and this run has {n_items} batch items; export one sentence."
    if trace.dictionaries:
        return "A live page reruns the model alone, and this run reads attached dictionaries; leave out --dictionary."
    if trace.interventions:
        return "A live page reruns the model as it was saved, and this run changed it on purpose (interventions)."
    return None


def live_part(bundle, trace: Trace, live: dict) -> tuple[dict, str]:
    """(the index's "live" entry, the LIVE_CHUNK chunk: {"model": live_model, "explain": …, "derive": …} packed);
    UserError when the page cannot run this model or run (live_page_refusal's sentence)."""
    why = live_page_refusal(bundle, trace)
    if why is not None:
        raise UserError(why)
    model = live_model(bundle, steps=False)  # the index has the steps
    kinds = {w["dtype"] for w in model["weights"].values()}
    stored = sum(_count(w["shape"]) * (2 if w["dtype"] == "f16" else 4) for w in model["weights"].values())
    max_len = bundle.config.max_len
    entry = {"model": live["model"], "source": live["source"], "target": live.get("target") or "",
             "has_encoder": bool(bundle.config.has_encoder), "max_len": max_len,
             "max_chars": max(MIN_CHARS, CHARS_PER_POSITION * max_len),
             "weights": {"dtypes": sorted(kinds), "bytes": stored},
             "decoder_inputs": {mode: decoder_input_text(mode, bundle.config.has_encoder)
                                for mode in ("typed", "generated", "start_only")}}  # fmt: skip
    explain = _plugin("explain", "explain_context", bundle, trace, vocab=False)  # the page has the vocabulary
    derive = _plugin("derive", "derive_context", bundle, trace)
    return entry, pack_json({"model": model, "explain": explain, "derive": derive})


def _plugin(module: str, function: str, *args, **options) -> dict | None:
    """A plug-in's context for the browser (`module`.`function`(…) in this package), or None where the package has
    no such plug-in."""
    try:
        found = importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError:
        return None
    return getattr(found, function)(*args, **options)


def _count(shape: list[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n
