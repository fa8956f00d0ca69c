"""What `derive` writes out for people is arithmetic that holds: each "a = b" of an expression, read back as numbers,
gives the same value on both sides (up to the four significant figures the numbers are written with), the last
number is the recomputed value, and the terms add up or multiply out to it. Checked on every step of en-hi and of
each family's small model, so a wrong number in any rule's text fails here even when the value itself is right."""

import math
import random
import re

import pytest
import torch

from scratchformer.analyses import derive
from scratchformer.analyses.derive.result import num
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_derive import FAMILIES, SENTENCE, family_bundle

# Activations as torch defines them, for the "act(z) = …" part of a feed-forward unit.
ACTS = {
    "relu": lambda z: float(torch.relu(torch.tensor(z, dtype=torch.float64))),
    "gelu": lambda z: float(torch.nn.functional.gelu(torch.tensor(z, dtype=torch.float64))),
    "gelu_tanh": lambda z: float(torch.nn.functional.gelu(torch.tensor(z, dtype=torch.float64), approximate="tanh")),
    "silu": lambda z: float(torch.nn.functional.silu(torch.tensor(z, dtype=torch.float64))),
}
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")
# Kinds whose expression is arithmetic on numbers; the others map an index (a token, a table row, a head's column).
ARITHMETIC = {"embedding.scaled", "input", "output_scale", "qkv", "scores", "scaled_scores", "masked_scores",
              "attention_weights", "context", "projection", "residual", "layer_norm", "ffn_hidden", "ffn_gate",
              "ffn_out", "logits", "probabilities", "positional_encoding.sinusoid"}  # fmt: skip


def as_python(segment: str) -> str:
    """The written math as Python: − → -, · → *, √n → sqrt(n), ^ → **, 'N smaller terms (s)' → (s)."""
    s = segment.replace("−", "-").replace("·", "*").replace("^", "**").replace("∞", "inf")
    s = re.sub(r"\d+ smaller terms \(([^()]*)\)", r"(\1)", s)
    s = s.replace("√(", "sqrt(")
    return re.sub(r"√(\d+)", r"sqrt(\1)", s)


def evaluate(segment: str, act, jitter: float = 0.0, rng: random.Random | None = None) -> float | None:
    """The segment's value, or None when it is not plain arithmetic (a name such as q_1, an index E[3, 4], '2 more').
    With `jitter`, every written number is moved by up to that fraction, to see how much rounding can matter."""
    text = as_python(segment)
    if jitter:
        text = NUMBER.sub(lambda m: f"({m.group()}*{1 + rng.uniform(-jitter, jitter)!r})", text)
    names = {"sqrt": math.sqrt, "exp": math.exp, "sin": math.sin, "cos": math.cos, "inf": math.inf, "act": act}
    try:
        return float(eval(compile(text, "<expression>", "eval"), {"__builtins__": {}}, names))  # noqa: S307
    except (SyntaxError, NameError, TypeError, ZeroDivisionError):
        return None


def agree(left: str, right: str, act) -> bool | None:
    """Whether two sides of '=' have one value, allowing for the rounding to four significant figures."""
    a, b = evaluate(left, act), evaluate(right, act)
    if a is None or b is None:
        return None
    if math.isinf(a) or math.isinf(b):
        return a == b
    rng = random.Random(0)  # how far the rounding (≤ 5e-4 of each written number) can move either side
    sides = ((left, a), (right, b))
    spread = max(abs(evaluate(side, act, 6e-4, rng) - value) for _ in range(12) for side, value in sides)
    return abs(a - b) <= 3 * spread + 1e-12


def kind_of(step) -> str:
    if step.kind == "embedding":
        return "embedding.scaled" if step.name.endswith(".scaled") else "embedding.lookup"
    return step.kind


def check_arithmetic(bundle, trace, d, step):
    act = ACTS[getattr(bundle.model.get_submodule(step.sublayer), "activation_name", "relu")] \
        if step.kind in ("ffn_hidden", "ffn_gate") else None
    checked = 0
    for clause in d.expression.split(";"):
        sides = clause.strip().split(" = ")
        for left, right in zip(sides, sides[1:]):
            ok = agree(left, right, act)
            assert ok is not False, f"{step.name}{list(d.index)}: {left!r} ≠ {right!r} in {d.expression!r}"
            checked += ok is not None
    return checked


def runs():
    bundle = load_model("en-hi")
    yield "en-hi", bundle, bundle.run(bundle.prepare(*SENTENCE))[1]
    for name in sorted(FAMILIES):
        family = family_bundle(bundle, FAMILIES[name])
        yield name, family, family.run(family.prepare(*SENTENCE))[1]


@pytest.fixture(scope="module")
def traced():
    return list(runs())


def test_every_written_expression_is_arithmetic_that_holds(traced):
    rng = random.Random(1)
    seen = set()
    for name, bundle, trace in traced:
        divides = bundle.config.scale_attention  # T5 does not divide its scores by √d_k
        for step in trace:
            kind = kind_of(step)
            for index in [tuple(rng.randrange(n) for n in step.shape) for _ in range(2)]:
                d = derive.compute(bundle, trace, step.name, index)
                checked = check_arithmetic(bundle, trace, d, step)
                if kind == "positional_encoding":
                    sinusoid = bundle.config.positional.startswith("sinusoidal")  # the paper's, or Marian's halves
                    kind = "positional_encoding.sinusoid" if sinusoid else kind
                if kind in ARITHMETIC and not (kind == "scaled_scores" and not divides):
                    assert checked >= 1, f"{name} {step.name}{list(index)}: nothing to check in {d.expression!r}"
                    assert d.expression.endswith(f"= {num(d.recomputed)}"), (name, step.name, d.expression)
                    seen.add(kind)
    assert seen == ARITHMETIC  # every arithmetic rule was read back at least once


def test_a_sum_of_products_writes_its_largest_products_and_the_rest(traced):
    """A projection, a score, a weighted sum or a logit lists up to six products, largest first, and one term for
    the rest; the terms add up to the value, and each written product is the product of the two inputs it names."""
    _, bundle, trace = traced[0]
    for name, index in [("encoder.0.self_attn.qkv", (0, 2, 40)), ("decoder.1.cross_attn.scores", (0, 3, 1, 4)),
                        ("decoder.0.self_attn.context", (0, 1, 2, 5)), ("generator.logits", (0, 1, 7)),
                        ("encoder.1.ffn.out", (0, 3, 9))]:  # fmt: skip
        d = derive.compute(bundle, trace, name, index)
        assert sum(t.value for t in d.terms) == pytest.approx(d.recomputed, rel=1e-9, abs=1e-12)
        products = [t for t in d.terms if "·" in t.label]
        sizes = [abs(t.value) for t in products]
        assert sizes == sorted(sizes, reverse=True)
        assert len(products) == 6 if "smaller terms" in d.expression else len(products) <= 6
        written = d.expression.split(" = ")[-2].split(" + ")
        for term, text in zip(products, written):
            a, b = (evaluate(f, None) for f in as_python(text).split("*"))
            assert a * b == pytest.approx(term.value, rel=2e-3, abs=1e-9), (name, term.label, text)


def test_head_split_and_concat_name_the_column_they_copy(traced):
    _, bundle, trace = traced[0]
    d_head = trace["encoder.0.self_attn.q"].shape[-1]
    for part, offset in (("q", 0), ("k", 128), ("v", 256)):
        d = derive.compute(bundle, trace, f"encoder.1.self_attn.{part}", (0, 2, 3, 5))
        col = offset + 2 * d_head + 5
        assert d.expression == f"{part}[2, 3, 5] = qkv[3, {offset} + 2·{d_head} + 5 = {col}] = {num(d.value)}"
        assert ("part·d_model + " in d.formula) == (part != "q")  # q's columns start at 0
        assert d.inputs[0].step == "encoder.1.self_attn.qkv" and d.inputs[0].index == (0, 3, col)
        assert f"head 3 owns columns {offset + 2 * d_head}–{offset + 3 * d_head - 1}" in d.note
    d = derive.compute(bundle, trace, "decoder.0.cross_attn.v", (0, 1, 2, 3))
    assert f"kv_proj[2, 128 + 1·{d_head} + 3 = {128 + d_head + 3}]" in d.expression
    d = derive.compute(bundle, trace, "encoder.0.self_attn.concat", (0, 4, 2 * d_head + 7))
    assert d.expression == f"Concat[4, {2 * d_head + 7}] = head 3[4, 7] = {num(d.value)}"
    assert d.inputs[0].index == (0, 2, 4, 7)


def test_dropout_in_a_training_run_is_zero_or_the_input_over_one_minus_p(traced):
    """Only a training-mode trace has dropout steps: each cell is 0 (dropped) or its input ÷ (1 − p) (kept)."""
    _, bundle, _ = traced[0]
    model = family_bundle(bundle, {"dropout": 0.25})
    model.model.train()
    torch.manual_seed(0)
    _, trace = model.run(model.prepare(*SENTENCE))
    steps = [s for s in trace if s.kind == "dropout"]
    assert [s.name for s in steps[:2]] == ["src_embed.dropout", "encoder.0.add_norm1.dropout"]
    outcomes = set()
    for step in steps:
        before = trace.steps[step.index - 1].tensor[0].double()
        after = step.tensor[0].double()
        for index in [(0, p, u) for p in range(2) for u in range(0, after.shape[-1], 5)]:
            d = derive.compute(model, trace, step.name, index)
            x, y = float(before[index[1:]]), float(after[index[1:]])
            assert d.agrees() and d.inputs[0].step == trace.steps[step.index - 1].name
            if y == 0:
                assert d.recomputed == 0 and d.expression == "dropped → 0" and d.note.endswith("to drop it.")
            else:
                assert d.recomputed == pytest.approx(x / 0.75, rel=1e-12)
                assert d.expression.startswith("kept: ") and d.note.endswith("to keep it.")
                assert agree(*d.expression.removeprefix("kept: ").split(" = "), None)
            outcomes.add(y == 0)
    assert outcomes == {True, False}  # both cases were seen
