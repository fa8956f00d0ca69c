"""The live page's engine (scratchformer/page/live/engine.js, live/bpe.js, live/run.js) against Python's
own run: in headless Chromium and Firefox (tests/scratchformer/page_browsers.py), on a small page holding the engine and
live_model's JSON under the page's Content-Security-Policy (tests/scratchformer/live_harness.py), every step of the
trace (name, kind, axes, shape, values), the tokens and the greedy translation are compared with `scratchformer.run` on
the same sentence, for every bundled model; plus the tokenizer on awkward text, bad input, the time a trace takes and
what live_refusal refuses. GPT-2's byte-level BPE and the models that read it (blog) are test_page_live_bpe.py's.

Values: float32 keeps about 7 significant digits, so a step with values in the hundreds (attention scores) differs
from Python's by up to a few 1e-4 whoever computes it; each step is held to 1e-4 × max(1, its largest value), which
is an absolute 1e-4 for steps within ±1 (attention weights, probabilities). The worst of both is printed."""

from __future__ import annotations

import json
import statistics
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import scratchformer as sf
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.page.live import model as live
from scratchformer.page.live.model import live_model, live_refusal
from scratchformer.page.packing import unpack_values
from scratchformer.running.generation import Continuation
from scratchformer.transformer.config import TransformerConfig
from tests.scratchformer.live_harness import MIXTURES, check_run, compare, mixture, page_cache, report_worst, show
from tests.scratchformer.page_browsers import browser_fixture

BUNDLED = ("en-hi", "copy", "reverse", "sort", "llama-tiny")
browser = browser_fixture(timeout=60, after=report_worst)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return page_cache(tmp_path_factory.mktemp("live"))


def js(b, call: str):
    return b.evaluate(f"sfDump({call})")


# --- the engine computes what Python computes -------------------------------------------------------------------


@pytest.mark.parametrize("source, target", [
    ("the girl eats an apple", None),
    ("The OLD man sees funny daughters!", None),  # capitals and punctuation
    ("the girl eats a pizza", None),  # an unknown word, and a greedy output that runs to its limit
    ("we are friends", "हम दोस्त हैं"),  # teacher forcing
    ("the <pad> girl eats", None),  # a typed pad token: masked in the encoder and the cross-attention
])  # fmt: skip
def test_en_hi_every_step_tokens_and_translation_match_python(browser, pages, source, target):
    show(browser, pages("en-hi"))
    check_run(browser, "en-hi", source, target)


@pytest.mark.parametrize("name, source", [("copy", "3 1 4 1 5 9 2 6"), ("reverse", "2 7 1 8 2 8"),
                                          ("sort", "3 1 4 1 5 9 2 6")])  # fmt: skip
def test_the_algorithmic_models_match_python(browser, pages, name, source):
    show(browser, pages(name))
    check_run(browser, name, source)


@pytest.mark.parametrize("text", ["3 1 4 1 5 9 2 6 <sep>", "2 7 <pad> 1 8 <sep>"])
def test_llama_tiny_rotary_grouped_query_decoder_matches_python(browser, pages, text):
    show(browser, pages("llama-tiny"))
    ours = check_run(browser, "llama-tiny", text)
    assert ours["decoder_input"] == "generated" and any(s["name"].endswith("k_rotated") for s in ours["steps"])


def test_from_arrays_takes_weights_unpacked_elsewhere_and_refuses_missing_ones(browser, pages):
    b = show(browser, pages("copy"))
    model = "JSON.parse(document.getElementById('sf-live-model').textContent)"
    same = b.evaluate(f"""(async () => {{
        const json = {model}, arrays = {{}};
        for (const [name, w] of Object.entries(json.weights)) arrays[name] = await sfLive.unpack(w.data, w.dtype);
        const a = sfLive.fromArrays(json, arrays).trace("3 1 4", null), b = engine.trace("3 1 4", null);
        return a.translation === b.translation
          && a.steps.every((s, i) => s.data.every((v, j) => Object.is(v, b.steps[i].data[j])));
    }})()""", await_promise=True)  # fmt: skip
    assert same is True
    said = b.evaluate(f"sfLive.fromArrays({model}, {{}})")
    assert said["error"].startswith("The page could not read its model: the weight ")


@pytest.mark.parametrize("label, source, target", [
    ("llama-like encoder-decoder", "the girl eats an apple", "लड़की सेब खाती है"),
    ("decoder-only", "लड़की सेब खाती है", ""),  # its continuation
])  # fmt: skip
def test_mixtures_of_the_switches_it_reads_match_python(browser, pages, label, source, target):
    bundle = mixture(**MIXTURES[label])
    assert live_refusal(bundle) is None
    show(browser, pages(f"mixture: {label}", bundle))
    inputs = bundle.prepare_run(source, target, continuation=Continuation())
    _, trace = bundle.run(inputs, keep_output=False)
    ours = js(browser, f"engine.trace({json.dumps(source)}, {json.dumps(target)})")
    compare(f"mixtures ({browser.engine})", trace, ours)
    assert ours["target_tokens"] == inputs.target_tokens[0]


# --- text the engine reads as the tokenizer does, and input it refuses in one sentence -----------------------------

AWKWARD = ["the <s> girl</s>x", "THE </S> girl", "pizza-time, ok?", "Ünïcode café", "the\u00a0girl\u0085eats\ufeffan",
           "a$b+c", "😀 girl", "don't", "ΣΑΣ", "\x1cthe girl\x1f", "İstanbul apple", "the\tgirl\neats",
           "«the» “girl” — eats…", "the girl<unk>eats", "e\u0301te the", "the\u200bgirl", "Straße apple!"]  # fmt: skip


def test_the_tokenizer_reads_awkward_text_as_python_does(browser, pages):
    bundle = load_model("en-hi", "cpu")
    show(browser, pages("en-hi"))
    target = browser.evaluate("engine.tokenize('लड़की, सेब खाती है।', 'tgt')")
    for text in AWKWARD:
        inputs = bundle.prepare(text, "लड़की, सेब खाती है।")
        ours = browser.evaluate(f"engine.tokenize({json.dumps(text)}, 'src')")
        assert ours["ids"] == inputs.src[0].tolist() and ours["tokens"] == inputs.source_tokens[0], text
        assert ours["unknown"] == inputs.unknown_words, text
        assert ours["notes"] + target["notes"] == inputs.notes, text  # what could not be kept, in Python's words
        assert target["ids"] == inputs.tgt[0].tolist() and target["unknown"] == inputs.unknown_target_words


def _python_error(bundle, source: str, target: str = "") -> str:
    with pytest.raises(UserError) as caught:
        bundle.prepare_run(source, target)
    return str(caught.value)


def test_bad_input_gives_one_sentence_never_an_exception(browser, pages):
    bundle = load_model("en-hi", "cpu")
    b = show(browser, pages("en-hi"))
    for source, target in [("", None), ("   \n", None), ("apple " * 1700, None), ("we", "है " * 40)]:
        ours = b.evaluate(f"engine.trace({json.dumps(source)}, {json.dumps(target)})")
        assert ours == {"error": _python_error(bundle, source, target or "")}
        if target is None:
            assert b.evaluate(f"engine.translate({json.dumps(source)})") == ours
    assert b.evaluate("engine.trace(null, null)") == {"error": "The source text is empty; type a sentence first."}
    assert list(b.evaluate("engine.tokenize('x', 'sideways')")) == ["error"]
    assert b.evaluate("engine.translate('we', {maxLen: 0})") == {
        "error": "The number of new tokens must be at least 1, not 0."
    }
    assert len(b.evaluate("engine.translate('the girl eats a pizza', {maxLen: 3})")["ids"]) == 3
    for text in ["😀😀 🙂", "a" * 10_000]:  # unknown words, one token each: a run, not an error
        ours = js(b, f"engine.trace({json.dumps(text)}, null)")
        assert ours["source_tokens"] == sf.run("en-hi", text).tokens["source"]
    assert not browser.console


def test_a_decoder_only_text_near_max_len_is_cut_with_python_s_note(browser, pages):
    bundle = load_model("llama-tiny", "cpu")
    b = show(browser, pages("llama-tiny"))
    near = "1 " * 250 + "<sep>"  # 251 tokens and the start token: 4 of max_len 256 left
    run = sf.run("llama-tiny", near)
    ours = js(b, f"engine.trace({json.dumps(near)}, null)")
    assert ours["notes"] == run.inputs.notes and "4 new tokens fit" in ours["notes"][0]
    compare(f"llama-tiny ({b.engine})", run.trace, ours)
    assert b.evaluate(f"engine.trace({json.dumps('1 ' * 300)}, null)") == {"error": _python_error(bundle, "1 " * 300)}


# --- speed and size ---------------------------------------------------------------------------------------------


def test_a_twelve_word_sentence_traces_and_translates_in_well_under_100_ms(browser, pages):
    b = show(browser, pages("en-hi"))
    source = "the old man sees the funny daughters and the girl eats apples"
    assert len(source.split()) == 12
    times = b.evaluate(f"""(() => {{
        const s = {json.dumps(source)}, trace = [], translate = [];
        for (let i = 0; i < 9; i++) {{
          let t = performance.now(); engine.trace(s, null); trace.push(performance.now() - t);
          t = performance.now(); engine.translate(s); translate.push(performance.now() - t);
        }}
        return {{trace, translate}};
    }})()""")
    trace, translate = statistics.median(times["trace"]), statistics.median(times["translate"])
    print(f"\nen-hi, 12 words in {b.engine}: trace (with its greedy translation) {trace:.1f} ms, translate alone "
          f"{translate:.1f} ms (medians of 9)")  # fmt: skip
    assert trace + translate < 100


def test_the_packed_en_hi_model_leaves_room_for_the_page():
    model = live_model(load_model("en-hi", "cpu"))
    size = len(json.dumps(model, ensure_ascii=False).encode("utf-8"))
    steps = len(json.dumps(model["steps"], ensure_ascii=False).encode("utf-8"))
    print(f"\nen-hi live model: {size / 1e6:.2f} MB of JSON (step titles {steps / 1e3:.0f} kB)")
    assert size <= 2_100_000


@pytest.mark.parametrize("name", BUNDLED)
def test_the_packed_weights_are_the_model_s_own_bit_for_bit(name):
    bundle = load_model(name, "cpu")
    model = live_model(bundle, steps=False)
    state = bundle.model.state_dict()
    for key, w in model["weights"].items():
        assert np.array_equal(unpack_values(w["data"], w["dtype"], tuple(w["shape"])), state[key].numpy()), key
    assert all(torch.equal(state[alias], state[key]) for alias, key in model["tied"].items())
    stored = {w["dtype"] for w in model["weights"].values()}
    assert stored == ({"f16"} if name in ("en-hi", "llama-tiny") else {"f32"})  # as each model.safetensors holds


@pytest.mark.parametrize("name", BUNDLED)
def test_the_step_list_it_carries_is_every_trace_s(name):
    run = sf.run(name, load_model(name, "cpu").examples()[-1].source)
    listed = live_model(run.bundle)["steps"]
    assert [(s["name"], s["kind"], tuple(s["dims"])) for s in listed] == [(s.name, s.kind, s.dims) for s in run.trace]
    assert all(s["title"] and s["formula"] and s["sublayer"] for s in listed)


@pytest.mark.parametrize("name", ("copy", "reverse", "sort"))
def test_float16_would_keep_the_float32_models_greedy_translations(name):
    """Whether a float32 model rounded to float16 keeps its greedy output (the page still carries them in float32:
    the values of every step would otherwise differ from Python's by more than the tolerance)."""
    bundle = load_model(name, "cpu")
    outputs = [bundle.prepare_run(e.source).generated for e in bundle.examples()]
    with torch.no_grad():
        for p in bundle.model.parameters():
            p.copy_(p.half().float())
    rounded = [bundle.prepare_run(e.source).generated for e in bundle.examples()]
    print(f"\n{name}: float16 weights keep the greedy output of {sum(a == b for a, b in zip(outputs, rounded))} of "
          f"{len(outputs)} examples")  # fmt: skip
    assert rounded == outputs


# --- what the page refuses --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUNDLED)
def test_the_bundled_models_run_live(name):
    assert live_refusal(load_model(name, "cpu")) is None


def _refused(**config) -> str:
    said = live_refusal(SimpleNamespace(config=TransformerConfig(**config), name="that model"))
    assert said is not None and said.startswith("The page cannot rerun that model in the browser: ")
    assert said.endswith(".") and ". " not in said and "\n" not in said  # one sentence
    return said


def test_gpt2_t5_and_bert_style_configs_are_refused_naming_the_part():
    gpt2 = dict(n_encoder_layers=0, activation="gelu_tanh", positional="learned", norm_first=True,
                final_layer_norm=True)  # fmt: skip
    assert "GELU (tanh approximation)" in _refused(**gpt2)
    assert "learned position embeddings" in _refused(**{**gpt2, "activation": "relu"})
    t5 = dict(relative_buckets=32, positional="none", norm="rmsnorm", linear_bias=False, scale_attention=False,
              norm_first=True, final_layer_norm=True, ffn_gated=True, activation="gelu")  # fmt: skip
    assert "relative position bias" in _refused(**t5)
    assert "encoder-only" in _refused(n_decoder_layers=0, activation="gelu", positional="learned")


LLAMA = dict(d_model=64, n_heads=4, n_kv_heads=2, d_ff=128, n_encoder_layers=0, n_decoder_layers=2, max_len=256,
             share_embeddings=False, activation="silu", positional="rotary", scale_embedding=False,
             final_layer_norm=True, norm_first=True, norm="rmsnorm", linear_bias=False, ffn_gated=True)  # fmt: skip


@pytest.mark.parametrize("change, named", [
    (dict(qk_norm="head"), "QK-norm"), (dict(sliding_window=4), "sliding window"),
    (dict(rope_scaling="linear", rope_factor=2.0), "linear scaling"), (dict(rotary_fraction=0.5), "part of each head"),
    (dict(parallel_residual=True), "parallel"), (dict(n_experts=4), "experts"), (dict(rmsnorm_plus_one=True), "1 + γ"),
    (dict(attn_softcap=50.0), "soft-caps"), (dict(post_norm=True), "sublayer's output"),
    (dict(attn_scale_dim=32.0), "√d_k"), (dict(activation="gelu"), "GELU"),
])  # fmt: skip
def test_each_modern_option_the_engine_lacks_is_refused(change, named):
    assert named in _refused(**{**LLAMA, **change})


def test_weights_over_the_budget_are_refused():
    big = mixture(d_model=512, d_ff=2048, n_heads=8)  # about 15 M float32 numbers: 60 MB
    said = live_refusal(big)
    assert said is not None and "MB" in said and f"{live.LIVE_BYTES / 1e6:.0f} MB" in said
