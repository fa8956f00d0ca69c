"""Attribution: which input tokens the model's prediction at one decoder position depends on.

f = log P(y_P), the log-probability of the token y_P that the model puts at decoder position P (its first choice
there). The inputs are the embeddings' output vectors — the steps `src_embed.sum` and `tgt_embed.sum` (or their
LayerNorm, for models that normalise embeddings) — of every source token and every decoder-input token, and each
token's attribution is the sum over its d_model numbers of:

- gradient × input: (x − x′) · ∂f/∂x at the input x;
- Integrated Gradients (Sundararajan et al. 2017): (x − x′) · ∫₀¹ ∂f/∂x(x′ + α(x − x′)) dα, the integral by the
  midpoint rule on a partition of the path into N pieces placed where f changes (`path_points`). IG is
  *complete*: its attributions sum to f(x) − f(x′), which is reported beside the sum (`completeness`).

N starts at `steps` (64: the fast first answer). When the attributions then miss f(x) − f(x′) by more than
TOLERANCE of it, N is doubled and the integral taken again, until they are within it or the next doubling would
pass `max_steps` (the budget, MAX_STEPS by default); the result says how many steps it used and whether the
budget ran out first.

x′ is the baseline: zero vectors (`zero`, the default) or the embeddings of the padding token at every position
(`pad`, positions kept). The vectors on the path enter the model by the interventions' patch mechanism
(scratchformer.patching.interventions.Patch on the embedding steps, local to this run), so the forward pass is the
model's own, with the steps' usual names; the inputs x are read from the traced run. The N path points run as batches of
at most CHUNK_POSITIONS positions, so memory stays bounded however large N is.

    compute(bundle, inputs, trace, position=3, method="ig", steps=64) → Attribution
    `scratchformer attribute --position P --method ig|grad-input [--steps N] [--max-steps M] [--baseline zero|pad]
     [--json]`
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from ..commands.common import print_result, traced_run
from ..errors import UserError
from ..patching.interventions import Patch, intervene
from ..recording.trace import Trace, tracing
from ..transformer.masks import pad_from_ids
from .stream import add_run_args, embedding_point

METHODS = ("ig", "grad-input")
BASELINES = ("zero", "pad")
DEFAULT_STEPS = 64  # the first answer's points
MAX_STEPS = 1024  # the budget: points of the last refinement at most (en-hi's examples need 512 at the most)
TOLERANCE = 0.01  # refine until |Σ attributions − (f(x) − f(x′))| is at most this share of |f(x) − f(x′)|
ABSOLUTE_TOLERANCE = 1e-4  # … or this many nats, for a prediction the baseline barely changes
CHUNK_POSITIONS = 2048  # path points per batch × (source + decoder-input positions): bounds the activations


@dataclass
class Attribution:
    method: str
    position: int
    token_id: int
    token: str
    source: torch.Tensor | None  # (S,) per source token, None without an encoder
    target: torch.Tensor  # (T,) per decoder-input token
    f_input: float  # log P(token) at the input
    f_baseline: float  # … at the baseline
    steps: int  # IG's points in the answer given (1 for gradient × input)
    baseline: str
    source_tokens: list[str] = field(default_factory=list)
    target_tokens: list[str] = field(default_factory=list)
    asked_steps: int = 0  # IG's first try's points (`steps` when no refinement was needed; 0: not recorded)
    max_steps: int = 0  # IG's budget of points

    @property
    def total(self) -> float:
        return _total(self.source, self.target)

    @property
    def delta(self) -> float:
        return self.f_input - self.f_baseline

    @property
    def gap(self) -> float:
        """How far the attributions miss completeness, as a share of |f(x) − f(x′)|."""
        return _gap(self.total, self.delta)

    @property
    def complete_enough(self) -> bool:
        """Within the tolerance the refinement aims for (gradient × input never claims it)."""
        return self.method == "ig" and _close_enough(self.total, self.delta)

    def steps_text(self) -> str:
        """'64 steps', '256 steps, refined from 64 until within 1%' or '… the budget of 128 ran out 1.6% from
        complete': how IG's answer was had."""
        if self.method != "ig":
            return "one gradient"
        if self.steps == self.asked_steps or not self.asked_steps:
            return f"{self.steps} steps"
        if self.complete_enough:
            return f"{self.steps} steps, refined from {self.asked_steps} until within {TOLERANCE:.0%}"
        return (f"{self.steps} steps, refined from {self.asked_steps} until the budget of {self.max_steps} ran out "
                f"{self.gap:.1%} from complete")

    def to_dict(self) -> dict:
        return {"method": self.method, "position": self.position, "token": {"id": self.token_id, "token": self.token},
                "source": None if self.source is None else [float(v) for v in self.source],
                "target": [float(v) for v in self.target],
                "completeness": {"sum": self.total, "delta": self.delta, "f_input": self.f_input,
                                 "f_baseline": self.f_baseline},
                "steps": self.steps if self.method == "ig" else None,
                "asked_steps": self.asked_steps if self.method == "ig" else None,
                "max_steps": self.max_steps if self.method == "ig" else None, "baseline": self.baseline,
                "source_tokens": self.source_tokens, "target_tokens": self.target_tokens}  # fmt: skip


def _close_enough(total: float, delta: float) -> bool:
    return abs(total - delta) <= max(TOLERANCE * abs(delta), ABSOLUTE_TOLERANCE)


def _gap(total: float, delta: float) -> float:
    return abs(total - delta) / max(abs(delta), 1e-12)


def check_request(bundle, n_positions: int, position: int, method: str, steps: int) -> None:
    """One sentence (UserError) for a request that cannot be answered."""
    if not bundle.config.has_decoder:
        raise UserError("This model has no decoder (an encoder alone), so it puts no token at a decoder position; "
                        "attribute needs an encoder-decoder or a decoder-only model.")  # fmt: skip
    if method not in METHODS:
        raise UserError(f"Unknown method {method!r}; choose ig or grad-input.")
    if not 0 <= position < n_positions:
        raise UserError(f"Position {position} is beyond the decoder input: it has {n_positions} positions, 0 to "
                        f"{n_positions - 1}.")  # fmt: skip
    if method == "ig" and steps < 1:
        raise UserError(f"Integrated Gradients needs at least 1 step, not {steps}.")


def path_points(f_at, steps: int, rounds: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """IG's points α in (0, 1) and their weights (summing to 1), placed where f changes along the path.

    f often changes in a narrow stretch of the path — with a zero baseline an embedding scaled by √d_model is
    mostly "read" within the first few percent of α, sometimes in a jump of a thousandth of the path where an
    attention row switches — and evenly spread points miss most of the integrand there. So f is first measured
    without gradients (`f_at`: α array → f values) on an even grid of 4·steps + 1 points; any grid cell that
    holds more than 1/steps of f's total change is cut in 8 and measured again, up to `rounds` times (8 rounds
    reach stretches of 10⁻¹⁰ of the path: an RMSNorm reading a zero-baseline input with ε = 10⁻⁶ saturates within
    the first 10⁻⁵ of α, where a Llama-style model's prediction moves by a third of its whole change). The path is
    then cut into `steps` pieces, half of them spread evenly over α and half in proportion to how much f changes,
    and each piece contributes its midpoint weighted by its length (the midpoint rule on that partition).
    Completeness holds for any partition; this one gets there with far fewer gradients than an even one."""
    grid = np.linspace(0.0, 1.0, 4 * steps + 1)
    values = np.asarray(f_at(grid), dtype=np.float64)
    for _ in range(rounds):
        change = np.abs(np.diff(values))
        big = np.flatnonzero(change > change.sum() / steps)
        if big.size == 0:
            break
        extra = np.concatenate([np.linspace(grid[i], grid[i + 1], 9)[1:-1] for i in big])
        grid = np.concatenate([grid, extra])
        values = np.concatenate([values, np.asarray(f_at(extra), dtype=np.float64)])
        order = np.argsort(grid, kind="stable")
        grid, values = grid[order], values[order]
    change = np.abs(np.diff(values))
    share = 0.5 * np.diff(grid) + 0.5 * (change / change.sum() if change.sum() > 0 else np.diff(grid))
    cdf = np.concatenate([[0.0], np.cumsum(share)])
    cdf /= cdf[-1]
    breaks = np.interp(np.linspace(0.0, 1.0, steps + 1), cdf, grid)  # piece boundaries in α
    return (breaks[1:] + breaks[:-1]) / 2, np.diff(breaks)


def _baseline(model, name: str, ids: torch.Tensor, x: torch.Tensor, kind: str) -> torch.Tensor:
    """(L, d_model) baseline vectors for the embedding step `name` of these (1, L) ids."""
    if kind == "zero":
        return torch.zeros_like(x)
    pad = model.config.pad_id
    if pad is None:
        raise UserError("This model's vocabulary has no padding token; use --baseline zero.")
    module = model.src_embed if name.startswith("src_embed") else model.tgt_embed
    with torch.inference_mode(), tracing() as tracer:  # the padding's embeddings, read from the same named step
        module(torch.full_like(ids, pad))
    # the trace holds its steps on the CPU: the baseline goes where the inputs are (a GPU), in their precision
    return next(s for s in tracer.steps if s.name == name).item(0).to(x.device, x.dtype)


def _along(x: torch.Tensor | None, base: torch.Tensor | None, alphas: torch.Tensor) -> torch.Tensor | None:
    """Points of the straight path base + α(x − base): (L, d) and (N, 1, 1) α → (N, L, d); None stays None."""
    return None if x is None else base + alphas * (x - base)


class _Objective:
    """f(source vectors, decoder-input vectors) = log P(token at P) for a batch of N path points, each a (N, L, d)
    tensor patched into the embedding steps."""

    def __init__(self, model, src, tgt, src_pad, tgt_pad, names: tuple[str | None, str], position: int, token: int):
        self.model, self.src, self.tgt, self.src_pad, self.tgt_pad = model, src, tgt, src_pad, tgt_pad
        self.names, self.position, self.token = names, position, token

    def __call__(self, src_vals: torch.Tensor | None, tgt_vals: torch.Tensor) -> torch.Tensor:
        n, m = tgt_vals.shape[0], self.model
        rep = lambda t: None if t is None else t.expand(n, *t.shape[1:])  # noqa: E731  (1, L) → (N, L)
        patches = [Patch(self.names[1], tgt_vals, "the attribution path")]
        if src_vals is not None:
            patches.append(Patch(self.names[0], src_vals, "the attribution path"))
        with intervene(m, patches):
            memory = m.encode(rep(self.src), rep(self.src_pad)) if m.config.has_encoder else None
            h = m.decode(rep(self.tgt), memory, rep(self.src_pad), rep(self.tgt_pad))  # (N, T, d_model)
            logits = m.generator(h[:, self.position : self.position + 1])  # (N, 1, vocab): only position P
        wide = torch.promote_types(logits.dtype, torch.float32)  # bfloat16 and float16 in float32, float64 kept
        return logits[:, 0].to(wide).log_softmax(-1)[:, self.token]  # (N,)


def compute(bundle, inputs, trace: Trace, position: int, method: str = "ig", steps: int = DEFAULT_STEPS,
            baseline: str = "zero", batch: int = 0, max_steps: int = MAX_STEPS,
            progress: Callable[[int, float], object] | None = None,
            cancelled: Callable[[], bool] | None = None) -> Attribution | None:  # fmt: skip
    """Attribute log P(the token at `position`) to the input tokens. IG starts with `steps` points and doubles
    them while the attributions miss completeness by more than TOLERANCE, up to `max_steps` (at least `steps`).
    progress(steps, gap) follows each try that falls short (gap: its share of f(x) − f(x′) missed); when
    cancelled() turns true between two batches of path points the work stops and None is returned."""
    model, c = bundle.model, bundle.config
    n_positions = trace["tgt_embed.tokens"].shape[-1] if trace.find("tgt_embed.tokens") is not None else 0
    check_request(bundle, n_positions, position, method, steps)
    if baseline not in BASELINES:
        raise UserError(f"Unknown baseline {baseline!r}; choose zero or pad.")
    dev, dtype = model.device, model.generator.proj.weight.dtype
    pick = lambda t: None if t is None else t[batch : batch + 1].to(dev)  # noqa: E731  (B, L) → (1, L)
    src, tgt = pick(inputs.src) if c.has_encoder else None, pick(inputs.tgt)
    src_pad = pick(inputs.src_pad if inputs.src_pad is not None else pad_from_ids(inputs.src, c.pad_id))
    tgt_pad = pick(inputs.tgt_pad if inputs.tgt_pad is not None else pad_from_ids(inputs.tgt, c.pad_id, start=True))
    names = (embedding_point(trace, "encoder") if c.has_encoder else None, embedding_point(trace, "decoder"))
    token = int(trace.output_summary.item(batch).top_ids[0, position, 0])  # the model's first choice at P
    x_src = trace[names[0]].item(batch).to(dev, dtype) if src is not None else None  # (S, d_model)
    x_tgt = trace[names[1]].item(batch).to(dev, dtype)  # (T, d_model)
    b_src = _baseline(model, names[0], src, x_src, baseline) if src is not None else None
    b_tgt = _baseline(model, names[1], tgt, x_tgt, baseline)
    path = _Path(_Objective(model, src, tgt, src_pad, tgt_pad, names, position, token), x_src, b_src, x_tgt, b_tgt,
                 cancelled or (lambda: False))
    add = lambda t: None if t is None else t[None]  # noqa: E731  (L, d) → (1, L, d)
    with torch.no_grad():
        f_in = float(path.f(add(x_src), add(x_tgt))[0])
        f_base = float(path.f(add(b_src), add(b_tgt))[0])
    asked, budget = steps, max(steps, max_steps)
    try:
        if method == "grad-input":
            asked = budget = steps = 1
            attr_src, attr_tgt = path.integrate(np.ones(1), np.ones(1))
        else:
            attr_src, attr_tgt = path.integrate(*path_points(path.f_at, steps))
            while not _close_enough(_total(attr_src, attr_tgt), f_in - f_base) and 2 * steps <= budget:
                if progress is not None:
                    progress(steps, _gap(_total(attr_src, attr_tgt), f_in - f_base))
                steps *= 2  # the midpoint rule's error shrinks as the pieces do: halve them all
                attr_src, attr_tgt = path.integrate(*path_points(path.f_at, steps))
    except _Cancelled:
        return None
    tok = bundle.tgt_tokenizer.token_strings([token])[0]
    return Attribution(method, position, token, tok, attr_src, attr_tgt, f_in, f_base, steps, baseline,
                       list(trace.source_tokens[batch]) if trace.source_tokens else [],
                       list(trace.target_tokens[batch]) if trace.target_tokens else [],
                       asked_steps=asked, max_steps=budget)


def _total(attr_src: torch.Tensor | None, attr_tgt: torch.Tensor) -> float:
    return float(attr_tgt.sum()) + (float(attr_src.sum()) if attr_src is not None else 0.0)


class _Cancelled(Exception):
    """Raised between two batches of path points once the caller no longer wants the answer."""


class _Path:
    """The straight path from the baseline to the input, f along it, and the weighted sum of f's gradients at
    chosen points of it, run in chunks of at most CHUNK_POSITIONS positions."""

    def __init__(self, f: _Objective, x_src, b_src, x_tgt, b_tgt, cancelled: Callable[[], bool]) -> None:
        self.f, self.x_src, self.b_src, self.x_tgt, self.b_tgt = f, x_src, b_src, x_tgt, b_tgt
        self.cancelled = cancelled
        self.dev, self.dtype = x_tgt.device, x_tgt.dtype
        self.chunk = max(1, CHUNK_POSITIONS // (x_tgt.shape[0] + (x_src.shape[0] if x_src is not None else 0)))

    def _batches(self, *columns: np.ndarray) -> Iterator[list[torch.Tensor]]:
        """The columns (α, and their weights) a batch of path points at a time, each as an (N, 1, 1) tensor;
        raises _Cancelled before a batch once the caller no longer wants the answer."""
        for a in range(0, len(columns[0]), self.chunk):
            if self.cancelled():
                raise _Cancelled
            yield [torch.tensor(c[a : a + self.chunk], device=self.dev, dtype=self.dtype)[:, None, None]
                   for c in columns]  # fmt: skip

    def f_at(self, alphas: np.ndarray) -> np.ndarray:
        """f at these points of the path, without gradients."""
        out = []
        with torch.no_grad():
            for (al,) in self._batches(alphas):
                src, tgt = _along(self.x_src, self.b_src, al), _along(self.x_tgt, self.b_tgt, al)  # (N, L, d)
                out.append(self.f(src, tgt).double().cpu())
        return torch.cat(out).numpy()

    def integrate(self, alphas: np.ndarray, weights: np.ndarray) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Per token, (x − x′) · Σ_k w_k ∂f/∂x(x′ + α_k(x − x′)): ((S,) or None, (T,))."""
        x_src, b_src, x_tgt, b_tgt = self.x_src, self.b_src, self.x_tgt, self.b_tgt
        g_src = torch.zeros_like(x_src) if x_src is not None else None  # Σ_k w_k ∂f/∂x at the path points
        g_tgt = torch.zeros_like(x_tgt)
        for al, w in self._batches(alphas, weights):
            path_tgt = _along(x_tgt, b_tgt, al).requires_grad_(True)  # (N, T, d_model)
            path_src = _along(x_src, b_src, al).requires_grad_(True) if x_src is not None else None  # (N, S, d)
            with torch.enable_grad():
                out = self.f(path_src, path_tgt).sum()  # the path points are independent: one backward for all
                wanted = [path_tgt] + ([path_src] if path_src is not None else [])
                grads = torch.autograd.grad(out, wanted)
            g_tgt += (w * grads[0]).sum(0)
            if path_src is not None:
                g_src += (w * grads[1]).sum(0)
        attr_tgt = ((x_tgt - b_tgt) * g_tgt).sum(-1).double().cpu()  # (T,)
        attr_src = ((x_src - b_src) * g_src).sum(-1).double().cpu() if x_src is not None else None  # (S,)
        return attr_src, attr_tgt


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    p = sub.add_parser("attribute", help="which input tokens the prediction at one decoder position depends on "
                                         "(Integrated Gradients or gradient × input)",
                       description="Attribute the log-probability of the token the model puts at decoder position P "
                       "to the source and decoder-input tokens.")  # fmt: skip
    add_run_args(p)
    p.add_argument("--position", type=int, required=True, help="decoder position P, from 0")
    p.add_argument("--method", choices=METHODS, default="ig", help="ig (Integrated Gradients, default) or grad-input")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                   help=f"IG's points on the first try (default {DEFAULT_STEPS}); doubled while the attributions' sum "
                        f"misses f(x) − f(baseline) by more than {TOLERANCE:g} of it")
    p.add_argument("--max-steps", type=int, default=MAX_STEPS,
                   help=f"the budget: IG refines up to this many points (default {MAX_STEPS}; --max-steps equal to "
                        "--steps: no refinement)")
    p.add_argument("--baseline", choices=BASELINES, default="zero",
                   help="zero vectors (default) or the padding token's embeddings")


def run(args: argparse.Namespace) -> int:
    if args.method == "ig" and args.steps < 1:  # before any model loads
        raise UserError(f"Integrated Gradients needs at least 1 step, not {args.steps}.")
    bundle, inputs, trace, item = traced_run(args)
    result = compute(bundle, inputs, trace, args.position, args.method, args.steps, args.baseline, item,
                     args.max_steps)
    return print_result(args.json, result.to_dict(), lambda: text_report(result))


def text_report(a: Attribution) -> str:
    how = f"Integrated Gradients, {a.steps_text()}" if a.method == "ig" else "gradient × input"
    lines = [f"log P(“{a.token}”) at decoder position {a.position}: {a.f_input:.4f} ({how}, {a.baseline} baseline)"]
    if a.source is not None:
        lines.append("source:")
        lines += [f"  {t:<16} {float(v):+.4f}" for t, v in zip(a.source_tokens, a.source)]
    lines.append("decoder input:")
    lines += [f"  {t:<16} {float(v):+.4f}" for t, v in zip(a.target_tokens, a.target)]
    lines.append(f"completeness: attributions sum to {a.total:+.4f}; f(input) − f(baseline) = {a.delta:+.4f}")
    return "\n".join(lines)
