"""What the window says to teach a step: its explanation (cached per run, step and batch item) and the parameter
counts of the block, layer and model it belongs to. Both come from the core; this module only picks and caches."""

from __future__ import annotations

from scratchformer.explain import explain_step
from scratchformer.explain.tabs import explain_tab
from scratchformer.plotdata import block_key
from scratchformer.recording.trace import Step
from scratchformer.running.examples import known_fraction

OFFER_BELOW = 0.5  # offer the model's example when it knows less than half of the words


def explanation_for(result, step: Step, batch: int):
    """The core's Explanation of `step` for batch item `batch`, computed once per run."""
    key = (step.index, batch)
    cache = result.explanations
    if key not in cache:
        shown = result.stats_for(step, batch)  # the inspector's numbers of the same batch item
        cache[key] = explain_step(result.trace, step, result.bundle.config, batch, result.vocab_labels, shown)
    return cache[key]


def tab_explanation_for(result, tab: str, batch: int, view_facts: dict | None = None):
    """The core's explanation of a tab (scratchformer.explain.tabs) with what only the window knows: the
    translation, the model's training snapshots, the interventions of this run, and what the view shows now
    (`view_facts`, its explain_facts())."""
    from scratchformer.loading.bundle import snapshots_of, split_snapshot
    from scratchformer.plotdata import training_record

    facts: dict = dict(view_facts or {})
    if result.inputs.decoder_input == "generated":
        facts["translation"] = result.inputs.translation
    if tab == "training":
        base, _ = split_snapshot(result.request.model)
        facts["snapshot_steps"] = [s.step for s in snapshots_of(base)]
        record = training_record(base) or {}
        facts["total_steps"] = record.get("steps") if isinstance(record.get("steps"), int) else None
        facts["label_smoothing"] = (record.get("options") or {}).get("label_smoothing")
        facts["best_valid_loss"] = record.get("best_valid_loss")
    facts["interventions"] = [change.spec() for change in result.trace.interventions]
    return explain_tab(tab, result.trace, result.bundle.config, batch, facts)


def count_text(pc) -> str:
    """'66,048 = 4·(d_model² + d_model) = 4·(128² + 128)' style: the formula ends in the count when it has one."""
    formula = pc.formula or ""
    text = formula if formula.endswith(f"{pc.count:,}") else f"{pc.count:,}" + (f" ({formula})" if formula else "")
    return text + (f" — {pc.note}" if pc.note else "")


def parameter_lines(counts: dict, step: Step) -> list[tuple[str, str]]:
    """(what, "count = formula") for the step's diagram block, its layer, its stack and the whole model."""
    if not counts:
        return []
    keys = [("this block", block_key(step))]
    if step.layer is not None:
        keys.append((f"{step.stack} layer {step.layer + 1}", f"{step.stack}.{step.layer}"))
    if step.stack in ("encoder", "decoder"):
        keys.append((f"whole {step.stack}", step.stack))
    keys.append(("whole model", "total"))
    out = []
    for label, key in keys:
        pc = counts.get(key)
        if pc is None:
            continue
        out.append((label, count_text(pc)))
    return out


def should_offer(tokenizer, text: str) -> tuple[bool, int, int]:
    """(offer the model's example?, known words, words) for a text the model just read."""
    words = len(text.split())
    fraction = known_fraction(tokenizer, text)
    return fraction < OFFER_BELOW, round(fraction * words), words
