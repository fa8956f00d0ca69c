"""The lessons' small value language: placeholders in a page's text and the answers of its questions.

    {d_k}  {sqrt_d_k|2}  {src_tokens}  {src:2}  {value:decoder.1.cross_attn.weights[0,0,2,2]}
    {argmax:decoder.1.cross_attn.weights[0,0,2,:]}  {count_neginf:decoder.0.self_attn.mask[0,:,:]}

An expression is a NAME of the run (NAMES below), `src:N` / `tgt:N` (a token of the run), or FUNCTION:STEP[INDEX]
with one entry per axis of the step's tensor (in the order of its dims), each a whole number (negative counts
from the end) or `:` for the whole axis. `value` reads one cell (or `value:NAME`); `argmax` / `argmin` take one
`:` axis and give the position there (as its token when the axis is a token axis); `max`, `min`, `sum`, `mean`,
`count_neginf`, `count_zero` reduce over every `:` axis. `result:KEY.KEY…` reads the result of the page's live
experiment (a page with `experiment`): {result:sparse.stored}, {result:neuron.top.0.token} (a list entry by its
number). A placeholder may end in `|N`: N decimals. Nothing is evaluated as Python: the grammar is this parser,
and a mistake is one sentence (ValueError).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import torch

from ..explain.format import sig3

STEP_FUNCTIONS = ("value", "argmax", "argmin", "max", "min", "sum", "mean", "count_neginf", "count_zero")
TOKEN_FUNCTIONS = ("src", "tgt")
RESULT_FUNCTION = "result"  # result:KEY.KEY… — the page's experiment's result
_RESULT_PATH = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$")
NAMES = {
    "model": "the model's name",
    "d_model": "the width of every token's vector",
    "n_heads": "heads per attention",
    "d_k": "the width of one head's queries and keys",
    "sqrt_d_k": "√d_k, what the scores are divided by",
    "sqrt_d_model": "√d_model, what the embeddings are multiplied by",
    "d_ff": "the feed-forward network's hidden width",
    "n_kv_heads": "key/value heads per attention (fewer than n_heads under grouped-query attention)",
    "heads_per_kv": "query heads that read each key/value head",
    "kv_cache_per_token": "numbers the KV cache keeps per token and layer: 2 · n_kv_heads · d_k (K and V)",
    "kv_cache_unshared": "what it would keep with one key/value head per query head: 2 · n_heads · d_k",
    "d_rot": "how many of a head's dimensions rotary positions turn (0 without RoPE)",
    "rope_theta": "the base θ of rotary positions' frequencies",
    "n_encoder_layers": "encoder layers",
    "n_decoder_layers": "decoder layers",
    "src_vocab": "the source vocabulary's size",
    "tgt_vocab": "the target vocabulary's size",
    "n_src": "source tokens in this run",
    "n_tgt": "decoder-input tokens in this run",
    "src_tokens": "the source tokens, in order",
    "tgt_tokens": "the decoder's input tokens, in order",
    "translation": "the model's output in this run",
    "n_steps": "steps in this run's trace",
}
_STEP_CALL = re.compile(r"^([A-Za-z0-9_.]+)\[([^\[\]]*)\]$")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Expr:
    function: str  # "" for a NAME, else one of STEP_FUNCTIONS or TOKEN_FUNCTIONS
    name: str = ""  # a NAME, or the step
    index: tuple[int | None, ...] = ()  # None: the whole axis (`:`)
    position: int = 0  # src:N / tgt:N
    decimals: int | None = None

    @property
    def step(self) -> str | None:
        return self.name if self.function in STEP_FUNCTIONS and self.index else None


@dataclass(frozen=True)
class Value:
    """What an expression gives: a number or a text (or both: an argmax over tokens gives the position and the
    token), and for argmax / argmin / value of a step, the full index of the cell it names."""

    number: float | None = None
    text: str = ""
    position: int | None = None  # argmax / argmin: the position along the `:` axis
    axis: str = ""  # that axis' name (src_pos, tgt_pos, vocab …)
    cell: tuple[int, ...] | None = None
    step: str | None = None

    def shown(self, decimals: int | None = None) -> str:
        if self.text:
            return self.text
        return number_text(self.number, decimals)


def number_text(x: float | None, decimals: int | None = None) -> str:
    if x is None:
        return ""
    if math.isinf(x) or math.isnan(x):
        return sig3(x)
    if decimals is not None:
        return f"{x:.{decimals}f}"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return sig3(x)


def placeholders(text: str) -> list[str]:
    """The expressions between single braces ({{ and }} are literal braces)."""
    return _PLACEHOLDER.findall(text.replace("{{", "").replace("}}", ""))


def parse_expression(text: str) -> Expr:
    """An Expr from 'sqrt_d_k', 'src:2' or 'argmax:decoder.1.cross_attn.weights[0,0,2,:]' (optionally '|2');
    ValueError with one sentence otherwise."""
    raw = text.strip()
    decimals = None
    if "|" in raw:
        raw, _, fmt = raw.rpartition("|")
        raw = raw.strip()
        if not fmt.strip().isdigit():
            raise ValueError(f"{text!r}: what follows '|' must be a number of decimals, e.g. {{sqrt_d_k|2}}")
        decimals = int(fmt)
    if not raw:
        raise ValueError("an empty placeholder {}; write a name such as {d_k}")
    function, colon, arg = raw.partition(":")
    function = function.strip()
    if not colon:
        if function not in NAMES:
            raise ValueError(f"unknown name {function!r}; the names are {', '.join(NAMES)}, or FUNCTION:STEP[…]")
        return Expr("", function, decimals=decimals)
    arg = arg.strip()
    if function == RESULT_FUNCTION:
        if not _RESULT_PATH.match(arg):
            raise ValueError(f"{raw!r}: result: takes the keys of the experiment's result joined by dots, e.g. "
                             "result:sparse.stored")
        return Expr(RESULT_FUNCTION, arg, decimals=decimals)
    if function in TOKEN_FUNCTIONS:
        if not re.fullmatch(r"-?\d+", arg):
            raise ValueError(f"{raw!r}: {function}: takes a position, e.g. {function}:2")
        return Expr(function, position=int(arg), decimals=decimals)
    if function not in STEP_FUNCTIONS:
        raise ValueError(f"unknown function {function!r} in {raw!r}; the functions are "
                         f"{', '.join(STEP_FUNCTIONS + TOKEN_FUNCTIONS + (RESULT_FUNCTION,))}")  # fmt: skip
    if function == "value" and arg in NAMES:
        return Expr("", arg, decimals=decimals)
    call = _STEP_CALL.match(arg)
    if call is None:
        raise ValueError(f"{raw!r}: write {function}:STEP[i,j,…] with one index per axis (or {function}:NAME)"
                         if function == "value" else f"{raw!r}: write {function}:STEP[i,j,…], ':' for a whole axis")
    entries = [e.strip() for e in call.group(2).split(",")]
    index: list[int | None] = []
    for e in entries:
        if e == ":":
            index.append(None)
        elif re.fullmatch(r"-?\d+", e):
            index.append(int(e))
        else:
            raise ValueError(f"{raw!r}: an index entry is a whole number or ':', not {e!r}")
    free = index.count(None)
    if function in ("argmax", "argmin") and free != 1:
        raise ValueError(f"{raw!r}: {function} picks a position along exactly one axis: put ':' at one place")
    if function == "value" and free:
        raise ValueError(f"{raw!r}: value reads one cell: give every index (use max, sum … over ':')")
    return Expr(function, call.group(1), tuple(index), decimals=decimals)


@dataclass
class RunValues:
    """One run, as the lessons read it: the trace, the model's sizes and how ids read as tokens. Qt-free."""

    trace: object  # scratchformer.recording.trace.Trace
    config: object  # TransformerConfig
    model: str = ""
    translation: str = ""
    vocab_labels: object = None  # ids → token strings (the target vocabulary)
    cache: dict = field(default_factory=dict)
    bundle: object = None  # the model, for a page's experiment
    experiment: dict | None = None  # the result of the page's experiment, which {result:…} reads

    @classmethod
    def of(cls, bundle, trace, translation: str = "") -> RunValues:
        return cls(trace, bundle.config, bundle.name, translation, bundle.tgt_tokenizer.token_strings, bundle=bundle)

    def result(self, path: str) -> Value:
        """One entry of the page's experiment's result: a number, a text, or a list joined by commas."""
        if self.experiment is None:
            raise ValueError(f"{{result:{path}}} reads the page's experiment: give the page an 'experiment'")
        value = self.experiment
        for key in path.split("."):
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
                value = value[int(key)]
            else:
                raise ValueError(f"the {self.experiment.get('experiment', '')} experiment's result has no "
                                 f"{path!r} ({key!r} is not in it)")  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, (int, float, str, list)):
            raise ValueError(f"result:{path} is not a number or a text")
        if isinstance(value, list):
            return Value(text=", ".join(number_text(v) if isinstance(v, (int, float)) else str(v) for v in value))
        if isinstance(value, str):
            return Value(text=value)
        return Value(number=float(value))

    def named(self, name: str) -> Value:
        c, tr = self.config, self.trace
        src = tr.source_tokens[0] if tr.source_tokens else []
        tgt = tr.target_tokens[0] if tr.target_tokens else []
        d_k = c.d_kv or c.d_model // c.n_heads
        numbers = {
            "d_model": c.d_model, "n_heads": c.n_heads, "d_k": d_k, "sqrt_d_k": math.sqrt(d_k), "d_ff": c.d_ff,
            "sqrt_d_model": math.sqrt(c.d_model),
            "n_encoder_layers": c.n_encoder_layers if c.has_encoder else 0,
            "n_decoder_layers": c.n_decoder_layers if c.has_decoder else 0,
            "src_vocab": c.src_vocab_size, "tgt_vocab": c.tgt_vocab_size, "n_src": len(src), "n_tgt": len(tgt),
            "n_steps": len(tr), "n_kv_heads": c.kv_heads, "heads_per_kv": c.n_heads // c.kv_heads,
            "d_rot": c.d_rotary, "rope_theta": c.rope_theta, "kv_cache_per_token": 2 * c.kv_heads * d_k,
            "kv_cache_unshared": 2 * c.n_heads * d_k,
        }  # fmt: skip
        if name in numbers:
            return Value(number=float(numbers[name]))
        texts = {"model": self.model, "translation": self.translation, "src_tokens": " · ".join(src),
                 "tgt_tokens": " · ".join(tgt)}  # fmt: skip
        return Value(text=texts[name])

    def token(self, side: str, position: int) -> Value:
        tokens = (self.trace.source_tokens if side == "src" else self.trace.target_tokens) or [[]]
        row = tokens[0]
        if not -len(row) <= position < len(row):
            what = "source" if side == "src" else "decoder-input"
            raise ValueError(f"{side}:{position}: this run has {len(row)} {what} tokens (0 … {len(row) - 1})")
        return Value(text=row[position], position=position % len(row))

    def label(self, dim: str, batch: int, position: int) -> str:
        tr = self.trace
        if dim == "src_pos" and tr.source_tokens:
            return tr.source_tokens[min(batch, len(tr.source_tokens) - 1)][position]
        if dim == "tgt_pos" and tr.target_tokens:
            return tr.target_tokens[min(batch, len(tr.target_tokens) - 1)][position]
        if dim == "vocab" and self.vocab_labels is not None:
            return self.vocab_labels([position])[0]
        if dim == "head":
            return f"head {position + 1}"
        return str(position)


def evaluate(expr: Expr | str, run: RunValues) -> Value:
    """The value of an expression on this run; ValueError (one sentence) when the run has no such step or cell."""
    if isinstance(expr, str):
        expr = parse_expression(expr)
    if expr.function == "":
        return run.named(expr.name)
    if expr.function == RESULT_FUNCTION:
        return run.result(expr.name)
    if expr.function in TOKEN_FUNCTIONS:
        return run.token(expr.function, expr.position)
    step = run.trace.find(expr.name)
    if step is None:
        raise ValueError(f"this run has no step named {expr.name!r}")
    shape = tuple(step.shape)
    if len(expr.index) != len(shape):
        raise ValueError(f"{expr.name} has {len(shape)} axes ({' × '.join(step.dims)}), but "
                         f"{len(expr.index)} indices were given")  # fmt: skip
    index: list[int | slice] = []
    for i, (entry, n, dim) in enumerate(zip(expr.index, shape, step.dims)):
        if entry is None:
            index.append(slice(None))
        elif -n <= entry < n:
            index.append(entry % n)
        else:
            raise ValueError(f"index {entry} of axis {i} ({dim}) of {expr.name} is out of range: it has {n}")
    key = (expr.name, tuple(None if isinstance(i, slice) else i for i in index))
    if key not in run.cache:
        run.cache[key] = step.tensor[tuple(index)].detach().to(torch.float64)
    part = run.cache[key]
    f = expr.function
    if f == "value":
        return Value(number=float(part), cell=tuple(index), step=expr.name)
    if f in ("argmax", "argmin"):
        axis = expr.index.index(None)
        finite = torch.where(torch.isnan(part), torch.tensor(-math.inf if f == "argmax" else math.inf,
                                                                  dtype=part.dtype), part)
        position = int(finite.argmax() if f == "argmax" else finite.argmin())
        dim = step.dims[axis]
        batch = index[0] if step.dims[0] == "batch" else 0
        cell = tuple(position if j == axis else e for j, e in enumerate(index))
        text = run.label(dim, batch, position) if dim in ("src_pos", "tgt_pos", "vocab", "head") else ""
        return Value(number=float(position), text=text, position=position, axis=dim, cell=cell, step=expr.name)
    if f == "count_neginf":
        return Value(number=float(torch.isneginf(part).sum()))
    if f == "count_zero":
        return Value(number=float((part == 0).sum()))
    finite = part[torch.isfinite(part)]
    if finite.numel() == 0:
        raise ValueError(f"{f}:{expr.name}[…] covers no finite number")
    number = {"max": finite.max, "min": finite.min, "sum": finite.sum, "mean": finite.mean}[f]()
    return Value(number=float(number))


def fill(text: str, run: RunValues, extra: dict[str, str] | None = None) -> str:
    """The text with every placeholder replaced by its value on this run ({{ }} are literal braces)."""
    extra = extra or {}

    def one(match: re.Match) -> str:
        inner = match.group(1)
        if inner.strip() in extra:
            return extra[inner.strip()]
        expr = parse_expression(inner)
        return evaluate(expr, run).shown(expr.decimals)

    out = _PLACEHOLDER.sub(one, text.replace("{{", "\x00").replace("}}", "\x01"))
    return out.replace("\x00", "{").replace("\x01", "}")
