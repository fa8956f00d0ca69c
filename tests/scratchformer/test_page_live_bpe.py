"""GPT-2's byte-level BPE in the live page (scratchformer/page/live/bpe.js, with live/model.py's _byte_level) against
Hugging Face's, and the models that read it: in headless Chromium and Firefox (page_browsers.py), on the engine's
harness page (live_harness.py).

- the tokenizer reads awkward text (white space of every kind and place, contractions, digits, emoji, CJK,
  Devanagari, Arabic and Hebrew, combining marks, added tokens, control characters, 5,000 characters, nothing) into
  the ids of scratchformer's gpt2_tokenizer, labels them as its token_strings does and decodes them as it does;
  the engine's tokenize() frames and refuses them as ModelBundle.prepare does;
- blog (the walkthrough's tiny model: the paper's encoder-decoder with d_model 6 over GPT-2's 50,257 tokens) traces
  every step as Python does (within 1e-4 × the step's largest value) and writes the same greedy output token for
  token; so does a model of the paper's architecture saved to a folder at a size that fits;
- the paper preset is refused in one sentence naming its size; tokenizers of other rules or kinds in one sentence;
- the merges the page carries, and what they add to the live model, are measured.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
from types import SimpleNamespace

import pytest
import torch
from tokenizers import pre_tokenizers

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint
from scratchformer.loading.tokenizers import TextTokenizer, gpt2_tokenizer
from scratchformer.page.live import model as live
from scratchformer.page.live.model import live_model, live_refusal
from scratchformer.running.decoding import greedy
from scratchformer.transformer.config import TransformerConfig, paper
from scratchformer.transformer.model import Transformer
from tests.scratchformer.live_harness import check_run, harness, report_worst, show
from tests.scratchformer.page_browsers import browser_fixture

_rng = random.Random(0)
_PARTS = ["the", " quick", "  brown", "\n", "\t", "fox's", " they're", "12", "3.5", "😀", "👍🏽", "日本語", " नमस्ते",
          " مرحبا", " שָׁלוֹם", "e\u0301", "!!", " ...", "\u00a0", "<|endoftext|>", "İ", "\u3000", "ß"]  # fmt: skip
LONG = "".join(_rng.choice(_PARTS) for _ in range(2000))[:5000]
AWKWARD = [
    "", " ", "hello world", "   leading spaces", "trailing spaces   ", "multiple    spaces   between  words",
    "line one\nline two\n\n\nline five", "\ttab\tseparated\t\tcells\t", "\r\n windows line\r\n", " \n \n ",
    "Hello, world! How's it going?", "it's don't we're they've I'm you'll he'd", "IT'S DON'T WE'RE I'M",
    "'s's'tis 'S ''", "12345 678.9 1,000,000 3.14159 007", "a1b2c3 x²³ ½ ٣٤٥ 二〇二四",
    "😀 👍🏽 👨\u200d👩\u200d👧 🇮🇳", "😀" * 40, "日本語のテキスト、中文。한국어", "नमस्ते दुनिया, हिंदी क्षत्रिय ज़",
    "مرحبا بالعالم، كيف حالك؟", "שָׁלוֹם עולם", "e\u0301 cafe\u0301 n\u0303 a\u0308\u0301", "naïve façade Ünïcödé ß ẞ",
    "Ελληνικά Русский текст", "\u00a0nbsp\u00a0\u00a0twice \u00a0", "\u3000ideographic\u3000 space",
    "\x85next line\u2028ls\u2029ps", "\ufeffbom\u200bzero\u200cwidth\u200d", "\x00\x01\x1f control \x7f",
    "mixed\u0085\u00a0 \u2003spaces\u180e here", "x \ufeffa \x85b  \x85\x85c \u180ed \u200bz \x1cy",
    "<|endoftext|>", "a<|endoftext|>b <|endoftext|> c<|endoftext|",
    "<|endoftext|><|endoftext|> <|endoftext", "$$$ ... !!! ??? --- *** @#%", "hello...world!!!  ---",
    "ﬁ ligature ｆｕｌｌｗｉｄｔｈ ① ™", "x" * 300, "ab" * 1000, LONG,
]  # fmt: skip
# blog reads 10 tokens: short sentences for its traces, one with an added token, one with emoji and CJK
BLOG_RUNS = [("I love cats", None), ("Hello, world!", "Bonjour le monde"), ("a<|endoftext|>b  c", None),
             ("😀 日本", None)]  # fmt: skip
SMALL_PAPER = dict(d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2, n_decoder_layers=2, max_len=64)


browser = browser_fixture(timeout=60, after=report_worst)


@pytest.fixture(scope="module")
def small_paper(tmp_path_factory):
    """A model of the paper's architecture over GPT-2's tokens at a size a page carries, saved and opened again as
    a folder (seeded random weights)."""
    config = TransformerConfig(**{**paper().to_dict(), "name": "paper-small", **SMALL_PAPER})
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("bpe") / "paper-small"
    save_checkpoint(folder, Transformer(config).eval(), gpt2_tokenizer(), gpt2_tokenizer())
    return str(folder)


@pytest.fixture(scope="module")
def pages(tmp_path_factory, small_paper):
    folder = tmp_path_factory.mktemp("bpe_pages")
    return {"blog": harness(load_model("blog", "cpu"), folder / "blog.html"),
            "paper-small": harness(load_model(small_paper, "cpu"), folder / "paper-small.html")}  # fmt: skip


# --- the tokenizer ------------------------------------------------------------------------------------------------


def test_the_tokenizer_reads_awkward_text_as_hugging_face_does(browser, pages):
    tok = gpt2_tokenizer()
    b = show(browser, pages["blog"])
    ours = json.loads(b.evaluate(f"""(() => {{
        const model = JSON.parse(document.getElementById("sf-live-model").textContent);
        const t = sfLive.tokenizer(sfLive.tokenizers(model).src);
        return JSON.stringify({json.dumps(AWKWARD)}.map((text) => {{
          const {{ids, unknown, lost}} = t.encode(text);
          return {{ids, unknown, lost, labels: t.strings(ids), text: t.decode(ids)}};
        }}));
    }})()"""))  # fmt: skip
    for text, mine in zip(AWKWARD, ours):
        ids = tok.encode(text)
        assert mine["ids"] == ids, text[:80]
        assert mine["labels"] == tok.token_strings(ids), text[:80]  # 'Ġ' read as a space, broken bytes as '�'
        assert mine["text"] == tok.decode(ids), text[:80]  # <|endoftext|> left out
        assert mine["unknown"] == tok.unknown_words(text) == [] and mine["lost"] == tok.losses(text) == []
    assert not b.console


def test_the_engine_frames_and_refuses_text_as_prepare_does(browser, pages):
    bundle = load_model("blog", "cpu")
    b = show(browser, pages["blog"])
    for text in AWKWARD:
        ours = b.evaluate(f"engine.tokenize({json.dumps(text)}, 'src')")
        try:
            inputs = bundle.prepare(text)
        except UserError as e:  # empty, or more than blog's 10 tokens: Python's sentence
            assert ours == {"error": str(e)}, text[:80]
            continue
        assert ours["ids"] == inputs.src[0].tolist() and ours["tokens"] == inputs.source_tokens[0], text
        assert ours["notes"] == inputs.notes and ours["unknown"] == inputs.unknown_words, text


def test_the_vocabulary_s_pieces_and_labels_are_the_tokenizer_s(browser, pages):
    tok = gpt2_tokenizer()
    b = show(browser, pages["blog"])
    got = json.loads(b.evaluate("""(() => {
        const model = JSON.parse(document.getElementById("sf-live-model").textContent);
        const specs = sfLive.tokenizers(model), v = sfLive.vocabulary(specs.tgt);
        return JSON.stringify({same: specs.src === specs.tgt, tokens: v.tokens, labels: v.labels});
    })()"""))  # fmt: skip
    ids = list(range(len(tok.hf)))
    assert got["same"] and got["tokens"] == tok.hf.convert_ids_to_tokens(ids)
    assert got["labels"] == tok.token_strings(ids)


# --- the models that read it ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, target", BLOG_RUNS)
def test_blog_every_step_and_its_greedy_output_match_python(browser, pages, source, target):
    check_run(show(browser, pages["blog"]), "blog", source, target)


@pytest.mark.parametrize("source, target", [
    ("The quick brown fox's 12 emoji 😀👍🏽 and 日本語 text, twice:  the quick brown fox!", None),
    ("नमस्ते दुनिया", "שָׁלוֹם עולם <|endoftext|> again"),
])  # fmt: skip
def test_a_paper_architecture_model_that_fits_runs_live(browser, pages, small_paper, source, target):
    assert live_refusal(load_model(small_paper, "cpu")) is None
    ours = check_run(show(browser, pages["paper-small"]), small_paper, source, target)
    assert len(ours["source_tokens"]) > 20


def test_blog_s_greedy_translation_alone_matches_python_on_longer_limits(browser, pages):
    b = show(browser, pages["blog"])
    bundle = load_model("blog", "cpu")
    for n in (1, 5, 9):
        alone = b.evaluate(f"engine.translate('I love cats', {{maxLen: {n}}})")
        src = bundle.prepare("I love cats").src[0].tolist()
        ids = greedy(bundle, src, n)
        assert alone["ids"] == ids and alone["text"] == bundle.tgt_tokenizer.decode(ids)
        assert alone["tokens"] == bundle.tgt_tokenizer.token_strings(ids)


# --- what is refused, and what the tokenizer costs -----------------------------------------------------------------


def _one_sentence(said: str | None, name: str) -> str:
    assert said is not None and said.startswith(f"The page cannot rerun {name} in the browser: ")
    assert said.endswith(".") and ". " not in said and "\n" not in said
    return said


def test_the_paper_preset_is_refused_naming_its_size():
    said = _one_sentence(live_refusal(load_model("paper", "cpu")), "paper")
    assert said.endswith(f"its weights take 279.4 MB, more than the {live.LIVE_BYTES / 1e6:.0f} MB a page may carry.")


def test_tokenizers_of_other_rules_or_kinds_are_refused_in_one_sentence():
    config = load_model("blog", "cpu").config
    gpt2 = gpt2_tokenizer()
    prefixed = copy.deepcopy(gpt2.hf)
    prefixed.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)  # RoBERTa's way
    for tok, phrase in [
        (TextTokenizer(prefixed, "gpt2", "gpt2-bpe"), "its source tokenizer reads text with other rules than GPT-2's "
                                                      "byte-level BPE"),
        (TextTokenizer(gpt2.hf, "spm", "sentencepiece"), "its source tokenizer is sentencepiece, and the page reads "
                                                         "word-level vocabularies and GPT-2's byte-level BPE only"),
    ]:  # fmt: skip
        bundle = SimpleNamespace(config=config, src_tokenizer=tok, tgt_tokenizer=gpt2, name="that model")
        assert _one_sentence(live_refusal(bundle), "that model").endswith(f": {phrase}.")


def test_the_merges_are_compact_and_carried_once():
    model = live_model(load_model("blog", "cpu"), steps=False)
    src, tgt = model["tokenizers"]["src"], model["tokenizers"]["tgt"]
    assert tgt == {"same_as": "src"} and src["kind"] == "byte-bpe" and "tokens" not in src
    text = json.dumps(model, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    alone = json.dumps(src, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    packed, packed_alone = len(gzip.compress(text, 6, mtime=0)), len(gzip.compress(alone, 6, mtime=0))
    print(f"\nGPT-2's tokenizer in the live model: {len(alone) / 1e3:.0f} kB of JSON, {packed_alone / 1e3:.0f} kB "
          f"gzipped ({packed_alone * 4 / 3 / 1e3:.0f} kB in the page as base64), {packed_alone / packed:.0%} of "
          "blog's packed live model")  # fmt: skip
    assert packed_alone < 200_000
