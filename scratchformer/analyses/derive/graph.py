"""Which trace step feeds which: the residual stream's points, and the input of every sublayer, norm and
output layer, found from the trace's order and the model's config (post-LN or pre-LN)."""

from __future__ import annotations

from ...recording.trace import Step, Trace
from ..stream import embedding_point

# the module that holds a stack's final norm (its trace name is '<stack>.final_norm')
FINAL_NORM_MODULES = {"encoder.final_norm": "encoder_norm", "decoder.final_norm": "decoder_norm"}


def side(step: Step) -> str:
    """'src' for the source embeddings and the encoder, 'tgt' for the decoder's side and the output layer."""
    return "src" if step.stack in ("src_embed", "encoder") else "tgt"


def is_stream_point(trace: Trace, step: Step, norm_first: bool) -> bool:
    """A point of the residual stream: what one sublayer hands the next (the embeddings' output, each Add & Norm's
    output — the LayerNorm post-LN, the residual sum pre-LN — and a stack's final norm)."""
    name = step.name
    if step.stack in ("src_embed", "tgt_embed"):
        # the last of sum → LayerNorm (BERT, BART) → dropout (training only) that this trace has
        return name == embedding_point(trace, "decoder" if step.stack == "tgt_embed" else "encoder")
    if name.endswith(".final_norm.out"):
        return True
    if ".add_norm" in name:
        return name.endswith(".residual") if norm_first else name.endswith(".out")
    return False


def stream_before(trace: Trace, index: int, on_side: str, norm_first: bool) -> Step:
    """The last residual-stream point before trace step `index` on one side ('src' or 'tgt')."""
    for s in reversed(trace.steps[:index]):
        if side(s) == on_side and is_stream_point(trace, s, norm_first):
            return s
    raise LookupError(f"no residual-stream point before step {index}")


def first_step_of(trace: Trace, sublayer: str) -> Step:
    prefix = sublayer + "."
    return next(s for s in trace if s.name.startswith(prefix))


def sublayer_input(trace: Trace, sublayer: str, norm_first: bool) -> Step:
    """What a sublayer (attention or feed-forward) reads: the stream post-LN, its own pre-norm pre-LN."""
    first = first_step_of(trace, sublayer)
    if norm_first:
        before = trace.steps[first.index - 1]
        if before.name.endswith(".norm") and before.kind == "layer_norm":
            return before
    return stream_before(trace, first.index, side(first), norm_first)


def memory_step(trace: Trace, norm_first: bool) -> Step:
    """The encoder's output, which cross-attention reads its keys and values from."""
    final = trace.find("encoder.final_norm.out")
    if final is not None:
        return final
    src = [s for s in trace if side(s) == "src" and is_stream_point(trace, s, norm_first)]
    return src[-1]


def residual_parts(trace: Trace, step: Step, norm_first: bool) -> tuple[Step, Step]:
    """(x, Sublayer(x)) of an Add step '<layer>.add_normK.residual'; in a training run the second is
    Dropout(Sublayer(x)), the '<layer>.add_normK.dropout' step."""
    sub_out = next(s for s in reversed(trace.steps[: step.index]) if s.kind in ("projection", "ffn_out"))
    x = stream_before(trace, first_step_of(trace, sub_out.sublayer).index, side(step), norm_first)
    name = step.name.removesuffix(".residual")
    dropped, post = trace.find(f"{name}.dropout"), trace.find(f"{name}.post_norm")  # post: Gemma's sandwich
    return x, dropped if dropped is not None else post if post is not None else sub_out


def ffn_hidden(trace: Trace, ffn: str) -> str:
    """The hidden layer W_2 reads: '<ffn>.hidden', or its dropout '<ffn>.dropout' in a training run."""
    return f"{ffn}.dropout" if trace.find(f"{ffn}.dropout") is not None else f"{ffn}.hidden"


def norm_input(trace: Trace, step: Step, norm_first: bool) -> Step:
    """What a LayerNorm / RMSNorm step normalised."""
    name = step.name
    if name.endswith("_embed.layer_norm"):
        return trace[name.replace(".layer_norm", ".sum")]
    if ".add_norm" in name and name.endswith(".out"):  # post-LN: the residual sum just before it
        return trace[name.replace(".out", ".residual")]
    if name.endswith(".post_norm"):  # a sandwich's second norm: the sublayer's output just before it
        return trace.steps[step.index - 1]
    return stream_before(trace, step.index, side(step), norm_first)  # pre-norm and the final norms


def norm_module(step: Step) -> str:
    """The module path of the norm that computed a layer_norm step (for its γ, β and ε)."""
    name = step.name
    if name.endswith("_embed.layer_norm"):
        return name
    if name.endswith(".final_norm.out"):
        return FINAL_NORM_MODULES[name[: -len(".out")]]
    if name.endswith(".post_norm"):  # the step and its module share the name
        return name
    return name.rsplit(".", 1)[0] + ".norm"  # '<layer>.add_normK.out' / '.norm' → '<layer>.add_normK.norm'


def generator_input(trace: Trace, norm_first: bool) -> Step:
    """What the output layer multiplies: the decoder's output (× d_model^-0.5 first for T5 v1.0)."""
    scaled = trace.find("generator.scaled")
    if scaled is not None:
        return scaled
    return stream_before(trace, trace["generator.logits"].index, "tgt", norm_first)
