"""The trace: an ordered list of named intermediate tensors, recorded only while tracing is on.

Modules call `active_tracer()` once per forward; when it returns None (the normal case) they record nothing
and build no titles, so a forward pass without tracing pays one context-variable read per module.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

KINDS = (
    "tokens", "embedding", "positional_encoding", "input", "mask", "qkv", "heads", "scores",
    "scaled_scores", "masked_scores", "attention_weights", "context", "concat", "projection", "dropout",
    "residual", "layer_norm", "ffn_hidden", "ffn_out", "logits", "probabilities",
    # added for imported models (T5): the relative position bias map (head × q_pos × k_pos, no batch axis), the
    # two branches of a gated feed-forward unit (act(x W_1) and x V), and the decoder output × d_model^-0.5
    "position_bias", "ffn_gate", "output_scale",
)  # fmt: skip

ATTENTION_TYPES = ("self_attn", "cross_attn")


@dataclass
class Step:
    """One intermediate tensor of the forward pass, with everything needed to show it to a person."""

    index: int
    name: str  # stable dotted name from the module path, e.g. "decoder.1.cross_attn.weights"
    kind: str  # one of KINDS
    title: str  # for people: "Decoder 2 › Cross-attention › softmax"
    formula: str  # plain text, e.g. "softmax(QKᵀ/√d_k + M)"
    tensor: torch.Tensor  # detached, on CPU
    dims: tuple[str, ...]  # one name per axis: batch, src_pos, tgt_pos, d_model, head, d_head, ...
    sublayer: str  # the diagram block this belongs to, e.g. "decoder.1.cross_attn"
    major: bool = False  # shown when the detail switch is on "sublayers only"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def stack(self) -> str:
        """'encoder', 'decoder', 'src_embed', 'tgt_embed' or 'generator'."""
        return self.name.split(".", 1)[0]

    @property
    def layer(self) -> int | None:
        parts = self.name.split(".")
        return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None

    @property
    def attention_type(self) -> str | None:
        """'encoder.self_attn', 'decoder.self_attn' or 'decoder.cross_attn' for attention steps."""
        parts = self.name.split(".")
        if len(parts) > 2 and parts[2] in ATTENTION_TYPES:
            return f"{parts[0]}.{parts[2]}"
        return None

    def shape_text(self) -> str:
        """'4 batch × 10 src_pos × 6 d_model'."""
        return " × ".join(f"{n} {d}" for n, d in zip(self.shape, self.dims))


@dataclass
class Trace:
    """The ordered steps of one forward pass plus the token labels of both sequences."""

    steps: list[Step] = field(default_factory=list)
    source_tokens: list[list[str]] = field(default_factory=list)  # per batch item
    target_tokens: list[list[str]] = field(default_factory=list)
    source_pad: torch.Tensor | None = None  # (B, S) bool, True at padding: what the masks were built from
    target_pad: torch.Tensor | None = None  # (B, T)

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __getitem__(self, key: int | str) -> Step:
        if isinstance(key, int):
            return self.steps[key]
        for step in self.steps:
            if step.name == key:
                return step
        raise KeyError(key)

    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def index_of(self, name: str) -> int:
        return self[name].index

    def find(self, name: str) -> Step | None:
        try:
            return self[name]
        except KeyError:
            return None

    def labels(self, dim: str, batch: int = 0) -> list[str] | None:
        """Token labels for a position axis ('src_pos' or 'tgt_pos'), or None for other axes."""
        rows = {"src_pos": self.source_tokens, "tgt_pos": self.target_tokens}.get(dim)
        if not rows:
            return None
        return rows[min(batch, len(rows) - 1)]

    def attention_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "attention_weights"]


class Tracer:
    """Collects steps; modules reach it through `active_tracer()` while `tracing()` is open."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def add(
        self,
        name: str,
        kind: str,
        tensor: torch.Tensor,
        dims: tuple[str, ...],
        title: str,
        formula: str,
        sublayer: str,
        major: bool = False,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown step kind {kind!r}")
        if tensor.dim() != len(dims):
            raise ValueError(f"{name}: {tensor.dim()} axes but dims {dims}")
        self.steps.append(
            Step(len(self.steps), name, kind, title, formula, tensor.detach().cpu(), tuple(dims), sublayer, major)
        )


_ACTIVE: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("scratchformer_tracer", default=None)


def active_tracer() -> Tracer | None:
    return _ACTIVE.get()


@contextmanager
def tracing() -> Iterator[Tracer]:
    """Record every step of the forward passes run inside; always switched off again, even on error."""
    tracer = Tracer()
    token = _ACTIVE.set(tracer)
    try:
        yield tracer
    finally:
        _ACTIVE.reset(token)


# Human names for the blocks, used in titles and breadcrumbs.
BLOCK_NAMES = {
    "src_embed": "Source embedding",
    "tgt_embed": "Target embedding",
    "self_attn": "Self-attention",
    "cross_attn": "Cross-attention",
    "ffn": "Feed-forward",
    "add_norm1": "Add & Norm 1",
    "add_norm2": "Add & Norm 2",
    "add_norm3": "Add & Norm 3",
    "generator": "Output",
    "final_norm": "Final LayerNorm",
    "norm": "LayerNorm",  # a pre-LN model's norm before its sublayer: "Add & Norm 1 › LayerNorm"
}


def step_breadcrumb(step: Step) -> list[str]:
    """breadcrumb(step.sublayer), with the norm called what the step computes: 'RMSNorm' for a T5 model's norm."""
    rms = step.kind == "layer_norm" and step.formula.startswith("RMSNorm")
    return breadcrumb(step.sublayer, "RMSNorm" if rms else "LayerNorm")


def step_path(step: Step) -> str:
    """'Decoder 2 › Cross-attention › Attention weights (softmax)': the window's breadcrumb and every plot's title."""
    return " › ".join(step_breadcrumb(step) + [step.title])


def breadcrumb(sublayer: str, norm_name: str = "LayerNorm") -> list[str]:
    """'decoder.1.cross_attn' → ['Decoder 2', 'Cross-attention'] (layers counted from 1 for people).

    `norm_name` names a pre-LN norm block and a final norm ('RMSNorm' for T5; see step_breadcrumb)."""
    parts = sublayer.split(".")
    crumbs: list[str] = []
    if parts[0] in ("encoder", "decoder"):
        if len(parts) > 1 and parts[1].isdigit():
            crumbs.append(f"{parts[0].capitalize()} {int(parts[1]) + 1}")
            parts = parts[2:]
        else:
            crumbs.append(parts[0].capitalize())
            parts = parts[1:]
    crumbs.extend(BLOCK_NAMES.get(p, p.replace("_", " ").capitalize()).replace("LayerNorm", norm_name) for p in parts)
    return crumbs
