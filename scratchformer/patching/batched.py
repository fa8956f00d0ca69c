"""Exact activation patching, many patched runs in one forward pass.

One patched run per component, as TransformerLens's `generic_activation_patch` makes them, repeats everything
below the patch: those layers see the corrupted input and compute the corrupted run again. Here the components
of one layer go together as the items of one batch, and the batched pass starts at that layer, on the corrupted
run's stored input of the layer; each item's own cells are replaced by their clean values (one StepEdit per
step: torch.where over a mask that picks each item's head and position).

A causal decoder gives a second saving: a patch at position p changes nothing before p, so the batch runs only
positions p … T − 1 and reads the earlier positions' keys and values from the corrupted run (the KV cache of
step-by-step decoding). A patch whose clean values equal the corrupted ones at every cell (a position before the
corrupted token, in a decoder-only model) changes nothing at all: its m_patched is m_corrupt, and it is not run.

`one_at_a_time` is the plain method, through the Patch intervention the `--patch` option uses: the tests hold
the batched sweep to it within 1e-5.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import torch

from ..errors import UserError
from ..loading.memory import FLOAT, size_text
from .components import Component, attention_modules, layer_input_step
from .interventions import Patch, StepEdit, attention_parts, intervene
from .pair import Pair, final_hidden

Progress = Callable[[int, int], None]


def _cells(c: Component, t: torch.Tensor) -> torch.Tensor:
    """The component's cells of a step tensor (1, …) → (1, T, d): its head's, if it has one."""
    return t[:, c.head] if c.head_axis and c.head is not None else t


def start_position(c: Component, source: dict, corrupt: dict) -> int | None:
    """The first position at which the component's patch changes anything, or None when it changes nothing."""
    differs = (_cells(c, source[c.step]) != _cells(c, corrupt[c.step])).flatten(2).any(-1)[0]  # (T,)
    if c.position is not None:
        return c.position if bool(differs[c.position]) else None
    where = differs.nonzero()
    return int(where[0]) if len(where) else None


def _mask(c: Component, shape: torch.Size) -> torch.Tensor:
    """(1, …) bool over the step's tensor, True on the component's cells (trailing feature axis of size 1)."""
    mask = torch.zeros((1, *shape[1:-1], 1), dtype=torch.bool)
    pos = slice(None) if c.position is None else c.position
    if c.head_axis and c.head is not None:
        mask[0, c.head, pos] = True
    else:
        mask[0, pos] = True
    return mask


def _edit(where: torch.Tensor, values: torch.Tensor, axis: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A StepEdit's function: each item's cells (where (B, …, T, 1)) take `values` (1, …, T, d). A pass that
    starts at position p sees the last n = T − p positions (or all, for keys read with the KV cache)."""

    def edit(t: torch.Tensor) -> torch.Tensor:
        n = t.shape[axis]
        w = where.narrow(axis, where.shape[axis] - n, n).to(t.device)
        v = values.narrow(axis, values.shape[axis] - n, n).to(t.device, t.dtype)
        return torch.where(w, v, t)

    return edit


def edits_for(components: list[Component], source: dict[str, torch.Tensor]) -> list[StepEdit]:
    """One StepEdit per patched step: item i of the batch patches components[i]'s cells from `source`."""
    by_step: dict[str, list[tuple[int, Component]]] = defaultdict(list)
    for i, c in enumerate(components):
        by_step[c.step].append((i, c))
    edits = []
    for step, items in by_step.items():
        values = source[step]
        where = torch.zeros((len(components), *values.shape[1:-1], 1), dtype=torch.bool)
        for i, c in items:
            where[i : i + 1] = _mask(c, values.shape)
        axis = 2 if items[0][1].head_axis else 1
        edits.append(StepEdit(step, _edit(where, values, axis)))
    return edits


def bytes_per_item(pair: Pair) -> int:
    """What one patched copy needs while its batch runs (a generous bound): the stream and the projections of a
    layer, the attention maps of the written-out attention, the feed-forward's hidden layer; and the cross-
    attention's keys and values of its own memory."""
    c = pair.model.config
    t = pair.tgt_clean.shape[1]
    s = pair.src_clean.shape[1] if pair.src_clean is not None else 0
    width = c.n_heads * c.d_head
    per_position = 8 * c.d_model + 6 * width + 3 * c.d_ff + 6 * c.n_heads * (t + s)
    logits = c.tgt_vocab_size if pair.metric.kind == "logprob" else 0
    return FLOAT * (max(t, s) * per_position + 4 * s * c.d_model + logits)


def batch_size(pair: Pair, n: int, budget: int | None, notes: list[str] | None) -> int:
    """How many patched copies to run together: all of a layer's (up to 512), fewer when the memory budget says
    so — then a note says it, once."""
    want = min(n, 512)
    if budget is None:
        return max(want, 1)
    per = bytes_per_item(pair)
    weights = sum(p.numel() * p.element_size() for p in pair.model.parameters())
    room = budget - weights
    fits = room // per if room > 0 else 0
    if fits < 1:
        raise UserError(f"Even one patched copy of this run needs about {size_text(per)} beside the model's "
                        f"{size_text(weights)}, more than the {size_text(budget)} memory budget: use a shorter "
                        "input, or raise the memory budget.")  # fmt: skip
    if fits < want:
        if notes is not None and not any(n.startswith("The sweep ran") for n in notes):
            notes.append(f"The sweep ran {fits} patched copies at a time instead of {want}, to stay within the "
                         f"{size_text(budget)} memory budget (about {size_text(per)} each).")  # fmt: skip
        return int(fits)
    return want


def _corrupt_cache(pair: Pair, start: int, batch: int) -> list[dict]:
    """The corrupted run's self-attention keys and values of positions 0 … start − 1, per decoder layer, as the
    KV cache of step-by-step decoding holds them (as the scores read them: rotated, normalised)."""
    cache = []
    for name, module in attention_modules(pair.model).items():
        if not name.startswith("decoder.") or module.cross:
            continue
        _, k_step, v_step = attention_parts(module)[:3]
        k, v = pair.corrupt[f"{name}.{k_step}"], pair.corrupt[f"{name}.{v_step}"]
        expand = lambda t: t[:, :, :start].expand(batch, -1, -1, -1)  # noqa: E731  (B, h_kv, start, d_k)
        cache.append({"self": {"k": expand(k), "v": expand(v)}})
    return cache


def _run_batch(pair: Pair, stack: str, layer: int, start: int, components: list[Component],
               source: dict[str, torch.Tensor]) -> torch.Tensor:  # fmt: skip
    """m_patched (B,) for components that all sit in layer `layer` of `stack` (-1: its embeddings), the batched
    pass starting there on the corrupted run's stored activations (decoder positions from `start` on)."""
    model, b = pair.model, len(components)
    with torch.inference_mode(), intervene(model, edits_for(components, source)):
        if stack == "encoder":
            if layer < 0:
                x = model.src_embed(pair.src_corrupt.expand(b, -1))  # (B, S, d_model)
            else:
                x = pair.corrupt[layer_input_step(model, "encoder", layer)].expand(b, -1, -1)  # (B, S, d_model)
            memory = model.encode_layers(x, first=max(layer, 0))  # (B, S, d_model)
            hidden = model.decode(pair.tgt_corrupt.expand(b, -1), memory)[:, -1]  # (B, d_model)
        else:
            memory = None
            if model.config.has_encoder:  # the encoder is not patched: the corrupted run's memory for every item
                memory = pair.corrupt[_memory_step(model)].expand(b, -1, -1)  # (B, S, d_model)
            if layer < 0:
                x = model.tgt_embed(pair.tgt_corrupt[:, start:].expand(b, -1), offset=start)  # (B, T', d_model)
            else:
                x = pair.corrupt[layer_input_step(model, "decoder", layer)][:, start:].expand(b, -1, -1)
            cache = _corrupt_cache(pair, start, b) if start > 0 else None
            hidden = model.decode_layers(x, memory, cache=cache, offset=start, first=max(layer, 0))[:, -1]
        return pair.metric.values(model, hidden)  # (B,)


def _memory_step(model) -> str:
    """The step holding the encoder's output (its final norm, or its last layer's last point)."""
    if model.encoder_norm is not None:
        return "encoder.final_norm.out"
    return layer_input_step(model, "encoder", model.config.n_encoder_layers)


def patched_metrics(pair: Pair, components: list[Component], source: dict[str, torch.Tensor] | None = None,
                    budget: int | None = None, notes: list[str] | None = None, progress: Progress | None = None,
                    cancelled: Callable[[], bool] | None = None) -> torch.Tensor | None:  # fmt: skip
    """m_patched (n,) for each component patched alone from `source` (default: the clean run) into the corrupted
    run, in batches (see the module doc). None when cancelled() turns true between two batches."""
    source = pair.clean if source is None else source
    out = torch.full((len(components),), pair.m_corrupt, dtype=torch.float32)
    groups: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for i, c in enumerate(components):
        p = start_position(c, source, pair.corrupt)
        if p is not None:  # None: the patch changes nothing, m_patched = m_corrupt
            causal = c.stack == "decoder" and c.axis == "tgt"
            groups[(c.stack, c.layer)].append((p if causal else 0, i))
    size = batch_size(pair, max((len(g) for g in groups.values()), default=1), budget, notes)
    batches = []
    for (stack, layer), items in groups.items():
        items.sort(reverse=True)  # latest start first: a batch starts at its earliest item's position
        batches += [(stack, layer, items[a : a + size]) for a in range(0, len(items), size)]
    for done, (stack, layer, items) in enumerate(batches):
        if cancelled is not None and cancelled():
            return None
        start = min(p for p, _ in items)
        m = _run_batch(pair, stack, layer, start, [components[i] for _, i in items], source)
        out[[i for _, i in items]] = m.float().cpu()
        if progress is not None:
            progress(done + 1, len(batches))
    return out


def patch_of(pair: Pair, component: Component, source: dict[str, torch.Tensor] | None = None) -> Patch:
    """The component's patch as one Patch intervention: its step's corrupted values with the component's cells
    taken from `source` (default: the clean run). Run the corrupted input inside intervene(model, [patch]) — traced,
    to show it — and this is the patched run that made the component's number."""
    source = pair.clean if source is None else source
    values = pair.corrupt[component.step].clone()
    mask = _mask(component, values.shape).to(values.device)
    return Patch(component.step, torch.where(mask, source[component.step], values), "the clean run")


def one_at_a_time(pair: Pair, component: Component, source: dict[str, torch.Tensor] | None = None) -> float:
    """m_patched of one component by a whole forward pass of the corrupted input with its Patch (patch_of): the
    method the batched sweep must equal."""
    with torch.inference_mode(), intervene(pair.model, [patch_of(pair, component, source)]):
        hidden = final_hidden(pair.model, pair.src_corrupt, pair.tgt_corrupt)
        return float(pair.metric.values(pair.model, hidden)[0])
