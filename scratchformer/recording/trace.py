"""The trace: an ordered list of named intermediate tensors, recorded only while tracing is on.

Modules call `active_tracer()` once per forward; when it returns None (the normal case) they record nothing
and build no titles, so a forward pass without tracing pays one context-variable read per module.

Bounded memory (a lazy trace, what `Transformer.run_with_trace` records). A sublayer's interior — Q/K/V, the
four B × h × T × T attention maps, the feed-forward hidden layer, each residual sum, the logits and the output
probabilities — is far larger than the residual stream that flows between sublayers. A lazy tracer keeps every
tensor up to `keep_bytes` and every tensor outside those interiors (embeddings, each sublayer's output, each
LayerNorm), and for the rest keeps only a `Recompute`: the sublayer's inputs and the function that computed
them. `step.tensor` (the whole batch) and `step.item(b)` (one batch item) rerun that same function, so the values
are the ones the forward pass produced, bit for bit on CPU (the tests compare every step with an eager trace).
Recomputed interiors go into a `RecomputeCache` with a byte limit that evicts the least recently used.
"""

from __future__ import annotations

import contextvars
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from .intervention_context import active_interventions
from .lazy import Held, LazyOutputSummary, OutputSummary, Recompute, RecomputeCache, storage_bytes
from .nonfinite import any_flag, mask_blocks, resolve, step_flag

KINDS = (
    "tokens", "embedding", "positional_encoding", "input", "mask", "qkv", "heads", "scores",
    "scaled_scores", "masked_scores", "attention_weights", "context", "concat", "projection", "dropout",
    "residual", "layer_norm", "ffn_hidden", "ffn_out", "logits", "probabilities",
    # added for imported models (T5): the relative position bias map (head × q_pos × k_pos, no batch axis), the
    # two branches of a gated feed-forward unit (act(x W_1) and x V), and the decoder output × d_model^-0.5
    "position_bias", "ffn_gate", "output_scale", "rotary", "qk_norm",
    # a mixture of experts' router: one number per token and expert (scratchformer.transformer.moe)
    "router",
    # Gemma 2's soft-capping c·tanh(x / c), of the attention scores before the mask and of the final logits
    "softcap",
    # a sparse dictionary attached to a run (scratchformer.features): its pre-activations and features (batch × pos ×
    # feature), and its reconstruction and what it misses (the error), in the width of the step it reads
    "features", "reconstruction",
)  # fmt: skip

ATTENTION_TYPES = ("self_attn", "cross_attn")
HEAD_DIMS = ("head", "kv_head")  # an axis of heads: the queries' own, or the shared keys' and values' (GQA)


@dataclass(eq=False)
class Step:
    """One intermediate tensor of the forward pass, with everything needed to show it to a person.

    The tensor is held whole (`data`), or per chunk of batch items as they were traced (`parts`, the chunks
    starting at batch items `offsets`), or not at all: then `sources` rerun each chunk's sublayer on demand (a
    lazy trace's large interiors). `tensor`, `item(b)` and `shape` read the same in every case."""

    index: int
    name: str  # stable dotted name from the module path, e.g. "decoder.1.cross_attn.weights"
    kind: str  # one of KINDS
    title: str  # for people: "Decoder 2 › Cross-attention › softmax"
    formula: str  # plain text, e.g. "softmax(QKᵀ/√d_k + M)"
    data: torch.Tensor | None  # detached, on CPU
    dims: tuple[str, ...]  # one name per axis: batch, src_pos, tgt_pos, d_model, head, d_head, ...
    sublayer: str  # the diagram block this belongs to, e.g. "decoder.1.cross_attn"
    major: bool = False  # shown when the detail switch is on "sublayers only"
    size: tuple[int, ...] = ()  # the tensor's shape (known even when the tensor is not held)
    parts: list[torch.Tensor] | None = None  # per chunk of batch items, each (items in the chunk, …)
    sources: list[Recompute] | None = None  # per chunk, when nothing is held
    offsets: tuple[int, ...] = (0,)  # the first batch item of each chunk
    # 0-dim bool, True when the values are not all finite (−∞ of masking aside; scratchformer.recording.nonfinite),
    # checked while the step was recorded; None when not checked (integer steps)
    nonfinite_flag: torch.Tensor | None = None

    @property
    def tensor(self) -> torch.Tensor:
        """The whole tensor (every batch item); put together or recomputed when it is not held whole."""
        if self.data is not None:
            return self.data
        if self.parts is not None:
            return torch.cat(self.parts) if len(self.parts) > 1 else self.parts[0]
        items = [src.get()[self.name] for src in self.sources]
        return torch.cat(items) if len(items) > 1 else items[0]

    @tensor.setter
    def tensor(self, value: torch.Tensor) -> None:
        self.data, self.size, self.parts, self.sources = value, tuple(value.shape), None, None
        # a patched step (interventions) is checked again; its masked scores may hold masking's −∞
        self.nonfinite_flag = step_flag(value, self.kind, torch.tensor(True) if self.kind == "masked_scores" else None)

    @property
    def stored(self) -> bool:
        return self.sources is None

    def held(self) -> list[torch.Tensor]:
        """The tensors this step keeps in memory (none for a recomputed step)."""
        return [self.data] if self.data is not None else list(self.parts or [])

    def item(self, batch: int) -> torch.Tensor:
        """One batch item's tensor without its batch axis (the whole tensor for steps with no batch axis). A
        recomputed step reruns just the chunk of items traced with it, exactly as it was traced, so this gives the
        very numbers of `tensor[b]`."""
        if "batch" not in self.dims:
            return self.tensor
        b = min(max(batch, 0), self.size[0] - 1)
        if self.data is not None:
            return self.data[b]
        k = bisect_right(self.offsets, b) - 1  # the chunk holding item b
        if self.parts is not None:
            return self.parts[k][b - self.offsets[k]]
        return self.sources[k].get()[self.name][b - self.offsets[k]]

    def ready(self, batch: int) -> bool:
        """Whether item(batch) can be read without rerunning a sublayer (held, or its rerun is in the cache)."""
        if self.sources is None or "batch" not in self.dims:
            return self.sources is None
        k = bisect_right(self.offsets, min(max(batch, 0), self.size[0] - 1)) - 1
        return self.sources[k].ready()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.size

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

    @property
    def head_dim(self) -> str | None:
        """The axis of heads the window shows one of: 'head', or 'kv_head' for the keys and values of grouped-query
        attention (fewer heads than the queries have); None for a step without one."""
        return next((d for d in self.dims if d in HEAD_DIMS), None)

    @property
    def n_heads(self) -> int:
        """How many heads the head axis holds (1 without one)."""
        d = self.head_dim
        return self.shape[self.dims.index(d)] if d is not None else 1

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
    cache: RecomputeCache | None = None  # recomputed interiors of a lazy trace
    # top tokens per position (models with an output layer); lazy: made per chunk when first read
    output_summary: OutputSummary | LazyOutputSummary | None = None
    # what the run changed on purpose (scratchformer.patching.interventions)
    interventions: list = field(default_factory=list)
    # the dictionaries attached to the run, by the step each reads (scratchformer.features.attach): what derive
    # recomputes a feature from
    dictionaries: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_name = {s.name: s for s in self.steps}

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __getitem__(self, key: int | str) -> Step:
        if isinstance(key, int):
            return self.steps[key]
        if len(self._by_name) != len(self.steps):
            self._by_name = {s.name: s for s in self.steps}
        return self._by_name[key]

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

    def stored_bytes(self) -> int:
        """Bytes the trace holds between requests: stored tensors and the inputs its recomputes keep, each
        storage once (the recompute cache is counted separately, in `cache.bytes`). Counted once: a trace
        does not change."""
        if getattr(self, "_stored_bytes", None) is not None and self._counted_steps == len(self.steps):
            return self._stored_bytes
        tensors = [t for s in self.steps for t in s.held()]
        tensors += [t for s in self.steps for src in s.sources or [] for t in src.inputs]
        tensors += [t for t in (self.source_pad, self.target_pad) if t is not None]
        self._stored_bytes, self._counted_steps = storage_bytes(tensors), len(self.steps)
        return self._stored_bytes

    def recomputed_steps(self) -> list[Step]:
        return [s for s in self.steps if not s.stored]

    def nonfinite_steps(self) -> list[Step]:
        """The steps whose values are not all finite (NaN, +∞, or −∞ other than masking's), in order; found while
        the forward pass recorded them, so a lazy trace recomputes nothing for this."""
        if getattr(self, "_nonfinite", None) is None or self._nonfinite[0] != len(self.steps):
            bad = resolve([s.nonfinite_flag for s in self.steps])
            self._nonfinite = (len(self.steps), [s.index for s, b in zip(self.steps, bad) if b])
        return [self.steps[i] for i in self._nonfinite[1]]

    def first_nonfinite(self) -> Step | None:
        """The first step whose values are not all finite, or None."""
        found = self.nonfinite_steps()
        return found[0] if found else None


class Tracer:
    """Collects steps; modules reach it through `active_tracer()` while `tracing()` is open.

    Eager (the default) stores every tensor. Lazy (`lazy=True`) keeps a step's tensor only if it is no bigger
    than `keep_bytes` or no `Recompute` is open (`recompute_from`); otherwise the step records its shape and
    the open Recompute, which can produce it again."""

    def __init__(self, lazy: bool = False, keep_bytes: int = 256 * 1024, cache: RecomputeCache | None = None) -> None:
        self.steps: list[Step] = []
        self.lazy, self.keep_bytes = lazy, keep_bytes
        self.cache = cache if cache is not None else RecomputeCache()
        self._source: Recompute | None = None
        self._mask_blocks: dict[str, torch.Tensor] = {}  # sublayer → whether its mask blocks any cell
        self.key_prefix = ""  # tells apart the recomputes of batch items traced one at a time
        self.target_ids: torch.Tensor | None = None  # the decoder input, for the output summary
        self.output_summary: OutputSummary | LazyOutputSummary | None = None
        # whether the caller reads the model's output (run_with_trace's keep_output): a lazy trace whose output
        # nobody reads need not make the logits during the pass (model.Generator)
        self.output_wanted = True

    @contextmanager
    def recompute_from(self, key: str, fn: Callable[[], dict[str, torch.Tensor]], inputs: tuple = ()):
        """Steps added inside may be dropped and recomputed later by fn (a lazy tracer only). Yields that
        Recompute (None for an eager tracer), for what else may read the rerun later (the output summary)."""
        previous = self._source
        self._source = Recompute(self.key_prefix + key, fn, self.cache, inputs) if self.lazy else None
        try:
            yield self._source
        finally:
            self._source = previous

    @contextmanager
    def stored(self):
        """Steps added inside are stored even within a recompute (a sublayer's output, which the next reads)."""
        previous, self._source = self._source, None
        try:
            yield
        finally:
            self._source = previous

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
        nonfinite: torch.Tensor | None = None,
    ) -> None:
        """Record one step. `nonfinite`: its flag when the caller has it already (a map it did not build, whose
        tensor is a "meta" stand-in of its shape: attention.attention_unkept); else the tensor is checked."""
        if kind not in KINDS:
            raise ValueError(f"unknown step kind {kind!r}")
        if tensor.dim() != len(dims):
            raise ValueError(f"{name}: {tensor.dim()} axes but dims {dims}")
        changes = active_interventions()
        if changes is not None:  # a step an intervention changed says so in its title
            title = changes.title(name, title)
        if kind == "mask":
            self._mask_blocks[sublayer] = mask_blocks(tensor)
        if nonfinite is None:
            nonfinite = step_flag(tensor, kind, self._mask_blocks.get(sublayer) if kind == "masked_scores" else None)
        source = self._source
        keep = source is None or tensor.numel() * tensor.element_size() <= self.keep_bytes
        data = tensor.detach().cpu() if keep else None
        if keep and source is not None and data.untyped_storage().nbytes() > self.keep_bytes:
            data = data.clone()  # a small view of a large interior (one head of Q) must not keep it all alive
        self.steps.append(Step(len(self.steps), name, kind, title, formula, data, tuple(dims), sublayer, major,
                               tuple(tensor.shape), None, None if keep else [source], (0,), nonfinite))  # fmt: skip
        follow = _FOLLOWERS.get()
        if follow is not None and name in follow:
            with self.stored():  # what follows a step (a dictionary's features) is kept whole, never recomputed
                follow[name](self, tensor)


_ACTIVE: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("scratchformer_tracer", default=None)


def active_tracer() -> Tracer | None:
    return _ACTIVE.get()


# Step name → what to record right after that step: (tracer, the step's tensor) → None. A dictionary attached to a
# run (scratchformer.features.attach) adds its steps this way, so they sit in the trace beside the step they read.
_FOLLOWERS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("scratchformer_followers", default=None)


@contextmanager
def following(followers: dict[str, Callable[[Tracer, torch.Tensor], None]] | None) -> Iterator[None]:
    """Record, inside this block, followers[name](tracer, tensor) right after each step `name` is recorded."""
    token = _FOLLOWERS.set(followers or None)
    try:
        yield
    finally:
        _FOLLOWERS.reset(token)


def add_dropout(tracer: Tracer, dropout, name: str, tensor: torch.Tensor, dims: tuple[str, ...]) -> None:
    """Record `<name>.dropout`, a step of the block `name`, when `dropout` (an nn.Dropout) acts: in training with
    p > 0. Elsewhere it is the identity and there is no step."""
    if dropout.training and dropout.p > 0:
        tracer.add(f"{name}.dropout", "dropout", tensor, dims, "Dropout", f"Dropout(p={dropout.p})", name)


@contextmanager
def tracing(lazy: bool = False, keep_bytes: int = 256 * 1024, cache: RecomputeCache | None = None
            ) -> Iterator[Tracer]:  # fmt: skip
    """Record every step of the forward passes run inside; always switched off again, even on error."""
    tracer = Tracer(lazy, keep_bytes, cache)
    token = _ACTIVE.set(tracer)
    try:
        yield tracer
    finally:
        _ACTIVE.reset(token)


def merge_chunks(per_chunk: list[list[Step]]) -> list[Step]:
    """The steps of chunks of batch items traced one chunk at a time → one list of steps over the whole batch.
    Nothing is copied: each step keeps its chunks' tensors (`parts`) or recomputes (`sources`)."""
    merged = []
    for steps in zip(*per_chunk):
        first = steps[0]
        flag = any_flag([s.nonfinite_flag for s in steps])
        if len(steps) == 1 or "batch" not in first.dims:
            first.nonfinite_flag = flag
            merged.append(first)
            continue
        sizes = [s.size[0] for s in steps]
        size = (sum(sizes), *first.size[1:])
        offsets = tuple(sum(sizes[:k]) for k in range(len(sizes)))
        held = [s.data for s in steps] if all(s.stored for s in steps) else None
        sources = None if held is not None else [s.sources[0] if s.sources else Held(s.name, s.data) for s in steps]
        merged.append(Step(first.index, first.name, first.kind, first.title, first.formula, None, first.dims,
                           first.sublayer, first.major, size, held, sources, offsets, flag))  # fmt: skip
    return merged


# Human names for the blocks, used in titles and breadcrumbs.
BLOCK_NAMES = {
    "src_embed": "Source embedding",
    "tgt_embed": "Target embedding",
    "self_attn": "Self-attention",
    "cross_attn": "Cross-attention",
    "ffn": "Feed-forward",
    "moe": "Mixture of experts",
    "add_norm1": "Add & Norm 1",
    "add_norm2": "Add & Norm 2",
    "add_norm3": "Add & Norm 3",
    "generator": "Output",
    "final_norm": "Final LayerNorm",
    "norm": "LayerNorm",  # a pre-LN model's norm before its sublayer: "Add & Norm 1 › LayerNorm"
    "dict": "Dictionary",  # a sparse dictionary attached after a step (scratchformer.features.attach)
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
