"""What the live page needs beside a live run to derive a clicked cell and read the logit lens in the browser
(derive.js): for every step of the model's trace, which rule derives its cells, which steps and
parameters that rule reads, and the texts of Python's own rule that do not depend on the cell; and for the lens,
its points, their labels and the read-out.

    derive_context(bundle) → {"version", "steps": [plan per step], "lens": {...}, "tokenizers", "omega"}

The step list is the same for every input (model.py's step template), so one context serves every sentence a
reader types. The plans are found with the very functions analyses.derive uses (its graph module: which step
feeds which), and the constant texts are taken from analyses.derive itself, run on a template trace: the browser
writes only what holds this cell's numbers (expressions, most notes, the labels of long sums) and never a copy of
a sentence that is the same for every cell.
"""

from __future__ import annotations

from torch import nn

from ...analyses import derive
from ...analyses import lens as lens_analysis
from ...analyses.derive import graph
from ...analyses.derive.attention_rules import scored
from ...analyses.stream import point_label, residual_points
from ...recording.trace import Step, Trace

VERSION = 1

# Which texts of a rule are the same for every cell of a step: "f" formula, "n" note, "t" the terms' labels.
# They are shipped as analyses.derive writes them for one sample cell; the browser writes the others.
CONSTANT = {
    "tokens": "f", "lookup": "f", "scaled": "fnt", "pe_sinusoid": "f", "pe_zero": "fn", "summed_input": "fnt",
    "projection_in": "f", "head_split": "f", "score": "f", "scaled_score": "fnt", "mask": "f",
    "masked_score": "ft", "weight": "f", "context": "f", "concat": "f", "output_projection": "fn",
    "rotary": "", "residual": "fnt", "norm": "fnt", "hidden_gated": "fnt", "hidden": "f", "gate": "f",
    "linear_branch": "fn", "ffn_out": "fn", "logits": "f", "probabilities": "f",
}  # fmt: skip


def template_trace(bundle) -> Trace:
    """A trace of the model's first example (or of "a"): its steps are every trace's (model.py's step template). The
    example is cut to the model's positions (blog reads 10 tokens)."""
    examples = bundle.examples()
    inputs = bundle.prepare(examples[0].source if examples else "a", truncate=True)
    return bundle.run(inputs, keep_output=False)[1]


def derive_context(bundle, trace: Trace | None = None) -> dict:
    """JSON-able: what derive.js reads beside a live run and live_model's weights (see the module's
    docstring). `trace`: a trace of the model to plan from, such as the recorded run a live page opens with; one
    that changed the model on purpose or has dictionaries attached is not every trace's, so a template is made."""
    if trace is None or trace.interventions or getattr(trace, "dictionaries", None):
        trace = template_trace(bundle)
    c = bundle.config
    out = {"version": VERSION, "steps": [step_plan(bundle, trace, s) for s in trace],
           "lens": lens_plan(bundle, trace),
           "tokenizers": {"src": bundle.src_tokenizer.name, "tgt": bundle.tgt_tokenizer.name}}  # fmt: skip
    if c.positional == "rotary":  # ω_i = θ^(−2i/d_rot) in float32, exactly as the rule reads it
        from ...transformer.rotary import inverse_frequencies

        out["omega"] = [float(w) for w in inverse_frequencies(c)]
    return out


# --- one step's plan ---------------------------------------------------------------------------------------------


def rule_of(bundle, step: Step) -> str | None:
    """The browser's rule for a step (analyses.derive.RULES split where one rule writes two kinds of text), or
    None for a kind the live engine never records."""
    kind, c = step.kind, bundle.config
    if kind == "embedding":
        return "scaled" if step.name.endswith(".scaled") else "lookup"
    if kind == "positional_encoding":
        return "pe_zero" if c.positional in ("none", "rotary") else "pe_sinusoid"
    if kind == "ffn_hidden":
        return "hidden_gated" if bundle.model.get_submodule(step.sublayer).w_v is not None else "hidden"
    if kind == "ffn_gate":
        return "gate" if step.name.endswith(".gate") else "linear_branch"
    return {"tokens": "tokens", "input": "summed_input", "qkv": "projection_in", "heads": "head_split",
            "scores": "score", "scaled_scores": "scaled_score", "mask": "mask", "masked_scores": "masked_score",
            "attention_weights": "weight", "context": "context", "concat": "concat",
            "projection": "output_projection", "rotary": "rotary", "residual": "residual", "layer_norm": "norm",
            "ffn_out": "ffn_out", "logits": "logits", "probabilities": "probabilities"}.get(kind)  # fmt: skip


def step_plan(bundle, trace: Trace, step: Step) -> dict:
    """{"name", "rule", what the rule reads …, and its constant texts: "formula", "note", "labels"}."""
    rule = rule_of(bundle, step)
    plan = {"name": step.name, "rule": rule}
    if rule is None or step.sublayer.endswith(".moe"):
        return {**plan, "rule": None}
    plan.update(READS[rule](bundle, trace, step))
    plan.update(constant_texts(bundle, trace, step, CONSTANT[rule]))
    return plan


def constant_texts(bundle, trace: Trace, step: Step, which: str) -> dict:
    """The texts analyses.derive writes for the step's first cell that are the same for every cell."""
    if not which:
        return {}
    d = derive.compute(bundle, trace, step.name, (0,) * len(step.dims))
    out = {}
    if "f" in which:
        out["formula"] = d.formula
    if "n" in which:
        out["note"] = d.note
    if "t" in which:
        out["labels"] = [t.label for t in d.terms]
    return out


def _bias(bundle, name: str) -> str | None:
    """The bias parameter's name when the model has it (Llama's linear maps have none)."""
    return name if name in bundle.model.state_dict() else None


def _linear(bundle, weight: str) -> dict:
    return {"weight": f"{weight}.weight", "bias": _bias(bundle, f"{weight}.bias")}


def _pads(step: Step) -> str:
    """Whose padding blocks a key of this attention step: the source's or the decoder input's."""
    return "src" if step.dims[-1] == "src_pos" else "tgt"


def _tokens(bundle, trace, step):
    side = "src" if step.stack == "src_embed" else "tgt"
    tok = bundle.src_tokenizer if side == "src" else bundle.tgt_tokenizer
    return {"side": side, "tokenizer": tok.name, "start_note": step.stack == "tgt_embed"}


def _lookup(bundle, trace, step):
    return {"tokens": trace[f"{step.stack}.tokens"].index, "param": f"{step.stack}.tokens.weight"}


def _scaled(bundle, trace, step):
    return {"lookup": trace[f"{step.stack}.lookup"].index, "d_model": bundle.config.d_model}


def _pe_sinusoid(bundle, trace, step):
    c = bundle.config
    return {"d_model": c.d_model, "offset": bundle.model.get_submodule(step.stack).position_offset,
            "layout": "halves" if c.positional == "sinusoidal_halves" else "interleaved"}  # fmt: skip


def _summed_input(bundle, trace, step):
    first = trace.find(f"{step.stack}.scaled") or trace[f"{step.stack}.lookup"]
    return {"first": first.index, "pe": trace[f"{step.stack}.positional_encoding"].index}


def _projection_in(bundle, trace, step):
    mha, last = bundle.model.get_submodule(step.sublayer), step.name.rsplit(".", 1)[1]
    if last == "kv_proj":
        x, parts = graph.memory_step(trace, bundle.config.norm_first), "KV"
    else:
        x = graph.sublayer_input(trace, step.sublayer, bundle.config.norm_first)
        parts = "Q" if last == "q_proj" else "QKV"
    return {"x": x.index, "x_name": x.name, **_linear(bundle, f"{step.sublayer}.{last}"), "parts": parts,
            "d_attn": mha.d_attn, "d_kv_attn": mha.d_kv_attn, "d_head": mha.d_head}  # fmt: skip


def _head_split(bundle, trace, step):
    mha, part = bundle.model.get_submodule(step.sublayer), step.name.rsplit(".", 1)[1]
    if mha.cross:
        source = f"{step.sublayer}.q_proj" if part == "q" else f"{step.sublayer}.kv_proj"
        offset = mha.d_attn if part == "v" else 0
    else:
        source = f"{step.sublayer}.qkv"
        offset = [0, mha.d_attn, mha.d_attn + mha.d_kv_attn]["qkv".index(part)]
    return {"source": trace[source].index, "source_last": source.rsplit(".", 1)[1], "offset": offset,
            "d_head": mha.d_head, "part": part}  # fmt: skip


def _heads(bundle, step) -> dict:
    """Query heads per key/value head (grouped-query attention) and what the notes say of it."""
    mha = bundle.model.get_submodule(step.sublayer)
    return {"group": mha.n_heads // mha.n_kv_heads, "shared": mha.n_kv_heads != mha.n_heads}


def _score(bundle, trace, step):
    mha = bundle.model.get_submodule(step.sublayer)
    return {"q": trace[scored(_Find(trace), step.sublayer, "q")].index,
            "k": trace[scored(_Find(trace), step.sublayer, "k")].index, **_heads(bundle, step),
            "rotary": bool(mha.rotary)}  # fmt: skip


class _Find:
    """Enough of analyses.derive's Reader for its `scored` (which reads trace.find only)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace


def _scaled_score(bundle, trace, step):
    return {"scores": trace[f"{step.sublayer}.scores"].index,
            "d_head": bundle.model.get_submodule(step.sublayer).d_head}  # fmt: skip


def _mask(bundle, trace, step):
    return {"causal": step.attention_type == "decoder.self_attn", "pads": _pads(step)}


def _masked_score(bundle, trace, step):
    return {"scaled": trace[f"{step.sublayer}.scaled_scores"].index, "mask": trace[f"{step.sublayer}.mask"].index,
            **_mask(bundle, trace, step)}  # fmt: skip


def _weight(bundle, trace, step):
    return {"masked": trace[f"{step.sublayer}.masked_scores"].index, **_mask(bundle, trace, step)}


def _context(bundle, trace, step):
    return {"weights": trace[f"{step.sublayer}.weights"].index, "v": trace[f"{step.sublayer}.v"].index,
            **_heads(bundle, step)}  # fmt: skip


def _concat(bundle, trace, step):
    mha = bundle.model.get_submodule(step.sublayer)
    return {"context": trace[f"{step.sublayer}.context"].index, "d_head": mha.d_head, "n_heads": mha.n_heads}


def _output_projection(bundle, trace, step):
    return {"concat": trace[f"{step.sublayer}.concat"].index, **_linear(bundle, f"{step.sublayer}.out_proj")}


def _rotary(bundle, trace, step):
    which = step.name.rsplit(".", 1)[1].split("_")[0]
    before = trace.find(f"{step.sublayer}.{which}_normed") or trace[f"{step.sublayer}.{which}"]
    return {"before": before.index, "which": which, "d_rot": bundle.config.d_rotary,
            # the three formulas the rule writes: the first half of a pair, the second, past the turning dims
            "formulas": [derive.compute(bundle, trace, step.name, (0, 0, 0, e)).formula
                         for e in (0, bundle.config.d_rotary // 2)]}  # fmt: skip


def _residual(bundle, trace, step):
    x, sub = graph.residual_parts(trace, step, bundle.config.norm_first)
    return {"x": x.index, "sub": sub.index}


def _norm(bundle, trace, step):
    z, path = graph.norm_input(trace, step, bundle.config.norm_first), graph.norm_module(step)
    module = bundle.model.get_submodule(path)
    rms = not isinstance(module, nn.LayerNorm)
    return {"z": z.index, "gamma": f"{path}.weight", "beta": None if rms else f"{path}.bias",
            "eps": float(module.eps), "rms": rms, "plus_one": bool(getattr(module, "plus_one", False))}  # fmt: skip


def _hidden_gated(bundle, trace, step):
    return {"gate": trace[f"{step.sublayer}.gate"].index, "linear": trace[f"{step.sublayer}.linear"].index}


def _activated(bundle, trace, step):
    """A unit act(x W_1 + b_1): the FFN's hidden layer, or a gated FFN's gate."""
    ffn = bundle.model.get_submodule(step.sublayer)
    x = graph.sublayer_input(trace, step.sublayer, bundle.config.norm_first)
    name = ffn.activation_name
    return {"x": x.index, **_linear(bundle, f"{step.sublayer}.w_1"), "act": name, "d_ff": ffn.w_1.out_features,
            "act_name": "ReLU" if name == "relu" else name.upper()}  # fmt: skip


def _linear_branch(bundle, trace, step):
    x = graph.sublayer_input(trace, step.sublayer, bundle.config.norm_first)
    return {"x": x.index, **_linear(bundle, f"{step.sublayer}.w_v")}


def _ffn_out(bundle, trace, step):
    return {"hidden": trace[graph.ffn_hidden(trace, step.sublayer)].index, **_linear(bundle, f"{step.sublayer}.w_2")}


def _logits(bundle, trace, step):
    x = graph.generator_input(trace, bundle.config.norm_first)
    return {"x": x.index, "weight": "generator.proj.weight",
            "bias": _bias(bundle, "generator.final_logits_bias")}  # fmt: skip


def _probabilities(bundle, trace, step):
    return {"logits": (trace.find("generator.capped") or trace["generator.logits"]).index}


READS = {
    "tokens": _tokens, "lookup": _lookup, "scaled": _scaled, "pe_sinusoid": _pe_sinusoid,
    "pe_zero": lambda *_: {}, "summed_input": _summed_input, "projection_in": _projection_in,
    "head_split": _head_split, "score": _score, "scaled_score": _scaled_score, "mask": _mask,
    "masked_score": _masked_score, "weight": _weight, "context": _context, "concat": _concat,
    "output_projection": _output_projection, "rotary": _rotary, "residual": _residual, "norm": _norm,
    "hidden_gated": _hidden_gated, "hidden": _activated, "gate": _activated, "linear_branch": _linear_branch,
    "ffn_out": _ffn_out, "logits": _logits, "probabilities": _probabilities,
}  # fmt: skip


# --- the lens ----------------------------------------------------------------------------------------------------


def lens_plan(bundle, trace: Trace) -> dict:
    """{"note": why there is none}, or the points (step indices, labels) and the read-out: the final norm (or
    None) and the output layer's weight, as analyses.lens reads them."""
    why = lens_analysis.no_output_layer(bundle)
    if why is not None:
        return {"note": why}
    c = bundle.config
    stack = lens_analysis.lens_stack(c)
    points = residual_points(trace, stack, c.norm_first)
    module = bundle.model.encoder_norm if stack == "encoder" else bundle.model.decoder_norm
    norm = None
    if module is not None:
        path = "encoder_norm" if stack == "encoder" else "decoder_norm"
        norm = {"kind": "layernorm" if isinstance(module, nn.LayerNorm) else "rmsnorm", "weight": f"{path}.weight",
                "bias": _bias(bundle, f"{path}.bias"), "eps": float(module.eps)}  # fmt: skip
    return {"stack": stack, "steps": [trace[p].index for p in points], "labels": [point_label(p) for p in points],
            "norm": norm, "head": "generator.proj.weight" if stack == "decoder" else "mlm_head.proj.weight",
            "k": lens_analysis.TOP_K}  # fmt: skip
