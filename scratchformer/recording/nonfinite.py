"""Non-finite numbers (NaN, +∞, −∞) in a model's weights and in the steps of a trace: found and named, not hidden.

People open a broken checkpoint precisely to see where it goes wrong, so such a model opens and runs; this module
says which parameters hold non-finite values and which step of the run is the first whose values are not finite.

−∞ belongs to the design in two kinds of step: a `mask` holds −∞ where attention is blocked, and the
`masked_scores` hold it in exactly those cells. That is not trouble. NaN and +∞ anywhere, and −∞ anywhere else,
are. The check of a step runs while the step is recorded (trace.Tracer.add), on the tensor's own device and before
a lazy trace lets go of it: its minimum and maximum (NaN propagates through both), read back only when asked.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch

MASK_KINDS = ("mask", "masked_scores")  # −∞ by design (where attention is blocked)
SHOWN_NAMES = 5  # a sentence names this many parameters and counts the rest


def step_flag(tensor: torch.Tensor, kind: str, mask_blocks: torch.Tensor | None = None) -> torch.Tensor | None:
    """A 0-dim bool tensor on the tensor's device, True when the step holds values that are not finite (beyond
    the −∞ of masking); None for integer steps (token ids), which cannot, and for tensors not built.

    `mask_blocks` (0-dim bool): whether the attention's mask blocks any cell, for `masked_scores`. When it does,
    −∞ in the masked scores is expected and only NaN or +∞ count here; a −∞ in an allowed cell can only come from
    −∞ in the scores it was made from (scaled_scores, position_bias), which are checked in full and come first, so
    the first non-finite step is still found exactly."""
    if not tensor.is_floating_point() or tensor.numel() == 0 or tensor.device.type == "meta":
        return None  # a lazy trace's output probabilities are never built whole: their logits were checked
    t = tensor.detach()
    if t.device.type == "cpu":  # reading a number back costs nothing here: one pass instead of two
        quick = _cpu_flag(t, kind, mask_blocks)
        if quick is not None:
            return quick
    elif kind not in MASK_KINDS and t.dtype != torch.float64:
        return sum_flag(t)
    lo, hi = t.amin(), t.amax()  # NaN anywhere makes both NaN (two passes, yet faster than torch.aminmax on CPU)
    if kind == "mask":
        return ~torch.isfinite(hi)
    if kind == "masked_scores":
        unexplained = torch.isneginf(lo) if mask_blocks is None else torch.isneginf(lo) & ~mask_blocks
        return ~torch.isfinite(hi) | unexplained
    return ~(torch.isfinite(lo) & torch.isfinite(hi))


_FINITE = torch.tensor(False)


def _cpu_flag(t: torch.Tensor, kind: str, mask_blocks: torch.Tensor | None) -> torch.Tensor | None:
    """step_flag's answer from one pass over a CPU tensor, or None when only the exact two-pass check can say.

    The −∞ of masking leaves only NaN and +∞ to look for, which the maximum shows. Elsewhere any NaN or ±∞ makes
    the sum NaN or ±∞, so a finite sum means every value is finite; a sum that is not finite may also be the
    overflow of large finite values, which the exact check then tells apart."""
    if kind == "mask" or (kind == "masked_scores" and mask_blocks is not None and bool(mask_blocks)):
        return ~torch.isfinite(t.amax())
    wide = torch.float32 if t.element_size() < 4 else None  # half precision adds up in float32
    return _FINITE if bool(torch.isfinite(t.sum(dtype=wide))) else None


def sum_flag(t: torch.Tensor) -> torch.Tensor:
    """Whether a tensor of less than double precision holds NaN or ±∞, from one sum in float64 (one kernel on an
    accelerator, and no read-back): float64 cannot overflow adding such values, so the sum is finite exactly when
    every value is. On the CPU the float32 sum of _cpu_flag is several times faster."""
    return ~torch.isfinite(t.sum(dtype=torch.float64))


def mask_blocks(mask: torch.Tensor) -> torch.Tensor:
    """0-dim bool: whether an additive mask (0 / −∞) blocks any cell."""
    return torch.isneginf(mask.detach()).any()


def any_flag(flags: list[torch.Tensor | None]) -> torch.Tensor | None:
    """The flags of one step's chunks (batch items traced apart) → one flag; None when none was checked."""
    known = [f for f in flags if f is not None]
    if not known:
        return None
    out = known[0]
    for f in known[1:]:
        out = out | f.to(out.device)
    return out


def resolve(flags: list[torch.Tensor | None]) -> list[bool]:
    """Flags → bools with one read-back per device (not one per step)."""
    known = [(i, f) for i, f in enumerate(flags) if f is not None]
    out = [False] * len(flags)
    if known:
        by_device: dict = {}
        for i, f in known:
            by_device.setdefault(f.device, []).append((i, f))
        for items in by_device.values():
            values = torch.stack([f.reshape(()) for _, f in items]).cpu().tolist()
            for (i, _), v in zip(items, values):
                out[i] = bool(v)
    return out


# ---- the weights ------------------------------------------------------------------------------------------------

_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model → (versions of its tensors, names)


def _named_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Parameters then buffers by their state_dict names, a tensor shared by two names (tied weights) once."""
    seen, out = set(), []
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if id(t) not in seen and t.is_floating_point():
            seen.add(id(t))
            out.append((name, t))
    return out


def nonfinite_parameters(model: torch.nn.Module) -> list[str]:
    """The names of the model's parameters (and buffers) that hold NaN or ±∞, in the model's order. Remembered
    per model until one of its tensors changes in place (a tensor's version counter says so)."""
    named = _named_tensors(model)
    versions = tuple((id(t), t._version) for _, t in named)
    known = _FOUND.get(model)
    if known is not None and known[0] == versions:
        return list(known[1])
    with torch.no_grad():
        flags = [step_flag(t, "parameter") for _, t in named]
    bad = [name for (name, _), flag in zip(named, resolve(flags)) if flag]
    _FOUND[model] = (versions, tuple(bad))
    return bad


def value_kinds(tensors: list[torch.Tensor]) -> list[str]:
    """Which of 'NaN', '+∞', '−∞' these tensors hold, in that order."""
    found = []
    with torch.no_grad():
        for what, test in (("NaN", torch.isnan), ("+∞", torch.isposinf), ("−∞", torch.isneginf)):
            if any(bool(test(t.detach()).any()) for t in tensors):
                found.append(what)
    return found


# ---- what a run found -------------------------------------------------------------------------------------------


@dataclass
class NonFinite:
    """The parameters that hold NaN or ±∞, and the first step of the run whose values are not finite."""

    parameters: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # which of NaN, +∞, −∞ the parameters hold
    first_step: str | None = None  # the step's name
    first_index: int | None = None  # its index in the trace (0-based)

    def to_json(self) -> dict:
        """DESIGN.md's `"nonfinite"` of `trace --json`."""
        return {"parameters": list(self.parameters), "first_step": self.first_step}

    def parameters_text(self) -> str:
        """'2 parameters hold NaN values: encoder.0.ffn.w_1.weight, generator.proj.weight'."""
        n = len(self.parameters)
        if not n:
            return "the weights are all finite"
        kinds = " and ".join(self.kinds) if self.kinds else "NaN or ±∞"
        shown = ", ".join(self.parameters[:SHOWN_NAMES])
        more = f" and {n - SHOWN_NAMES} more" if n > SHOWN_NAMES else ""
        what = "1 parameter holds" if n == 1 else f"{n} parameters hold"
        return f"{what} {kinds} values: {shown}{more}"

    def step_text(self) -> str:
        if self.first_step is None:
            return "no step of this run has values that are not finite"
        return f"the first step whose values are not finite is step {self.first_index + 1}, {self.first_step}"

    def sentence(self) -> str:
        """One sentence naming the parameters (the first few and the count) and the first non-finite step."""
        text = f"{self.parameters_text()}; {self.step_text()}."
        return text[0].upper() + text[1:]


def find_nonfinite(model: torch.nn.Module | None, trace=None) -> NonFinite | None:
    """What a run found: None when the weights and every step are finite (the usual case)."""
    params = nonfinite_parameters(model) if model is not None else []
    first = trace.first_nonfinite() if trace is not None else None
    if not params and first is None:
        return None
    kinds = []
    if params:
        tensors = dict(_named_tensors(model))
        kinds = value_kinds([tensors[n] for n in params])
    found = NonFinite(params, kinds)
    if first is not None:
        found.first_step, found.first_index = first.name, first.index
    return found
