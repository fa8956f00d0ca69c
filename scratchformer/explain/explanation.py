"""explain_step: the texts of texts.py filled with the numbers of numbers.py, for one step of one trace."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..recording.trace import Step, Trace
from ..transformer.config import TransformerConfig
from .context import Ctx
from .numbers import Facts, facts
from .texts import HEADINGS, LINKS, NOTES, TEXTS

FIELDS = ("what", "why", "numbers")


@dataclass
class Explanation:
    """What a step computes, why, and its equation with this run's numbers, plus links to earlier steps."""

    what: str
    why: str
    numbers: str
    links: list[tuple[int, str]] = field(default_factory=list)  # (trace index, short text), earlier steps
    link_names: list[str] = field(default_factory=list)  # the linked steps' names, parallel to links
    key: str = ""  # the TEXTS key that fits this step, e.g. "attention_weights.cross"
    complete: bool = True  # False when a number could not be computed and a plainer text stands in

    def text(self) -> str:
        """Plain text for the command line: what, why, numbers, then "See step N (name): …" (N counts from 1)."""
        lines = [self.what, HEADINGS["why"].format(text=self.why), HEADINGS["numbers"].format(text=self.numbers)]
        for (index, text), name in zip(self.links, self.link_names):
            lines.append(HEADINGS["see"].format(n=index + 1, name=name, text=text))
        return "\n".join(lines)


def explain_step(trace: Trace, step: Step | int, config: TransformerConfig, batch: int = 0,
                 vocab_labels=None, item_stats=None) -> Explanation:
    """Explain one step of `trace` (a Step or its index) for batch item `batch`. Never raises for a valid step.
    `vocab_labels` (ids → token strings, e.g. the target tokenizer's token_strings) names predicted tokens that
    the run's own inputs do not show; `item_stats` (plotdata.TensorStats of that batch item, when the caller
    has them) saves computing them again."""
    step = step if isinstance(step, Step) else trace[step]  # a Step, its index or its name
    ctx = Ctx(trace, step, config, batch, vocab_labels, item_stats)
    try:
        found = facts(ctx)
        found_ok = True
    except Exception:  # noqa: BLE001 — an unusual trace must still get a (plainer) explanation
        found, found_ok = Facts(step.kind), False
    try:
        values = ctx.common()
    except Exception:  # noqa: BLE001
        values, found_ok = {}, False
    values.update({k: v for k, v in found.values.items() if v is not None})

    texts, complete = {}, found_ok
    for name in FIELDS:
        text, full = _render(found.key, step.kind, name, values, ctx.text_only)
        texts[name] = text if text is not None else (step.title if name == "what" else step.formula)
        complete = complete and full
    notes = " ".join(NOTES[n] for n in found.notes if n in NOTES)
    if notes:
        texts["what"] = f"{texts['what']} {notes}"

    links, names, seen = [], [], set()
    for linked, link_key in found.links:
        if linked is None or linked.index >= step.index or linked.index in seen:
            continue
        seen.add(linked.index)
        links.append((linked.index, LINKS.get(link_key, link_key)))
        names.append(linked.name)
    return Explanation(texts["what"], texts["why"], texts["numbers"], links, names, found.key, complete)


def _render(key: str, kind: str, name: str, values: dict, text_only: bool = False) -> tuple[str | None, bool]:
    """The first template for this field that all its placeholders can fill, and whether it is a full one.

    Order: (for a decoder-only model, the variant's "@text" form,) the variant, its plain form, the kind (only
    where the variant has no text of its own for this field), the kind's plain form, the generic "step" text.
    """
    candidates = ([f"{key}@text"] if text_only else []) + [key, f"{key}.plain"]
    if name not in TEXTS.get(key, {}):
        candidates.append(kind)
    candidates += [f"{kind}.plain", "step"]
    full_keys = {key, kind, f"{key}@text"}
    for candidate in dict.fromkeys(candidates):
        template = TEXTS.get(candidate, {}).get(name)
        if template is None:
            continue
        try:
            return template.format(**values), candidate in full_keys
        except (KeyError, IndexError, ValueError, TypeError):
            continue
    return None, False


def explainer(trace: Trace, config: TransformerConfig, batch: int = 0, vocab_labels=None):
    """step name → its explanation as plain text, each computed once (for exporters that explain many files)."""
    cache: dict[str, str] = {}

    def text(name: str) -> str:
        if name not in cache:
            step = trace.find(name)
            cache[name] = "" if step is None else explain_step(trace, step, config, batch, vocab_labels).text()
        return cache[name]

    return text
