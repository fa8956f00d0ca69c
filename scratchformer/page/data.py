"""page_data: everything the interactive page shows of one traced run, as an index (JSON) and packed maps.

The index holds the model and its input, the translation, the architecture's blocks and the steps in each, every
step's explanation with this run's numbers (scratchformer.explain, as the window's Explain panel and
`trace --explain` write them), the derivations made ahead (derivations.py), the logit lens
(analyses.lens) and, for each map, how to draw it; the maps' values are packed separately (maps.py), one chunk
per step and batch item, so the browser unpacks only the step it shows.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from ..analyses import lens as lens_analysis
from ..commands.trace import decoder_input_text
from ..errors import UserError
from ..explain import explain_step
from ..plotdata import architecture, block_key, block_steps
from ..recording.trace import Trace, step_path
from .derivations import DERIVE_CELLS, build_derivations
from .feature_cards import attach_cards
from .live.part import LIVE_CHUNK, live_page_refusal, live_part
from .maps import PAGE_BYTES, build_maps
from .packing import finite_or_text

MAX_ITEMS = 8  # batch items a page holds (a walkthrough's batch of windows); the first ones
VERSION = 1


def _colours() -> dict:
    """The window's colour tables and special-cell colours (plotdata.colours), so the page paints the same RGB."""
    from ..plotdata.colours import SPECIAL_RGBA, STOPS, table_hex
    from ..plotdata.special import GAP, MASKED, NAN, NEG_INF, POS_INF

    names = {MASKED: "masked", NAN: "nan", POS_INF: "posinf", NEG_INF: "neginf", GAP: "gap"}
    return {"tables": {name: table_hex(name) for name in ("viridis", *STOPS)},
            "special": {names[code]: list(rgba) for code, rgba in SPECIAL_RGBA.items()}}


def run_arguments(model: str, source: str | None = None, target: str = "", start_only: bool = False,
                  text_file: str | None = None, seq_len: int | None = None, batch: int | None = None) -> str:
    """The command-line options that repeat a run ('--model en-hi --source "the girl …"'), for the page's hint of
    how to derive a cell it holds no derivation of."""
    words = ["--model", model]
    if text_file is not None:
        words += ["--text-file", str(text_file)]
    elif source is not None:
        words += ["--source", source]
    if seq_len and batch:
        words += ["--seq-len", str(seq_len), "--batch", str(batch)]
    if target:
        words += ["--target", target]
    if start_only:
        words.append("--start-only")
    return shlex.join(words)


def page_data(bundle, trace: Trace, inputs=None, *, item: int = 0, run_args: str = "",
              budget: float = PAGE_BYTES, derive_cells: int = DERIVE_CELLS, max_items: int = MAX_ITEMS,
              progress: Callable[[str], None] | None = None,
              cancelled: Callable[[], bool] | None = None, cards: dict | None = None,
              graph: dict | None = None, live: dict | None = None) -> dict:  # fmt: skip
    """{"index": JSON-able dict, "chunks": {id: packed text}} for page_html.

    `bundle`: the ModelBundle that made `trace` (its config, tokenizers and model: explanations, derivations and
    the lens need them); `inputs`: the run's Inputs (the translation, how the decoder input was chosen, notes),
    optional; `item`: the batch item the page opens at (from 0); `run_args`: the options that repeat the run
    (run_arguments), shown in the hint to derive other cells; `budget`: bytes of page text for the maps;
    `derive_cells`: how many cells are derived ahead. `progress(text)` hears how far it got; `cancelled()` may
    stop it early (UserError). `cards`: {step a dictionary reads: scratchformer.features.cards.CardSet}: the
    page carries the cards of the features it shows (page/feature_cards.py). `graph`: an attribution graph for the
    page to draw (page/graph.py's page_graph). `live`: live.part.live_text(…), the text a live page's boxes open
    with: the page then carries the model and reruns it in the browser as the reader types (a run it cannot rerun
    is UserError, live_page_refusal's sentence, before anything else is done)."""
    if live is not None and (why := live_page_refusal(bundle, trace)) is not None:
        raise UserError(why)
    n_items = max(len(trace.source_tokens or trace.target_tokens), 1)
    if not 0 <= item < n_items:
        raise UserError(f"Batch item {item + 1} is out of range; this run has {n_items} batch item(s).")
    items = sorted({*range(min(n_items, max_items)), item})
    vocab = bundle.tgt_tokenizer.token_strings

    def say(text: str) -> None:
        if cancelled is not None and cancelled():
            raise UserError("The page was cancelled.")
        if progress is not None:
            progress(text)

    say("explaining the steps")
    explanations = {}
    for b in items:
        for step in trace:
            ex = explain_step(trace, step, bundle.config, b, vocab)
            explanations[f"{step.index}/{b}"] = {"what": ex.what, "why": ex.why, "numbers": ex.numbers,
                                                 "links": [[i, text] for i, text in ex.links]}  # fmt: skip
    shown_cards = attach_cards(trace, cards, items, explanations) if cards else {}
    chunks, maps = build_maps(trace, items, vocab, budget, say)
    say("deriving cells")
    derivations = build_derivations(bundle, trace, maps, derive_cells, cancelled) if 0 in items else {}
    say("reading the lens")
    index = {
        "version": VERSION,
        "title": _title(bundle, trace, item),
        "model": {"name": bundle.name, "describe": bundle.describe(), "untrained": bool(bundle.untrained)},
        "input": _input(trace, inputs, bundle.config.has_encoder),
        "items": items, "n_items": n_items, "item": item,
        "blocks": _blocks(bundle.config, trace),
        "steps": [{"name": s.name, "kind": s.kind, "title": s.title, "path": step_path(s), "formula": s.formula,
                   "shape": list(s.shape), "dims": list(s.dims), "block": block_key(s), "major": bool(s.major)}
                  for s in trace],
        "maps": maps,
        "colours": _colours(),
        "explain": explanations,
        "derive": derivations,
        "derive_batch": 0,
        "run_args": run_args,
        "lens": _lens(bundle, trace, sorted({items[0], item})),  # a lens reads the whole vocabulary per point
        "interventions": [i.spec() for i in trace.interventions],
        "cards": shown_cards,
        "graph": graph,
    }  # fmt: skip
    if live is not None:
        say("packing the model for the browser")
        index["live"], chunks[LIVE_CHUNK] = live_part(bundle, trace, live)
    return {"index": index, "chunks": chunks}


def _title(bundle, trace: Trace, item: int) -> str:
    tokens = (trace.source_tokens or trace.target_tokens or [[]])[item]
    text = " ".join(t for t in tokens[:12])
    return f"{bundle.name} · {text}{' …' if len(tokens) > 12 else ''}"


def _input(trace: Trace, inputs, has_encoder: bool) -> dict:
    out = {"source": trace.source_tokens, "target": trace.target_tokens}
    if inputs is not None:
        out.update(decoder_input=decoder_input_text(inputs.decoder_input, has_encoder),
                   translation=inputs.translation, notes=list(inputs.notes))  # fmt: skip
    return out


def _blocks(config, trace: Trace) -> list[dict]:
    """The architecture strip: each block of the diagram with the indices of its steps (the window's diagram)."""
    steps = block_steps(trace)
    return [{"key": b.key, "label": b.label, "column": b.column, "kind": b.kind, "layer": b.layer,
             "steps": steps.get(b.key, [])} for b in architecture(config)]  # fmt: skip


def _lens(bundle, trace: Trace, items: list[int]) -> dict:
    """{"note": why there is none} or {"items": {item: lens}} with each point's top tokens per position."""
    why = lens_analysis.no_output_layer(bundle)
    if why is not None:
        return {"note": why}
    out = {}
    for b in items:
        lens = lens_analysis.compute(bundle, trace, b)
        out[str(b)] = {
            "stack": lens.stack, "labels": lens.labels, "steps": [trace[s].index for s in lens.steps],
            "positions": lens.positions, "emitted": lens.emitted, "notes": lens.notes,
            "top": [[[[tok, finite_or_text(p)] for tok, p in zip(lens.top_tokens[i][j], lens.top_probs[i, j].tolist())]
                     for j in range(len(lens.positions))] for i in range(len(lens.steps))],
            "final": [[[finite_or_text(lens.final_probs[i, j]), int(lens.final_ranks[i, j])]
                       for j in range(len(lens.positions))] for i in range(len(lens.steps))],
        }  # fmt: skip
    return {"items": out}
