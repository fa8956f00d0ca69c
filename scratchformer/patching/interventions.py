"""Interventions: change the forward pass on purpose and watch what breaks ("what if this head were gone?").

Five kinds, each a small explicit value, several at once:
- `HeadChange`: one head of one attention, changed in its context head_i = A_i V_i (before the output
  projection W^O): "zero" sets it to 0; "mean" replaces it by that head's context averaged over the positions of
  this input (an encoder's: over all its positions; a decoder's: over each position and those before it, so that
  generating one token at a time with the KV cache gives the same numbers and no later token leaks in); "scale"
  multiplies it by `factor`; "keep" keeps this head and zeroes every other head of the attention.
- `KeyKnockout`: the scores of the chosen key positions set to −∞ before the softmax (in every head of that
  attention), so each query's weights renormalise over the other keys.
- `Patch`: activation patching — one step's tensor replaced by the same step of another run (a clean sentence
  of the same length). Patchable are each attention's q, k, v, weights, context and out, and the output of every
  embedding, feed-forward, Add & Norm and final norm (`patchable_steps`).
- `StepEdit`: a function of one patchable step's tensor that returns the tensor the run carries on with — what the
  patching sweeps (scratchformer.patching) build their batched patches, their recordings and attribution
  patching's zero nudges from.

They act while `intervene(model, [...])` is open, through a context variable like the tracer's. With nothing
active the modules run exactly their usual code (the fused attention kernel included); an attention an
intervention touches takes the written-out path so that its heads can be changed. A traced run records the
changed values, says so in the changed steps' titles ("Weighted sum of values (head 1 zeroed)" — heads and
positions counted from 1 in titles, from 0 in specs, like layers), and lists the interventions in
`Trace.interventions`. Text specs (`--ablate`): `decoder.1.cross_attn.head0[:zero|mean|keep|scale=F]` and
`decoder.1.cross_attn.keys:2,3`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ..errors import UserError
from ..recording.intervention_context import active_interventions as active_interventions  # re-exported: its old home
from ..recording.intervention_context import applying
from ..recording.intervention_context import head_name as head_name  # re-exported: the name of what --ablate changes
from ..transformer.attention import MultiHeadAttention, attention, expand_kv
from ..transformer.embeddings import Embeddings
from ..transformer.feed_forward import RerunSublayer
from ..transformer.layers import AddNorm

HEAD_HOWS = ("zero", "mean", "keep", "scale")
ATTENTION_PARTS = ("q", "k", "v", "weights", "context")  # patched inside the attention's written-out path
# where a model turns or normalises its queries and keys, the heads the scores read are patched there instead
TURNED_PARTS = ("q_rotated", "k_rotated", "q_normed", "k_normed")


def attention_parts(module: MultiHeadAttention) -> tuple[str, ...]:
    """The patchable points inside one attention: q and k as the scores read them (after RoPE or QK-norm), v, the
    weights and the context."""
    q = "q_rotated" if module.rotary else "q_normed" if module.qk_norm != "none" else "q"
    return (q, q.replace("q", "k", 1), "v", "weights", "context")


@dataclass(frozen=True)
class HeadChange:
    """Zero, mean-ablate, scale or keep-only one head of an attention ("decoder.1.cross_attn", head from 0)."""

    attention: str
    head: int
    how: str = "zero"  # one of HEAD_HOWS
    factor: float = 0.0  # "scale" only

    def spec(self) -> str:
        how = f"scale={self.factor:g}" if self.how == "scale" else self.how
        return f"{self.attention}.head{self.head}:{how}"

    def note(self) -> str:
        h = self.head + 1
        return {"zero": f"head {h} zeroed", "mean": f"head {h} mean-ablated", "keep": f"only head {h} kept",
                "scale": f"head {h} scaled ×{self.factor:g}"}[self.how]  # fmt: skip

    def steps(self) -> tuple[str, ...]:
        return (f"{self.attention}.context",)


@dataclass(frozen=True)
class KeyKnockout:
    """No attention to these key positions (from 0) in any head of the attention: their scores become −∞."""

    attention: str
    positions: tuple[int, ...]

    def spec(self) -> str:
        return f"{self.attention}.keys:{','.join(map(str, self.positions))}"

    def note(self) -> str:
        return f"key{'s' * (len(self.positions) > 1)} {', '.join(str(p + 1) for p in self.positions)} knocked out"

    def steps(self) -> tuple[str, ...]:
        return tuple(f"{self.attention}.{s}" for s in ("mask", "masked_scores", "weights"))


@dataclass(frozen=True, eq=False)
class Patch:
    """Step `step` takes `values` (the same step of another run, batch axis of 1) instead of its own."""

    step: str
    values: torch.Tensor
    origin: str = "another run"  # for titles: "patched from <origin>"

    def spec(self) -> str:
        return f"patch {self.step} from {self.origin}"

    def note(self) -> str:
        return f"patched from {self.origin}"

    def steps(self) -> tuple[str, ...]:
        return (self.step,)


@dataclass(frozen=True, eq=False)
class StepEdit:
    """Step `step` carries on as `edit(tensor)`: many patches at once (each batch item its own cells), a recording
    that returns the tensor unchanged, or tensor + a zero that gradients are taken against. `edit` must return a
    tensor of the same shape."""

    step: str
    edit: Callable[[torch.Tensor], torch.Tensor]
    what: str = "patched by a sweep"  # for titles

    def spec(self) -> str:
        return f"{self.step} {self.what}"

    def note(self) -> str:
        return self.what

    def steps(self) -> tuple[str, ...]:
        return (self.step,)


Intervention = HeadChange | KeyKnockout | Patch | StepEdit

_SPEC = re.compile(r"(?P<att>(?:encoder|decoder)\.\d+\.(?:self_attn|cross_attn))\."
                   r"(?:head(?P<head>\d+)(?::(?P<how>zero|mean|keep|scale=(?P<factor>[-+0-9.eE]+)))?"
                   r"|keys:(?P<keys>\d+(?:,\d+)*))")  # fmt: skip


def attention_names(model) -> list[str]:
    """Every attention of the model by step-name prefix: encoder.L.self_attn, decoder.L.self_attn/cross_attn."""
    c = model.config
    names = [f"encoder.{i}.self_attn" for i in range(c.n_encoder_layers)] if c.has_encoder else []
    if c.has_decoder:
        for i in range(c.n_decoder_layers):
            names.append(f"decoder.{i}.self_attn")
            if c.has_encoder:
                names.append(f"decoder.{i}.cross_attn")
    return names


def _valid_specs(model) -> str:
    c = model.config
    kinds = []
    if c.has_encoder:
        kinds.append(f"encoder.L.self_attn (L 0–{c.n_encoder_layers - 1})")
    if c.has_decoder:
        kinds.append(f"decoder.L.self_attn{' or decoder.L.cross_attn' if c.has_encoder else ''} "
                     f"(L 0–{c.n_decoder_layers - 1})")
    return (f"write ATTENTION.headN[:zero|mean|keep|scale=F] or ATTENTION.keys:P[,P…], where ATTENTION is "
            f"{' or '.join(kinds)}, N is a head from 0 to {c.n_heads - 1} and P a key position from 0")


def parse_spec(text: str, model) -> HeadChange | KeyKnockout:
    """'decoder.1.cross_attn.head0:mean' → HeadChange; 'encoder.0.self_attn.keys:2,3' → KeyKnockout.
    A spec that does not fit this model raises UserError with one sentence saying what is valid."""
    match = _SPEC.fullmatch((text or "").strip())
    bad = f"Cannot read the intervention {text!r}: {_valid_specs(model)}."
    if match is None or match.group("att") not in attention_names(model):
        raise UserError(bad)
    att = match.group("att")
    if match.group("keys") is not None:
        return KeyKnockout(att, tuple(sorted({int(p) for p in match.group("keys").split(",")})))
    head = int(match.group("head"))
    if head >= model.config.n_heads:
        raise UserError(bad)
    how = match.group("how") or "zero"
    if how.startswith("scale="):
        try:
            return HeadChange(att, head, "scale", float(match.group("factor")))
        except ValueError:
            raise UserError(bad) from None
    return HeadChange(att, head, how)


def patchable_steps(model) -> dict[str, torch.nn.Module]:
    """Step name → the module that computes that step and replaces it when a patch asks (its output point, see
    intervention_context.patched), plus each attention's interior steps (q, k, v, weights, context → the
    attention module, patched inside it)."""
    steps: dict[str, torch.nn.Module] = {}
    for module in model.modules():
        n = getattr(module, "trace_name", None)
        if isinstance(module, MultiHeadAttention):
            steps.update({f"{n}.{p}": module for p in attention_parts(module)})
            steps[f"{n}.out"] = module
        elif isinstance(module, Embeddings):
            steps[f"{n}.layer_norm" if module.layer_norm is not None else f"{n}.sum"] = module
        elif isinstance(module, RerunSublayer) and ".experts." not in n:  # a feed-forward or a mixture of experts
            steps[f"{n}.out"] = module  # (not the experts inside one: the mixture runs their interiors)
        elif isinstance(module, AddNorm):
            if module.norm_first and module.norm is not None:  # the norm a pre-LN sublayer reads (a transcoder's input)
                steps[f"{n}.norm"] = module
            steps[f"{n}.residual" if module.norm_first else f"{n}.out"] = module
    for stack in ("encoder", "decoder"):
        norm = getattr(model, f"{stack}_norm", None)
        if norm is not None:
            steps[f"{stack}.final_norm.out"] = norm
    return steps


@dataclass
class Interventions:
    """The interventions of one run, checked against the model; what the modules consult while it is active."""

    items: list[Intervention] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)  # step name → what changed it

    def __post_init__(self) -> None:
        self._touched = set()
        for item in self.items:
            for step in item.steps():
                if item.note():  # an edit that only reads a step (a dictionary remembering it) changes no title
                    self.notes.setdefault(step, []).append(item.note())
            if isinstance(item, Patch | StepEdit):
                att, _, part = item.step.rpartition(".")
                if part in (*ATTENTION_PARTS, *TURNED_PARTS, "out"):  # the fused kernel's path has no point to patch
                    self._touched.add(att)
            else:
                self._touched.add(item.attention)

    def touches(self, attention: str) -> bool:
        """Whether this attention (trace name) must take the written-out path."""
        return attention in self._touched

    def title(self, step: str, title: str) -> str:
        notes = self.notes.get(step)
        return f"{title} ({'; '.join(notes)})" if notes else title

    def specs(self) -> list[str]:
        return [item.spec() for item in self.items]

    def patched(self, step: str, tensor: torch.Tensor) -> torch.Tensor:
        """The patch's values for this step (the last patch of it wins), or the tensor itself; the step's edits
        (StepEdit) apply in their order before that."""
        for item in self.items:
            if isinstance(item, StepEdit) and item.step == step:
                tensor = item.edit(tensor)
        for item in reversed(self.items):
            if isinstance(item, Patch) and item.step == step:
                if tuple(item.values.shape) != tuple(tensor.shape):
                    raise UserError(
                        f"Cannot patch {step}: the other run's tensor has shape {tuple(item.values.shape)} and this "
                        f"run's {tuple(tensor.shape)}; patching needs one sentence each, of the same length.")
                return item.values.to(tensor.device, tensor.dtype)
        return tensor

    def attend(self, module, parts: dict, mask: torch.Tensor | None, position_bias: torch.Tensor | None,
               cache: dict | None) -> tuple[torch.Tensor, dict, torch.Tensor | None]:  # fmt: skip
        """The written-out attention of `module` with this run's changes: (context (B, h, Tq, d_k), the maps
        of attention(), the mask used). Patched Q, K, V replace those in `parts`."""
        n = module.trace_name
        for p in ("q", "k", "v"):  # the heads the scores read: after QK-norm and the rotation, if the model has them
            step = next(s for s in (f"{p}_rotated", f"{p}_normed", p) if s == p or s in parts)
            parts[f"{p}_heads"] = self.patched(f"{n}.{step}", parts[f"{p}_heads"])  # (B, h, T, d_k)
            if step in parts:  # the trace shows the patched heads at their own step
                parts[step] = parts[f"{p}_heads"]
        q, k, v = parts["q_heads"], parts["k_heads"], parts["v_heads"]
        mask = self._knock_out(module, mask, q.shape[0], q.shape[2], k.shape[2])  # (B, Tq, Tk) or None
        context, maps = attention(q, k, v, mask, module.scale, position_bias, module.softcap)  # (B, h, Tq, d_k)
        weights = self.patched(f"{n}.weights", maps["weights"])
        if weights is not maps["weights"]:
            maps["weights"], context = weights, weights @ expand_kv(v, q.shape[1])  # (B, h, Tq, d_k)
        for item in self.items:
            if isinstance(item, HeadChange) and item.attention == n:
                context = change_head(context, item, module.q_dim == "tgt_pos", cache)
        return self.patched(f"{n}.context", context), maps, mask

    def _knock_out(self, module, mask, b: int, tq: int, tk: int) -> torch.Tensor | None:
        n = module.trace_name
        growing = module.q_dim == "tgt_pos" and not module.cross  # decoder self-attention: keys arrive one by one
        for item in self.items:
            if not (isinstance(item, KeyKnockout) and item.attention == n):
                continue
            if not growing and max(item.positions) >= tk:
                raise UserError(f"{item.spec()}: key position {max(item.positions)} does not exist; this input's "
                                f"keys are 0 to {tk - 1}.")
            if mask is None:
                mask = torch.ones(b, tq, tk, dtype=torch.bool, device=module.out_proj.weight.device)
            keys = [p for p in item.positions if p < tk]
            mask = mask.expand(b, tq, tk).clone()
            mask[..., keys] = False  # (B, Tq, Tk): −∞ before the softmax
        return mask


def change_head(context: torch.Tensor, change: HeadChange, causal: bool, cache: dict | None) -> torch.Tensor:
    """context (B, h, Tq, d_k) with one head changed (a copy). A causal mean carries its running sum in the
    layer's KV cache, so one-token-at-a-time decoding averages over every position so far. Every change is linear
    along Tq, so given a head's weights (B, h, Tq, Tk) it gives the weights whose product with V is the changed
    context (the attribution graph's frozen patterns, scratchformer.graph.replacement)."""
    out = context.clone()
    i = change.head
    if change.how == "zero":
        out[:, i] = 0.0
    elif change.how == "scale":
        out[:, i] = context[:, i] * change.factor
    elif change.how == "keep":
        out[:, [j for j in range(context.shape[1]) if j != i]] = 0.0
    elif not causal:  # mean over the positions of this input
        out[:, i] = context[:, i].mean(dim=1, keepdim=True)  # (B, 1, d_k) broadcast over Tq
    else:
        sums = context[:, i].cumsum(dim=1)  # (B, Tq, d_k): sum over positions 0 … t
        seen = 0
        key = f"mean_sum{i}"
        if cache is not None and key in cache:
            sums, seen = sums + cache[key][:, None], cache[f"mean_seen{i}"]
        if cache is not None:
            cache[key], cache[f"mean_seen{i}"] = sums[:, -1], seen + context.shape[2]  # (B, d_k)
        counts = torch.arange(seen + 1, seen + context.shape[2] + 1, device=context.device, dtype=context.dtype)
        out[:, i] = sums / counts[:, None]  # (B, Tq, d_k)
    return out


@contextmanager
def intervene(model, items: Sequence[Intervention] | None) -> Iterator[Interventions | None]:
    """Run forward passes inside with these interventions; nothing at all changes when `items` is empty.

    Nothing is registered on the model: the interventions live in a context variable (intervention_context) that
    the modules read at their named points, so they change only the passes run inside this block, in this thread.
    Another thread running the same model meanwhile (the window recomputing a step) runs it unchanged."""
    if not items:
        yield None
        return
    steps = patchable_steps(model)
    names = set(attention_names(model))
    for item in items:
        if isinstance(item, Patch | StepEdit):
            if item.step not in steps:
                raise UserError(f"{item.step} cannot be patched; patchable steps are each attention's q, k (as the "
                                "scores read them: q_rotated and k_rotated in a model with rotary positions), v, "
                                "weights, context and out, and the output of each embedding, feed-forward, "
                                "Add & Norm and final norm (e.g. encoder.0.add_norm2.out).")
        elif item.attention not in names or (isinstance(item, HeadChange) and not
                                             0 <= item.head < model.config.n_heads):
            raise UserError(f"This model has no {item.spec()}; {_valid_specs(model)}.")
    active = Interventions(list(items))
    with applying(active):
        yield active
