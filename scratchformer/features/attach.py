"""A dictionary attached to a run: its steps in the trace, right after the step it reads, and clamping a feature.

For a dictionary reading step S (and predicting step T; T = S for an SAE) the trace gains

    S.dict.pre       (batch, pos, feature)   pre = (x − b_dec) W_enc + b_enc
    S.dict.features  (batch, pos, feature)   f = σ(pre), kind `features`
    S.dict.recon     (batch, pos, d_model)   x̂ = f W_dec + b_dec
    S.dict.error     (batch, pos, d_model)   y − x̂: what the dictionary misses of T's value

recorded right after S (an SAE) or after T (a transcoder, whose error needs T). The forward pass is unchanged.

A `Clamp` sets one feature to a value (at every position, or one) — steering, or ablation with 0. T then carries on
as y + (f′ − f) W_dec: the reconstruction of the changed features plus the unchanged error, so clamping a feature to
its own value changes nothing. It is one more intervention (a StepEdit at T), shown in titles and in Compare.

A `DictPatch` is activation patching of one of those steps from another run (`trace --patch S.dict.features
--from-source …`): the features (or pre-activations, which give the same features) become the other run's, and T
carries on as above; a patched reconstruction x̂_o or error e_o replaces this run's in y = x̂ + e, so T becomes
y + (x̂_o − x̂) or y + (e_o − e).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch

from ..errors import UserError
from ..patching.interventions import StepEdit, intervene
from ..recording.trace import following
from .dictionary import Dictionary
from .folder import hook_step, load
from .points import position_dim, readable_steps

_PER_HEAD = re.compile(r".*\.(q|k|v|weights|context|q_rotated|k_rotated|q_normed|k_normed)$")


_READABLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _readable(model) -> list[str]:
    """readable_steps(model), walked once per model (a run with a dictionary attached asks at every run)."""
    if model not in _READABLE:
        _READABLE[model] = readable_steps(model)
    return _READABLE[model]


@dataclass(frozen=True)
class Clamp:
    """Feature `feature` (from 0) of the dictionary reading `step` set to `value`, at `position` (None: all)."""

    step: str
    feature: int
    value: float
    position: int | None = None

    def spec(self) -> str:
        at = f"@{self.position}" if self.position is not None else ""
        return f"{self.step}:{self.feature}={self.value:g}{at}"

    def note(self) -> str:
        where = f" at position {self.position + 1}" if self.position is not None else ""
        return f"feature {self.feature} clamped to {self.value:g}{where}"


DICT_PARTS = ("pre", "features", "recon", "error")
_DICT_STEP = re.compile(r"(?P<at>[\w.]+)\.dict\.(?P<part>pre|features|recon|error)")


def dictionary_step(step: str) -> tuple[str, str] | None:
    """'decoder.1.add_norm3.out.dict.features' → ('decoder.1.add_norm3.out', 'features'); None for other steps."""
    m = _DICT_STEP.fullmatch(step)
    return (m["at"], m["part"]) if m else None


@dataclass(frozen=True, eq=False)
class DictPatch:
    """Step `step` (a dictionary's pre, features, recon or error) takes `values` from another run (batch of 1)."""

    step: str
    values: torch.Tensor
    origin: str = "another run"

    @property
    def at(self) -> str:
        return dictionary_step(self.step)[0]

    @property
    def part(self) -> str:
        return dictionary_step(self.step)[1]

    def spec(self) -> str:
        return f"patch {self.step} from {self.origin}"

    def note(self) -> str:
        return f"{self.part} patched from {self.origin}"


_CLAMP = re.compile(r"(?P<step>[\w.]+):(?P<feature>\d+)=(?P<value>[-+0-9.eE]+)(?:@(?P<pos>\d+))?")


def parse_clamp(text: str) -> Clamp:
    """'decoder.1.add_norm3.out:12=0' or '…:12=5.5@3' → Clamp; UserError for anything else."""
    m = _CLAMP.fullmatch(text.strip())
    if m is None:
        raise UserError(f"--clamp {text!r}: write STEP:FEATURE=VALUE[@POSITION], e.g. decoder.1.add_norm3.out:12=0 "
                        "(features and positions counted from 0).")  # fmt: skip
    try:
        value = float(m["value"])
    except ValueError:
        raise UserError(f"--clamp {text!r}: {m['value']!r} is not a number.") from None
    return Clamp(m["step"], int(m["feature"]), value, int(m["pos"]) if m["pos"] else None)


class Attached:
    """Dictionaries checked against a model: each one's step read (`at`) and predicted (`to`) in this model's
    names, and what a traced run records for them."""

    def __init__(self, model, dictionaries: list[Dictionary], clamps: list[Clamp] = (),
                 patches: list[DictPatch] = ()) -> None:  # fmt: skip
        readable = _readable(model)
        self.model, self.by_step = model, {}
        for d in dictionaries:
            at = hook_step(model, d.info.at, readable)
            to = hook_step(model, d.info.to, readable) if d.transcoder else at
            for s in {at, to}:
                if _PER_HEAD.fullmatch(s):
                    raise UserError(f"The dictionary reads {s}, which holds one vector per head; scratchformer "
                                    "attaches dictionaries to steps with one vector per token.")  # fmt: skip
            width = model.config.d_model
            if d.d_in != width or d.d_out != width:
                raise UserError(f"The dictionary reads vectors of {d.d_in} numbers, but {at} holds {width} per "
                                "token in this model: it was trained on another model.")  # fmt: skip
            if at in self.by_step:
                raise UserError(f"Two dictionaries read {at}; attach one per step.")
            d.eval().requires_grad_(False)
            self.by_step[at] = (d, at, to)
        for c in clamps:
            if c.step not in self.by_step:
                raise UserError(f"--clamp {c.spec()}: no attached dictionary reads {c.step} (attached: "
                                f"{', '.join(self.by_step) or 'none'}).")  # fmt: skip
            d = self.by_step[c.step][0]
            if not 0 <= c.feature < d.d_sae:
                raise UserError(f"--clamp {c.spec()}: the dictionary has features 0 to {d.d_sae - 1}.")
        self.clamps = list(clamps)
        self.patches: dict[str, dict[str, torch.Tensor]] = {}  # at → part → the other run's values
        for p in patches:
            if p.at not in self.by_step:
                raise UserError(f"--patch {p.step}: no attached dictionary reads {p.at} (attached: "
                                f"{', '.join(self.by_step) or 'none'}).")  # fmt: skip
            part = "features" if p.part == "pre" else p.part  # the other run's pre-activations give its features
            values = self.by_step[p.at][0].activate(p.values.float()) if p.part == "pre" else p.values.float()
            self.patches.setdefault(p.at, {})[part] = values
        self._seen: dict[str, torch.Tensor] = {}  # a pass's unchanged value at each dictionary's `at`

    def features_of(self, step: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(pre, f′): the pre-activations of x at the dictionary reading `step`, and its features with this run's
        clamps applied."""
        d = self.by_step[step][0]
        with torch.no_grad():
            pre = d.pre(x.float())
            f = d.activate(pre)
        given = self.patches.get(step, {}).get("features")
        if given is not None:
            _same_shape(f"{step}.dict.features", given, f)
            f = given.to(f.dtype)
        for c in self.clamps:
            if c.step == step:
                f = f.clone()
                pos = slice(None) if c.position is None else c.position
                if c.position is not None and c.position >= f.shape[1]:
                    raise UserError(f"--clamp {c.spec()}: this run has positions 0 to {f.shape[1] - 1}.")
                f[:, pos, c.feature] = c.value
        return pre, f

    def edits(self) -> list[StepEdit]:
        """Where a feature is clamped or a dictionary step patched, `to` carries on as y + (f′ − f) W_dec (f read from
        `at`'s unchanged value, which a transcoder's clamp remembers as the pass goes by), a patched reconstruction
        or error taking this run's place in y = x̂ + e; nothing else changes the pass."""
        out = []
        for step, (d, at, to) in self.by_step.items():
            mine = [c.note() for c in self.clamps if c.step == step]
            given = self.patches.get(step, {})
            mine += [f"{part} patched from another run" for part in given]
            if not mine:
                continue

            def change(x: torch.Tensor, t: torch.Tensor, step=step, d=d, at=at, given=given) -> torch.Tensor:
                self._seen[at] = x  # what the followers read: x unchanged (an SAE's own step carries the change)
                with torch.no_grad():  # the change is a constant added to t (t keeps its gradient)
                    f = d.activate(d.pre(x.float()))
                    _, f2 = self.features_of(step, x)
                    delta = (f2 - f) @ d.W_dec
                    if "recon" in given or "error" in given:
                        recon = d.decode(f)  # this run's x̂; its error e = t − x̂
                    if "recon" in given:  # the other run's x̂ in place of this run's (and of any f′)
                        _same_shape(f"{step}.dict.recon", given["recon"], recon)
                        delta = given["recon"] - recon
                    if "error" in given:
                        _same_shape(f"{step}.dict.error", given["error"], recon)
                        delta = delta + given["error"] - (t.float() - recon)
                return t + delta.to(t.dtype)

            out += read_then_edit(at, to, change, "; ".join(mine))
        return out

    def _remember(self, at: str, t: torch.Tensor) -> torch.Tensor:
        self._seen[at] = t
        return t

    def followers(self) -> dict:
        """Step → recorder: an SAE's four steps after `at`; a transcoder's after `to`, with `at`'s value kept as
        the pass goes by. error = y − x̂ is then the same whether or not a feature was clamped: y carries the clamp's
        change, x̂ the clamped features."""
        out = {}
        for step, (d, at, to) in self.by_step.items():
            if at != to:
                out[at] = lambda tracer, x, at=at: self._remember(at, x)

            def record(tracer, y: torch.Tensor, step=step, d=d, at=at) -> None:
                x = self._seen.pop(at, y)  # an SAE's clamp kept the unchanged x; else x is y itself
                pre, f = self.features_of(step, x)
                with torch.no_grad():
                    recon = self.patches.get(step, {}).get("recon")
                    recon = d.decode(f) if recon is None else recon
                error = y.float() - recon
                pos, kind, arch = position_dim(at), "transcoder" if d.transcoder else "SAE", d.describe().split(" ")[0]
                block = f"{tracer.steps[-1].sublayer}.dict"  # "Decoder 2 › Add & Norm 3 › Dictionary"
                tracer.add(f"{step}.dict.pre", "features", pre, ("batch", pos, "feature"), f"{kind} pre-activations",
                           "pre = (x − b_dec) W_enc + b_enc" if d.centres_input else "pre = x W_enc + b_enc",
                           block)  # fmt: skip
                tracer.add(f"{step}.dict.features", "features", f, ("batch", pos, "feature"),
                           f"{kind} features ({d.d_sae}, {arch})", _activation_formula(d), block,
                           major=True)  # fmt: skip
                tracer.add(f"{step}.dict.recon", "reconstruction", recon, ("batch", pos, "d_model"),
                           f"{kind} reconstruction", "x̂ = f W_dec + b_dec", block)  # fmt: skip
                tracer.add(f"{step}.dict.error", "reconstruction", error, ("batch", pos, "d_model"),
                           f"{kind} error (what the features miss)", "error = y − x̂", block)  # fmt: skip

            out[to] = record
        return out


def _same_shape(step: str, given: torch.Tensor, own: torch.Tensor) -> None:
    if given.shape != own.shape:
        raise UserError(f"--patch {step}: the other run's values have the shape {tuple(given.shape)} and this run's "
                        f"{tuple(own.shape)}; activation patching needs inputs of the same length.")  # fmt: skip


def read_then_edit(at: str, to: str, change, what: str) -> list[StepEdit]:
    """StepEdits that carry step `to` on as change(x, t): t its own value, x the same pass's value at `at` (t
    itself when `at` is `to`; otherwise remembered as the pass goes by, changing nothing there). What a clamp and a
    spliced-in reconstruction (features.quality) both do."""
    if at == to:
        return [StepEdit(at, lambda t: change(t, t), what)]
    seen: dict[str, torch.Tensor] = {}

    def keep(t: torch.Tensor) -> torch.Tensor:
        seen["x"] = t
        return t

    return [StepEdit(at, keep, ""), StepEdit(to, lambda t: change(seen["x"], t), what)]  # "": no note at `at`


def _activation_formula(d: Dictionary) -> str:
    if d.architecture == "topk" or (d.architecture == "batchtopk" and not bool(d.threshold.any())):
        return f"f = ReLU(TopK_{d.k}(pre)): the {d.k} largest of each token kept"
    if d.architecture in ("jumprelu", "batchtopk"):
        return "f = pre · [pre > θ] (JumpReLU, θ per feature)"
    return "f = ReLU(pre)"


def open_dictionaries(folders: list[str]) -> list[Dictionary]:
    return [load(f) for f in folders]


@contextmanager
def attached(model, dictionaries: list[Dictionary], clamps: list[Clamp] = (), others: list = ()) -> Iterator[Attached]:
    """Run traced passes inside with the dictionaries' steps recorded and their clamps applied; `others`: further
    interventions of the same passes (an --ablate, a --patch; a DictPatch among them patches a dictionary's
    step), applied together."""
    att = Attached(model, dictionaries, clamps, [o for o in others if isinstance(o, DictPatch)])
    rest = [o for o in others if not isinstance(o, DictPatch)]
    with ExitStack() as stack:
        stack.enter_context(intervene(model, [*rest, *att.edits()]))
        stack.enter_context(following(att.followers()))
        yield att


def traced(bundle, inputs, dictionaries: list[Dictionary], clamps: list[Clamp] = (), others: list = (), **options):
    """bundle.run(inputs, **options) with the dictionaries attached (and `others`, further interventions): (output,
    trace), the trace knowing its dictionaries (`trace.dictionaries`, what derive recomputes features from)."""
    with attached(bundle.model, dictionaries, clamps, others) as att:
        out, trace = bundle.run(inputs, **options)
    trace.dictionaries = dict(att.by_step)
    return out, trace
