"""What the live page needs to explain a typed sentence's steps in the browser (explain.js) exactly as
scratchformer.explain does in Python, without the sentences being written twice.

    ctx = explain_context(bundle)              # JSON-able; the page carries it once per model
    # in the browser: sfLiveExplain.explain(engine.trace(text, null), stepIndex, 0, ctx)
    #   → {what, why, numbers, links: [[index, text]]}, as page_data's explanations[f"{index}/0"]

The browser fills the same templates (texts.py's TEXTS and PHRASES, shipped here) with the numbers of its own run.
Everything that does not change with the sentence is worked out here, once, by scratchformer.explain itself, from
a one-sentence trace of the model (every trace of a model has the same steps, model.py's _step_template): per step
the TEXTS key numbers.py picks (the browser changes it only where the data choose: a mask with nothing blocked),
the links to earlier steps and the steps it reads (by the link's LINKS key), the notes appended to "what", and the
placeholder values that depend on the config and the step list only (STATIC). The browser computes the rest: the
values numbers.py and Ctx.common read from tensors, token labels and counts of positions.

Values travel typed, because a template may format them ({sqrt_dm:.2f}) and a Count prints differently from a
plain int: a str as is, a number as [tag, value] with tag "N" (explain.format.Num: three significant figures),
"C" (Count: thousands grouped), "i" (a plain int) or "f" (a plain float); a value that is not finite as the
string "inf", "-inf" or "nan" in place of the number.
"""

from __future__ import annotations

import math

from ...explain.context import Ctx
from ...explain.explanation import explain_step
from ...explain.format import Count, Num
from ...explain.numbers import facts
from ...explain.texts import NOTES, PHRASES, TEXTS
from ...recording.trace import Trace

VERSION = 1
ALL = "*"
# Ctx.common()'s values that depend on the config and the step alone (a live run is one batch item: batch_no 1 and
# no b_note); the browser makes the rest (shape, n_pos and its counted phrases, min/max/mean/std).
COMMON_STATIC = ("d_model", "h", "d_k", "d_ff", "max_len", "formula", "title", "side", "block", "vocab", "d_attn",
                 "norm_name", "plus_b", "w1_b1", "and_b2", "plus_b2", "wo_b", "s_bring")  # fmt: skip
# numbers.py's values, by step kind, that depend on the config and the step list alone (ALL: every one it gives)
STATIC: dict[str, tuple[str, ...] | str] = {
    "embedding": ("table_size", "sqrt_dm"),
    "positional_encoding": ("n_sin", "n_cos", "slow_dim", "last_dims", "max_wavelength"),
    "qkv": ALL, "heads": ALL, "concat": ALL, "projection": ALL, "ffn_out": ALL,
    "rotary": ("which", "theta", "d_rot", "half", "fast", "slow", "fast_period", "slow_period", "rot_clause"),
    "scaled_scores": ("sqrt_dk", "s", "sqrt_s"),
    "ffn_hidden": ("act_name", "act_short"), "ffn_gate": ("act_name", "act_short"),
    "layer_norm": ("eps", "stack", "consumer"),
    "dropout": ("p", "keep_scale"),
}  # fmt: skip


def explain_context(bundle, trace: Trace | None = None, vocab: bool = True) -> dict:
    """The JSON-able `ctx` of sfLiveExplain.explain for this model. `trace`: any trace of the model (its first batch
    item is read); by default one of the bundle's first example. `vocab=False` leaves out the target vocabulary's
    token strings (ctx["vocab"]), which name predicted tokens: the page may set them from the live model's target
    tokenizer instead (sfLive.vocabulary's labels)."""
    config = bundle.config
    if trace is None:
        inputs = bundle.prepare(bundle.examples()[0].source if bundle.examples() else "a", truncate=True)  # blog: 10
        _, trace = bundle.run(inputs, keep_output=False)
    labels = bundle.tgt_tokenizer.token_strings
    steps = []
    for step in trace:
        ctx = Ctx(trace, step, config, 0, labels)
        found = facts(ctx)
        ex = explain_step(trace, step, config, 0, labels)  # the links exactly as the explanation gives them
        common = ctx.common()
        common = {name: common[name] for name in COMMON_STATIC if name in common}
        common.update(batch_no=Count(1), b_note="")
        names = STATIC.get(step.kind, ())
        values = {k: v for k, v in found.values.items() if v is not None and (names == ALL or k in names)}
        refs = {}
        for linked, link_key in found.links:  # the steps numbers.py reads, by the role their link has
            if linked is not None:
                refs.setdefault(link_key, linked.index)
        steps.append({
            "name": step.name, "key": found.key, "common": common, "values": _typed_all(values),
            "links": [[i, text] for i, text in ex.links], "refs": refs,
            "notes": " ".join(NOTES[n] for n in found.notes if n in NOTES), "noun": ctx.noun(_side(ctx)),
        })  # fmt: skip
    # the common values every step shares go once into ctx["common"]; each step keeps the others
    shared = {k: v for k, v in steps[0]["common"].items() if all(s["common"].get(k, v) == v for s in steps)
              and all(k in s["common"] for s in steps)} if steps else {}  # fmt: skip
    for s in steps:
        s["common"] = _typed_all({k: v for k, v in s["common"].items() if k not in shared})
    kinds = {s.kind for s in trace}
    texts = {key: fields for key, fields in TEXTS.items()
             if key == "step" or key.split(".")[0].split("@")[0] in kinds}  # fmt: skip
    out = {
        "version": VERSION, "model": bundle.name, "text_only": bool(config.has_decoder and not config.has_encoder),
        "share_embeddings": bool(config.share_embeddings),
        "special": [["eos", config.eos_id], ["bos", config.bos_id], ["pad", config.pad_id]],
        "common": _typed_all(shared), "texts": texts, "phrases": dict(PHRASES), "steps": steps,
    }  # fmt: skip
    if vocab:
        out["vocab"] = labels(list(range(config.tgt_vocab_size)))
    return out


def _side(ctx: Ctx) -> str:
    """The position axis Ctx.common counts (the step's first, or its stack's)."""
    pos = ctx.pos_dims()
    return pos[0] if pos else "src_pos" if ctx.step.stack in ("src_embed", "encoder") else "tgt_pos"


def _typed_all(values: dict) -> dict:
    return {k: _typed(v) for k, v in values.items()}


def _typed(value):
    """A placeholder value as JSON: str as is, numbers as [tag, number] (see the module's docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ["i", int(value)]
    tag = "N" if isinstance(value, Num) else "C" if isinstance(value, Count) else "i" if isinstance(value, int) else "f"
    number = float(value) if tag in ("N", "f") else int(value)
    if tag in ("N", "f") and not math.isfinite(number):
        number = "nan" if math.isnan(number) else "inf" if number > 0 else "-inf"
    return [tag, number]
