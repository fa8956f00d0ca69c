"""Derivations of clicked cells, made ahead for the page on a budget of cells (analyses.derive computes each).

A page cannot run the model, so a click can only show a derivation that was made when the page was written.
Every cell of a step is derived or none is, so the page can say plainly which steps have them: the attention
weights first (the cells people click), then the other steps from the smallest, while the budget of cells lasts
(en-hi's sentence: every attention map and the small steps; a 510-token run: the steps that are small enough).
For any other cell the page shows the `scratchformer derive` command that derives it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..analyses import derive
from ..errors import UserError
from ..plotdata.cells import cell_index
from ..recording.trace import Step, Trace
from .maps import shown_cells
from .packing import finite_or_text

DERIVE_CELLS = 2500  # about 0.3 s on en-hi; each derivation adds ~150 bytes to the page


def chosen_steps(trace: Trace, budget: int = DERIVE_CELLS) -> list[Step]:
    """The steps whose every cell (first batch item, every head) is derived: attention weights, then smallest
    first, while their cells fit in `budget`."""
    order = sorted(trace, key=lambda s: (s.kind != "attention_weights", shown_cells(s), s.index))
    chosen, left = [], budget
    for step in order:
        n = shown_cells(step)
        if n <= left:
            chosen.append(step)
            left -= n
    return sorted(chosen, key=lambda s: s.index)


def compact(d: derive.Derivation, trace: Trace) -> dict:
    """What the page shows of a derivation: value, recomputed value, formula, expression, note, terms, and the
    inputs read, counted per step (by index, for links) and per parameter."""
    steps: dict[int, int] = {}
    params: dict[str, int] = {}
    for cell in d.inputs:
        if cell.step is not None:
            i = trace[cell.step].index
            steps[i] = steps.get(i, 0) + 1
        elif cell.param is not None:
            params[cell.param] = params.get(cell.param, 0) + 1
    return {"v": finite_or_text(d.value), "r": finite_or_text(d.recomputed), "ok": bool(d.agrees()), "f": d.formula,
            "e": d.expression, "n": d.note, "t": [[t.label, finite_or_text(t.value)] for t in d.terms],
            "in": [[i, n] for i, n in steps.items()], "p": [[k, n] for k, n in params.items()],
            "u": d.unlisted}  # fmt: skip


def build_derivations(bundle, trace: Trace, maps: dict, budget: int = DERIVE_CELLS,
                      cancelled: Callable[[], bool] | None = None) -> dict[str, dict]:  # fmt: skip
    """Step index (text) → {"head,row,col": compact derivation} for the first batch item of each chosen step; `maps`
    (maps.build_maps) gives each map's chosen vocabulary columns."""
    out: dict[str, dict] = {}
    for step in chosen_steps(trace, budget):
        info = maps[f"{step.index}/0"]
        if info["block"] != [1, 1]:  # a reduced map's cells are blocks: nothing to click on one by one
            continue
        heads, rows, cols = info["shape"]
        vocab = info.get("vocab_ids")
        try:
            cells = {f"{h},{r},{c}": compact(derive.compute(bundle, trace, step.name,
                                                            cell_index(step, 0, h, r, c, vocab)), trace)
                     for h in range(heads) for r in range(rows) for c in range(cols)}  # fmt: skip
        except UserError:  # a step this model cannot derive: the page offers the command instead
            continue
        out[str(step.index)] = cells
        if cancelled is not None and cancelled():
            break
    return out
