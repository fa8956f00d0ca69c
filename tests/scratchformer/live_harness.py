"""The live page's engine on a small page of its own, for the tests that hold it against Python
(test_page_live_engine.py, test_page_live_bpe.py, test_page_live_explain.py, test_page_live_derive.py).

`harness` writes the page: the page's Content-Security-Policy (viewer.html's), live_model's JSON (and any other JSON
a plug-in reads, each in a <script type="application/json"> element with "</" written "<\\/"), the engine's scripts
and the plug-ins' named, the helpers the tests read values with (`sfBytes`, `sfDump`, `sfValues`) and, last, the
setup, by default LOAD: the engine loaded as `window.engine`, then <body data-ready> "1" or "error: …". `show` opens
such a page in a browser made by page_browsers.browser_fixture (once: the page stays open for the next test that
wants it); `page_cache` makes each model's page once a module. `check_run` compares the engine's trace of a sentence,
its tokens and greedy output with `scratchformer.run`'s (every step within TOLERANCE × max(1, its largest value));
`mixture` is en-hi's tokenizers on a seeded random model of another architecture, MIXTURES two of them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import scratchformer as sf
import scratchformer.page
from scratchformer.loading.bundle import load_model
from scratchformer.loading.model_bundle import ModelBundle
from scratchformer.page.live.model import live_model
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.model import Transformer

PAGE = Path(scratchformer.page.__file__).parent  # the viewer's files: viewer_unpack.js, live/*.js
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"  # viewer.html's
ENGINE_SCRIPTS = ("viewer_unpack.js", "live/engine.js", "live/bpe.js", "live/run.js",
                  "live/format.js")
TOLERANCE = 1e-4
HARNESS = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}"></head>
<body>
{data}
<script>
{scripts}
{helpers}
{setup}
</script>
</body></html>
"""
# a typed array as base64 of its bytes (the driver need not carry 100 000 numbers one by one)
SF_BYTES = """function sfBytes(a) {
  const u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  let s = "";
  for (let i = 0; i < u.length; i += 8192) s += String.fromCharCode.apply(null, u.subarray(i, i + 8192));
  return btoa(s);
}"""
HELPERS = SF_BYTES + """
window.sfDump = (t) => t.error ? t : Object.assign({}, t, {steps: t.steps.map((s) =>
  ({name: s.name, kind: s.kind, dims: [...s.dims], shape: [...s.shape], data: sfBytes(s.data)}))});
window.sfValues = (run) => run.steps.map((s) => sfBytes(Float32Array.from(s.data)));"""
LOAD = """sfLive.load(JSON.parse(document.getElementById("sf-live-model").textContent)).then((e) => {
  window.engine = e;
  document.body.dataset.ready = e.error ? "error: " + e.error : "1";
});"""
# config changes from en-hi: seeded random models mixing the switches the engine reads
MIXTURES = {
    "llama-like encoder-decoder": dict(norm_first=True, final_layer_norm=True, norm="rmsnorm", activation="silu",
                                       ffn_gated=True, n_kv_heads=2, linear_bias=False, tie_output=False,
                                       scale_embedding=False),
    "decoder-only": dict(n_encoder_layers=0),  # post-LN, sinusoids: its continuation
}  # fmt: skip
# model (engine) → [worst absolute difference, worst difference / step scale, worst on attention weights and
# probabilities], as check_run and compare find them
WORST: dict[str, list[float]] = {}


def json_text(data) -> str:
    """JSON to sit in a <script> element ("</" written "<\\/" so it cannot end the element; no NaN: JSON.parse
    would refuse it)."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")


def harness(bundle, path: Path, scripts: tuple[str, ...] = (), data: dict | None = None, setup: str = LOAD) -> Path:
    """The page of `bundle`'s engine, with the plug-ins' `scripts` (file names in scratchformer/page) after the
    engine's, `data` (element id → what it holds as JSON) after the model's, and `setup` last."""
    elements = {"sf-live-model": live_model(bundle, steps=False), **(data or {})}
    data_text = "\n".join(f'<script type="application/json" id="{k}">{json_text(v)}</script>'
                           for k, v in elements.items())  # fmt: skip
    code = "\n".join((PAGE / s).read_text(encoding="utf-8") for s in ENGINE_SCRIPTS + scripts)
    text = HARNESS.format(csp=CSP, data=data_text, scripts=code, helpers=HELPERS, setup=setup)
    path.write_text(text, encoding="utf-8")
    return path


def page_cache(folder: Path, make: Callable[..., Path] = harness) -> Callable[..., Path]:
    """`page(name, bundle=None)`: the page `make(bundle, path)` writes for the model `name` (the bundled model of
    that name unless `bundle` is given), made once in `folder`."""
    made: dict[str, Path] = {}

    def page(name: str, bundle=None) -> Path:
        if name not in made:
            made[name] = make(bundle or load_model(name, "cpu"), folder / f"{name}.html")
        return made[name]

    return page


def show(b, page: Path):
    """The browser showing `page` with its engine loaded (opened only when another page was shown)."""
    if b.shown != page:
        b.open(page)
        b.wait_for("document.body.dataset.ready", timeout=60)
        assert b.evaluate("document.body.dataset.ready") == "1"
        b.shown = page
    return b


def floats(data: str, shape) -> np.ndarray:
    """sfBytes' base64 of float32 values, as an array of that shape."""
    return np.frombuffer(base64.b64decode(data), "<f4").reshape(shape)


def mixture(**changes) -> ModelBundle:
    """en-hi's tokenizers on a seeded random model of another architecture."""
    base = load_model("en-hi", "cpu")
    config = TransformerConfig(**{**base.config.to_dict(), "name": "mixture", **changes})
    torch.manual_seed(0)
    return ModelBundle(Transformer(config).eval(), base.src_tokenizer, base.tgt_tokenizer, "mixture", "test")


def compare(name: str, trace, ours: dict) -> None:
    """Every step of the engine's trace against Python's: order, name, kind, axes, shape, −∞ cells, values."""
    assert "error" not in ours, ours
    assert [s["name"] for s in ours["steps"]] == [s.name for s in trace]
    worst = WORST.setdefault(name, [0.0, 0.0, 0.0])
    for mine, step in zip(ours["steps"], trace):
        assert (mine["kind"], tuple(mine["dims"]), tuple(mine["shape"])) == (step.kind, step.dims, tuple(step.shape))
        a = floats(mine["data"], mine["shape"])
        b = step.tensor.float().numpy()
        assert np.array_equal(np.isneginf(a), np.isneginf(b)), step.name  # masked cells, exactly
        finite = np.isfinite(b)
        assert np.isfinite(a).sum() == finite.sum(), step.name
        if not finite.any():
            continue
        diff = float(np.abs(a[finite] - b[finite]).max())
        scaled = diff / max(1.0, float(np.abs(b[finite]).max()))
        worst[0], worst[1] = max(worst[0], diff), max(worst[1], scaled)
        if step.kind in ("attention_weights", "probabilities"):
            worst[2] = max(worst[2], diff)
        assert scaled <= TOLERANCE, f"{step.name}: differs by {diff:.3g}"


def check_run(b, name: str, source: str, target: str | None = None) -> dict:
    """The engine's run of a sentence against `scratchformer.run`'s: every step, the tokens, the decoder input,
    the unknown words and notes, and (with no target) the greedy output of translate() alone."""
    run = sf.run(name, source, target)
    ours = b.evaluate(f"sfDump(engine.trace({json.dumps(source)}, {json.dumps(target)}))")
    compare(f"{name} ({b.engine})", run.trace, ours)
    assert ours["source_tokens"] == run.tokens["source"] and ours["target_tokens"] == run.tokens["target"]
    assert ours["translation"] == run.translation and ours["decoder_input"] == run.inputs.decoder_input
    assert ours["unknown"] == run.inputs.unknown_words
    assert ours["unknown_target"] == run.inputs.unknown_target_words and ours["notes"] == run.inputs.notes
    if not target:  # the greedy output alone, as translate() gives it, is the same token for token
        alone = b.evaluate(f"engine.translate({json.dumps(source)})")
        assert alone["ids"] == run.inputs.generated and alone["text"] == run.translation
    return ours


def report_worst(engine: str) -> None:
    """Prints (and forgets) the worst differences compare() met in that engine."""
    mine = {name: WORST.pop(name) for name in list(WORST) if name.endswith(f"({engine})")}
    if mine:
        print(f"\nlive engine vs Python in {engine}, worst difference per model: absolute, relative to the step's "
              "largest value, absolute on attention weights and probabilities")  # fmt: skip
        for name, (absolute, scaled, unit) in mine.items():
            print(f"  {name:<24} {absolute:.2e}  {scaled:.2e}  {unit:.2e}")
