"""The live page's derivations and logit lens (scratchformer/page/live/derive*.js, with page/live/derive.py's
derive_context) against Python's: in headless Chromium and Firefox (page_browsers.py), a harness page (live_harness.py)
holds the live engine, live_model's JSON and derive_context's; the engine traces a sentence, and a sample of cells of
every step (the corners, the largest value, one more, on every head of a step with heads; every key of the last query of
an attention map) is derived in the browser and by `derivations.compact(derive.compute(…))`, the lens by data._lens.
Models: en-hi (a typed target; a padding token), llama-tiny, copy, blog (GPT-2's byte-level tokens: pieces such as
"Ġlove" looked up, labels such as " love"), and two seeded random mixtures of the switches the engine reads (pre-norm
RMSNorm encoder-decoder with gated SiLU, grouped-query attention and a final norm; a post-LN decoder alone).

Texts are compared exactly against Python deriving the very numbers the browser derived (Python's trace of the same
sentence with each step's values replaced by the engine's): the engine's float32 values differ from torch's in the
last digits, which a four-digit text may show. Numbers are compared against Python's own run, within 1e-4 × the
size of the number (as test_page_live_engine.py holds the steps), and formulas, term labels and the inputs read
exactly there too. The time one derivation and one lens take in the browser is printed and bounded."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
import torch

from scratchformer.analyses import derive
from scratchformer.loading.bundle import load_model
from scratchformer.page.data import _lens
from scratchformer.page.derivations import compact
from scratchformer.page.live.derive import derive_context
from scratchformer.page.live.model import live_model, live_refusal
from scratchformer.plotdata.cells import shown_axes
from scratchformer.plotdata.heatmap import VOCAB_COLUMNS, top_columns
from scratchformer.running.generation import Continuation
from tests.scratchformer import live_harness
from tests.scratchformer.live_harness import MIXTURES, TOLERANCE, floats, mixture, show
from tests.scratchformer.page_browsers import browser_fixture

SCRIPTS = ("live/derive_kit.js", "live/derive_rules.js", "live/derive.js")
# the engine made from the weights the plug-in unpacks, and the plug-in's context as `ctx`
SETUP = """(async () => {
  const model = JSON.parse(document.getElementById("sf-live-model").textContent);
  const arrays = await sfLiveDerive.unpackWeights(model);
  window.engine = sfLive.fromArrays(model, arrays);
  window.ctx = sfLiveDerive.context(model, JSON.parse(document.getElementById("sf-derive-context").textContent),
                                    arrays);
  const bad = window.engine.error || window.ctx.error;
  document.body.dataset.ready = bad ? "error: " + bad : "1";
})();"""
RUNS = [("en-hi", "the girl eats an apple", None),
        ("en-hi", "the old man sees funny daughters", "लड़की सेब खाती है"),
        ("en-hi", "the girl <pad> eats an apple", None),  # a padding key: −∞ in every attention's mask
        ("llama-tiny", "3 1 4 1 5 9 2 6 <sep>", None),
        ("llama-tiny", "2 7 1 8 <sep> 8 1", ""),
        ("copy", "3 1 4 1 5", None),
        ("blog", "I love cats, don't you?", None),
        ("blog", "Hello, world!", "Bonjour"),
        ("llama-like encoder-decoder", "the girl eats an apple", "लड़की सेब खाती है"),  # live_harness.MIXTURES
        ("decoder-only", "लड़की सेब खाती है", "")]  # fmt: skip
ATTENTION_MAPS = ("mask", "masked_scores", "attention_weights")  # every key of the first query is derived
TIMES: dict[str, dict[str, float]] = {}  # engine → what was timed → ms


@pytest.fixture(scope="module")
def bundles():
    made = {name: load_model(name, "cpu") for name in ("en-hi", "llama-tiny", "copy", "blog")}
    made.update({name: mixture(**changes) for name, changes in MIXTURES.items()})
    assert all(live_refusal(b) is None for b in made.values())
    return made


@pytest.fixture(scope="module")
def pages(bundles, tmp_path_factory):
    folder = tmp_path_factory.mktemp("live_derive")
    return {name: live_harness.harness(bundle, folder / f"{name}.html", SCRIPTS,
                                       {"sf-derive-context": derive_context(bundle)}, SETUP)
            for name, bundle in bundles.items()}  # fmt: skip


def report_times(engine: str) -> None:
    if engine in TIMES:
        timed = ", ".join(f"{what} {ms:.2f} ms" for what, ms in TIMES[engine].items())
        print(f"\nlive derivations in {engine}: {timed}")


browser = browser_fixture(timeout=60, after=report_times)


def ev(b, expression: str):
    """A JavaScript expression's value, passed as JSON (Firefox's driver writes a shared object as a reference)."""
    return json.loads(b.evaluate(f"JSON.stringify({expression})"))


def python_trace(bundle, source: str, target: str | None):
    inputs = bundle.prepare_run(source, target or "", False, continuation=Continuation())
    return bundle.run(inputs, keep_output=False)[1]


def live_run(b, source: str, target: str | None):
    """Traces the sentence in the browser (kept as window.run); its steps' values as numpy arrays."""
    b.evaluate(f"window.run = engine.trace({json.dumps(source)}, {json.dumps(target)}); 0")
    assert b.evaluate("window.run.error || ''") == ""
    shapes = ev(b, "window.run.steps.map((s) => s.shape)")
    return [floats(v, s) for v, s in zip(ev(b, "sfValues(window.run)"), shapes)]


def with_values(trace, values):
    """The trace with each step's values replaced by the engine's (token ids kept as Python's integers)."""
    for step, v in zip(trace, values):
        if step.kind != "tokens":
            step.tensor = torch.from_numpy(v.copy())
    return trace


def map_shape(step) -> tuple[int, int, int]:
    """(heads, rows, columns) of the step's map for batch item 0 (a vocabulary cut to its chosen columns)."""
    axes = shown_axes(step)
    sizes = [step.shape[i] if step.dims[i] != "vocab" else min(step.shape[i], VOCAB_COLUMNS) for i in axes]
    heads = step.n_heads
    return (heads, 1, sizes[0]) if len(sizes) == 1 else (heads, sizes[0], sizes[1])


def vocab_ids(step) -> list[int] | None:
    if "vocab" not in step.dims:
        return None
    return [int(i) for i in top_columns(step.item(0).float().numpy(), VOCAB_COLUMNS)[1]]


def sample_cells(step, ids) -> list[tuple[int, int, int]]:
    """The corners, the largest value and one cell inside of each head's map (every head of a step with heads)."""
    heads, rows, cols = map_shape(step)
    item = step.item(0).float().numpy()
    if ids is not None:
        item = item[..., ids]
    cells = set()
    for h in range(heads):
        values = item[h] if step.head_dim is not None else item  # (heads, rows, cols) → one head's map
        values = values.reshape(rows, cols)
        finite = np.where(np.isfinite(values), values, -np.inf)
        top = np.unravel_index(int(np.argmax(finite)), (rows, cols))
        cells |= {(h, 0, 0), (h, 0, cols - 1), (h, rows - 1, 0), (h, rows - 1, cols - 1),
                  (h, int(top[0]), int(top[1])), (h, rows // 2, (cols * 2) // 3)}  # fmt: skip
        if step.kind in ATTENTION_MAPS:
            cells |= {(h, rows - 1, c) for c in range(cols)}
    return sorted(cells)


def python_cells(bundle, trace, step, cells, ids) -> list[dict]:
    from scratchformer.plotdata.cells import cell_index

    return [compact(derive.compute(bundle, trace, step.name, cell_index(step, 0, h, r, c, ids)), trace)
            for h, r, c in cells]  # fmt: skip


def browser_cells(b, step_index: int, cells, ids) -> list[dict]:
    return ev(b, f"{json.dumps(cells)}.map(([h, r, c]) => sfLiveDerive.derive(window.run, {step_index}, h, r, "
                      f"c, window.ctx, {json.dumps(ids)}))")  # fmt: skip


def close(a, b, what: str) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b, what
        return
    assert math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE), f"{what}: {a} vs {b}"


def same_numbers(mine: dict, theirs: dict, what: str) -> None:
    """Values within the tolerance, texts that hold no number of this cell exactly."""
    assert "error" not in mine, f"{what}: {mine}"
    close(mine["v"], theirs["v"], f"{what} value")
    close(mine["r"], theirs["r"], f"{what} recomputed")
    assert mine["f"] == theirs["f"], what
    assert len(mine["t"]) == len(theirs["t"]), what
    others = dict(theirs["t"])  # a long sum's largest terms: two nearly equal ones may come in either order
    for label, x in mine["t"]:
        if label in others:
            close(x, others[label], f"{what} term {label}")
    assert (mine["in"], mine["p"], mine["u"]) == (theirs["in"], theirs["p"], theirs["u"]), what


def same_texts(mine: dict, theirs: dict, what: str) -> None:
    """Everything alike when both derive the same numbers: texts exactly, numbers to float32's digits."""
    assert "error" not in mine, f"{what}: {mine}"
    for key in ("f", "e", "n", "in", "p", "u", "ok"):
        assert mine[key] == theirs[key], f"{what} [{key}]:\n  browser {mine[key]!r}\n  python  {theirs[key]!r}"
    assert [t[0] for t in mine["t"]] == [t[0] for t in theirs["t"]], what
    for key in ("v", "r"):
        close(mine[key], theirs[key], f"{what} {key}")
    for (label, x), (_, y) in zip(mine["t"], theirs["t"]):
        close(x, y, f"{what} term {label}")


@pytest.mark.parametrize(("name", "source", "target"), RUNS)
def test_every_step_s_cells_derive_as_python_derives_them(browser, bundles, pages, name, source, target):
    bundle, b = bundles[name], show(browser, pages[name])
    values = live_run(b, source, target)
    own, same = python_trace(bundle, source, target), with_values(python_trace(bundle, source, target), values)
    assert [s.name for s in own] == ev(b, "window.run.steps.map((s) => s.name)")
    kinds = {}
    for step in own:
        ids = vocab_ids(step)
        cells = sample_cells(step, ids)
        mine = browser_cells(b, step.index, cells, ids)
        for cell, m, theirs, exact in zip(cells, mine, python_cells(bundle, own, step, cells, ids),
                                          python_cells(bundle, same, same[step.name], cells, ids)):  # fmt: skip
            what = f"{step.name} {cell}"
            same_numbers(m, theirs, what)
            same_texts(m, exact, what)
            assert m["ok"], what
        kinds[step.kind] = kinds.get(step.kind, 0) + len(cells)
    expected = {"tokens", "embedding", "positional_encoding", "input", "qkv", "heads", "scores", "scaled_scores",
                "mask", "masked_scores", "attention_weights", "context", "concat", "projection", "residual",
                "layer_norm", "ffn_hidden", "ffn_out", "logits", "probabilities"}  # fmt: skip
    if bundle.config.positional == "rotary":
        expected |= {"rotary"}
    if bundle.config.ffn_gated:
        expected |= {"ffn_gate"}
    assert set(kinds) == expected


@pytest.mark.parametrize(("name", "source", "target"), RUNS)
def test_the_lens_reads_as_python_s(browser, bundles, pages, name, source, target):
    bundle, b = bundles[name], show(browser, pages[name])
    live_run(b, source, target)
    mine = ev(b, "sfLiveDerive.lens(window.run, 0, window.ctx)")
    theirs = _lens(bundle, python_trace(bundle, source, target), [0])["items"]["0"]
    assert "error" not in mine, mine
    for key in ("stack", "labels", "steps", "positions", "emitted", "notes"):
        assert mine[key] == theirs[key], key
    for i, (points, others) in enumerate(zip(mine["top"], theirs["top"])):
        for j, (ours, python) in enumerate(zip(points, others)):
            for (tok, p), (tok2, p2) in zip(ours, python):
                close(p, p2, f"point {i} position {j} {tok}")
                tied = abs(p - p2) < TOLERANCE and any(abs(p - q) < TOLERANCE for t, q in python if t == tok)
                assert tok == tok2 or tied, f"point {i} position {j}: {tok} vs {tok2}"  # ties in either order
    for i, (points, others) in enumerate(zip(mine["final"], theirs["final"])):
        for j, ((p, rank), (p2, rank2)) in enumerate(zip(points, others)):
            close(p, p2, f"final point {i} position {j}")
            assert rank == rank2 or abs(p - p2) < TOLERANCE, f"rank at point {i} position {j}"


def test_bad_calls_answer_one_sentence(browser, pages):
    b = show(browser, pages["en-hi"])
    live_run(b, "the girl eats an apple", None)
    for call, says in (("sfLiveDerive.derive(window.run, 999, 0, 0, 0, window.ctx)", "This run has no step 999."),
                       ("sfLiveDerive.derive(window.run, 13, 0, 0, 99, window.ctx)", "out of range"),
                       ("sfLiveDerive.derive(null, 13, 0, 0, 0, window.ctx)", "no live run"),
                       ("sfLiveDerive.derive(window.run, 13, 0, 0, 0, {error: 'nope.'})", "nope."),
                       ("sfLiveDerive.lens(window.run, 3, window.ctx)", "one batch item"),
                       ("sfLiveDerive.context('{', {}, {})", "could not read")):  # fmt: skip
        answer = ev(b, call)
        assert set(answer) == {"error"} and says in answer["error"], (call, answer)


def test_a_derivation_and_the_lens_take_milliseconds(browser, pages):
    """en-hi: one derivation's time (the median over the steps, and the slowest step's) and the lens's."""
    b = show(browser, pages["en-hi"])
    live_run(b, "the thirsty teacher washes the clean car", None)
    timing = """(() => {
      const per = [], lens = [];
      for (let i = 0; i < window.run.steps.length; i++) {
        const s = performance.now();  // 24 cells at a time: a clock may tick in 0.1 ms steps
        for (let k = 0; k < 24; k++) {
          const d = sfLiveDerive.derive(window.run, i, 0, k % 2, k % 3, window.ctx, [0, 1, 2, 3, 4, 5, 6, 7]);
          if (d.error) throw new Error(d.error);
        }
        per.push((performance.now() - s) / 24);
      }
      for (let k = 0; k < 9; k++) { const s = performance.now(); sfLiveDerive.lens(window.run, 0, window.ctx);
        lens.push(performance.now() - s); }
      return {per, lens: lens.sort((a, b) => a - b)[4]};
    })()"""
    times = ev(b, timing)
    typical, slowest = statistics.median(times["per"]), max(times["per"])
    TIMES[browser.engine] = {"a derivation (median over steps)": typical, "the slowest step's": slowest,
                             "the lens": times["lens"]}  # fmt: skip
    assert typical <= 10 and slowest <= 50, times
    assert times["lens"] <= 100, times


def test_numbers_are_written_as_python_writes_them(browser, pages):
    """result.num's four significant figures: exact ties rounded half to even as Python rounds them (0.015625 →
    0.01562, 1234.5 → 1234), the exponent form past 1e4 and below 1e-4, −∞, NaN and "−"."""
    from scratchformer.analyses.derive.result import num, paren

    b = show(browser, pages["en-hi"])
    values = [0.015625, -0.015625, 2.5625, 1234.5, 1235.5, 9999.5, 99995.0, 0.00015625, 1.5625e-4, 1e-5, 12345.0,
              1e20, -3.14159, 123.45, 0.5, 100.0, 0.0001, 0.00012345, 1 / 3, -2 / 3, 5e-324, 1.7976931348623157e308,
              0.1 + 0.2, 4.0, -0.0, 7.0625, 6.5e-5]  # fmt: skip
    rng = np.random.default_rng(0)
    values += [float(x) for x in rng.standard_normal(200) * 10.0 ** rng.integers(-8, 8, 200)]
    values += [float(np.float16(x)) for x in rng.standard_normal(200)]  # float16 weights: many exact ties
    mine = ev(b, f"{json.dumps(values)}.map((x) => [sfDeriveKit.num(x), sfDeriveKit.paren(x)])")
    assert mine == [[num(x), paren(x)] for x in values]
    specials = ev(b, "[-Infinity, Infinity, NaN].map(sfDeriveKit.num)")
    assert specials == [num(float("-inf")), num(float("inf")), num(float("nan"))]


@pytest.mark.parametrize("name", ["en-hi", "copy", "reverse", "sort", "llama-tiny"])
def test_derive_context_plans_every_step_from_earlier_steps(name):
    """No browser: every step of a bundled live model has a rule, the plans follow live_model's step list, each
    reads only steps before its own, names parameters the model has, and the whole is JSON."""
    bundle = load_model(name, "cpu")
    context = json.loads(json.dumps(derive_context(bundle), ensure_ascii=False))
    steps = live_model(bundle)["steps"]
    assert [p["name"] for p in context["steps"]] == [s["name"] for s in steps]
    params = bundle.model.state_dict()
    reads = ("tokens", "lookup", "first", "pe", "x", "source", "q", "k", "scores", "scaled", "mask", "masked",
             "weights", "v", "context", "concat", "before", "sub", "z", "gate", "linear", "hidden",
             "logits")  # fmt: skip
    for i, plan in enumerate(context["steps"]):
        assert plan["rule"] is not None, plan["name"]
        assert all(plan[k] < i for k in reads if k in plan), plan
        assert all(plan[k] in params for k in ("param", "weight", "bias", "gamma", "beta") if plan.get(k)), plan
        assert "formula" in plan or plan["rule"] == "rotary", plan
    lens = context["lens"]
    assert lens["steps"][0] < lens["steps"][-1] and len(lens["labels"]) == len(lens["steps"])
    assert ("omega" in context) == (bundle.config.positional == "rotary")
