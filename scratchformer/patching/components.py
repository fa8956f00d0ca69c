"""The grid a sweep patches, named by step so that every cell leads to the step the window shows.

- heads: each head's output before the output projection W^O (the trace's `<attention>.context`, (B, h, T, d_k):
  TransformerLens's hook_z) of every attention — encoder self, decoder self, cross — at all positions, or at
  one query position (per position);
- residual-stream points × positions: the embeddings' output and each sublayer's (scratchformer.analyses.stream:
  `…add_normK.out` after a post-LN sublayer, `…add_normK.residual` after a pre-LN one);
- feed-forward (MLP) outputs × positions: `<layer>.ffn.out` (or `.moe.out`, a mixture of experts' sum).

A component also names an attention's q, k or v (as the scores read them) when path patching patches a
receiver's input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..transformer.attention import MultiHeadAttention
from ..transformer.embeddings import Embeddings
from ..transformer.feed_forward import RerunSublayer
from .interventions import attention_names, attention_parts

_IN_LAYER = re.compile(r"(?P<stack>encoder|decoder)\.(?P<layer>\d+)\.")


@dataclass(frozen=True)
class Component:
    """One cell of the grid: `step` patched for `head` (None: the whole step) at `position` (None: every
    position), inside layer `layer` of `stack` (-1: the embeddings). `axis` names the positions: "tgt" (the
    decoder's, where a causal decoder lets a patched run start late) or "src" (the encoder's, and cross-attention
    keys and values)."""

    kind: str  # "head", "resid", "mlp", or "q" / "k" / "v" (a receiver's input, path patching)
    step: str
    stack: str
    layer: int
    head: int | None = None
    position: int | None = None
    axis: str = "tgt"

    @property
    def head_axis(self) -> bool:
        """Whether the step is laid out (B, h, T, d) (an attention's heads) rather than (B, T, d)."""
        return self.kind in ("head", "q", "k", "v")

    @property
    def attention(self) -> str:
        """'decoder.1.cross_attn' for a head or an attention's input; '' otherwise."""
        return self.step.rpartition(".")[0] if self.head_axis else ""


_SUBLAYERS = {"encoder": {1: "self-attention", 2: "feed-forward"},
              "decoder": {1: "self-attention", 2: "cross-attention", 3: "feed-forward"}}


def component_label(c: Component, position: bool = True) -> str:
    """'decoder layer 2 cross-attention head 1 at position 3', 'encoder layer 1 feed-forward output', 'decoder
    embeddings' (layers, heads and positions from 1, as the window's titles count them)."""
    where = f" at position {c.position + 1}" if position and c.position is not None else ""
    if c.head_axis:
        kind = {"self_attn": "self-attention", "cross_attn": "cross-attention"}[c.attention.split(".")[2]]
        part = "" if c.kind == "head" else f" {c.kind}"
        return f"{c.stack} layer {c.layer + 1} {kind} head {c.head + 1}{part}{where}"
    if c.kind == "mlp":
        return f"{c.stack} layer {c.layer + 1} feed-forward{where}"
    m = re.fullmatch(r"\w+\.\d+\.add_norm(\d)\.\w+", c.step)
    if m is None:
        return f"{c.stack} embeddings{where}"
    return f"{c.stack} layer {c.layer + 1} after {_SUBLAYERS[c.stack][int(m[1])]}{where}"


def step_layer(step: str) -> tuple[str, int]:
    """'decoder.1.ffn.out' → ('decoder', 1); the embeddings' steps → (stack, -1)."""
    m = _IN_LAYER.match(step)
    if m:
        return m["stack"], int(m["layer"])
    return ("encoder" if step.startswith("src_embed") else "decoder"), -1


def attention_modules(model) -> dict[str, MultiHeadAttention]:
    """'decoder.1.cross_attn' → the module, for every attention of the model, in the order they run."""
    modules = {m.trace_name: m for m in model.modules() if isinstance(m, MultiHeadAttention)}
    return {name: modules[name] for name in attention_names(model)}


def embedding_step(model, stack: str) -> str:
    """The step that holds a stack's embeddings output: their LayerNorm (BERT, BART) or the sum."""
    embed: Embeddings = model.src_embed if stack == "encoder" else model.tgt_embed
    return f"{embed.trace_name}.{'layer_norm' if embed.layer_norm is not None else 'sum'}"


def residual_steps(model, stack: str) -> list[str]:
    """Every point of a stack's residual stream, in order: the embeddings' output, then each sublayer's."""
    c = model.config
    part = "residual" if c.norm_first else "out"
    points = [embedding_step(model, stack)]
    layers = model.encoder if stack == "encoder" else model.decoder
    for i, layer in enumerate(layers):
        if stack == "encoder":
            points += [f"encoder.{i}.add_norm1.{part}", f"encoder.{i}.add_norm2.{part}"]
        elif getattr(layer, "parallel", False):  # GPT-NeoX: one residual add joins both sublayers
            points.append(f"decoder.{i}.add_norm3.residual")
        else:
            subs = (1, 2, 3) if layer.cross_attn is not None else (1, 3)
            points += [f"decoder.{i}.add_norm{k}.{part}" for k in subs]
    return points


def layer_input_step(model, stack: str, layer: int) -> str:
    """The step whose value is the input of layer `layer` of the stack: the embeddings' output for layer 0, else
    the last residual point of the layer before."""
    points = residual_steps(model, stack)
    if layer == 0:
        return points[0]
    return [p for p in points if p.startswith(f"{stack}.{layer - 1}.")][-1]


def mlp_steps(model, stack: str) -> list[str]:
    """Each layer's feed-forward (or mixture-of-experts) output (not the experts' inside a mixture)."""
    return [f"{m.trace_name}.out" for m in model.modules() if isinstance(m, RerunSublayer)
            and re.fullmatch(rf"{stack}\.\d+\.(ffn|moe)", m.trace_name)]  # fmt: skip


def stacks(model) -> list[str]:
    c = model.config
    return [s for s, has in (("encoder", c.has_encoder and c.has_decoder), ("decoder", c.has_decoder)) if has]


def _axis(stack: str) -> str:
    return "src" if stack == "encoder" else "tgt"


def head_components(model, n_tgt: int, n_src: int, per_position: bool) -> list[Component]:
    """Every head of every attention (in the order the attentions run, heads in order), at all query positions or
    at each one."""
    out = []
    for name, module in attention_modules(model).items():
        stack, layer = step_layer(name)
        n = n_src if stack == "encoder" else n_tgt
        for h in range(module.n_heads):
            positions = range(n) if per_position else [None]
            out += [Component("head", f"{name}.context", stack, layer, h, p, _axis(stack)) for p in positions]
    return out


def point_components(model, steps: list[str], n_tgt: int, n_src: int, kind: str) -> list[Component]:
    """Each of these (B, T, d_model) steps at each position."""
    out = []
    for step in steps:
        stack, layer = step_layer(step)
        n = n_src if stack == "encoder" else n_tgt
        out += [Component(kind, step, stack, layer, None, p, _axis(stack)) for p in range(n)]
    return out


def residual_components(model, n_tgt: int, n_src: int) -> list[Component]:
    steps = [s for stack in stacks(model) for s in residual_steps(model, stack)]
    return point_components(model, steps, n_tgt, n_src, "resid")


def mlp_components(model, n_tgt: int, n_src: int) -> list[Component]:
    steps = [s for stack in stacks(model) for s in mlp_steps(model, stack)]
    return point_components(model, steps, n_tgt, n_src, "mlp")


def input_component(model, attention: str, head: int, part: str) -> Component:
    """A receiver's q, k or v (as its scores read them: after QK-norm and RoPE where the model has them)."""
    module = attention_modules(model)[attention]
    q, k, v = attention_parts(module)[:3]
    stack, layer = step_layer(attention)
    axis = "src" if stack == "encoder" or (module.cross and part != "q") else "tgt"
    return Component(part, f"{attention}.{dict(q=q, k=k, v=v)[part]}", stack, layer, head, None, axis)


def recorded_steps(model) -> list[str]:
    """Every step the sweeps read from the two runs: the grid's steps, each layer's input, and the q, k and v
    of every attention (a patched run starting late reads the corrupted run's keys and values)."""
    steps: list[str] = []
    for name, module in attention_modules(model).items():
        steps += [f"{name}.context"] + [f"{name}.{p}" for p in attention_parts(module)[:3]]
    for stack in stacks(model):
        steps += residual_steps(model, stack) + mlp_steps(model, stack)
    if model.config.has_encoder and model.encoder_norm is not None:
        steps.append("encoder.final_norm.out")  # the memory the decoder reads
    return list(dict.fromkeys(steps))
