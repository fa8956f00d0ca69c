"""The live page (`scratchformer export --format html --live`): it carries the model and reruns it in the browser on
the sentence typed into #sf-source (and #sf-target), and draws every step of the new run as the recorded page draws
its own. In headless Chromium and Firefox (tests/scratchformer/page_browsers.py), against Python:

- the map of the recorded sentence, rerun in the page, is the recorded page's map (float16 there: values within
  1e-3 of their size, levels within 1e-3 relative, the same colour map, labels, heads, vocabulary columns);
- a typed sentence gives Python's tokens, decoder input and greedy translation token for token, and every map is
  what maps.py makes of Python's trace of it (values within 1e-4 of the step's size, as the engine's own tests);
  the steps shown, stepped with → and hovered read the new run's values; nothing is requested;
- bad input (empty, a 10,000-character paste, emoji, right-to-left text, more tokens than positions) is one sentence
  on the page, the last good run stays, and the page answers at once;
- llama-tiny's page works too, and blog's (GPT-2's byte-level tokens); a model the page cannot rerun is refused at
  export in one sentence.
How fast a rerun is drawn and how fast → steps are measured by benchmarks/bench_page_live.py, not here.

<body data-run> counts the runs drawn: 0 for the recorded run the page opens with, then 1, 2, … ."""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

import numpy as np
import pytest

import scratchformer as sf
from scratchformer.analyses import derive
from scratchformer.analyses import lens as lens_analysis
from scratchformer.cli import main
from scratchformer.explain import explain_step
from scratchformer.loading.bundle import load_model
from scratchformer.page import read_page
from scratchformer.page.live.model import live_refusal
from scratchformer.page.maps import build_maps, heatmaps_of
from scratchformer.page.packing import pack_json, unpack_json, unpack_values
from scratchformer.plotdata.cells import cell_index
from tests.scratchformer.live_harness import SF_BYTES, floats
from tests.scratchformer.page_browsers import READY, SOURCE, cell_centre

# engine_browser: tests/scratchformer/conftest.py

PAGE_LIMIT = 2_500_000  # bytes: en-hi's live page
NEW = "the boy drinks water"
LLAMA, LLAMA_NEW = "3 1 4 1 5 9 2 6 <sep>", "2 7 1 8 2 8 <sep>"
BLOG, BLOG_NEW = "hello world", "I love cats, don't you?"  # blog reads 10 of GPT-2's tokens
# the page's maps as JSON, each with its values as base64 of float32 (live_harness's sfBytes)
DUMP = (
    "(() => { const P = window.sfPage, D = P.index(), out = {};\n" + SF_BYTES + """
  for (const [key, m] of Object.entries(D.maps)) out[key] = Object.assign({}, m, {data: sfBytes(P.hooks.values(key))});
  return JSON.stringify(out); })()"""
)


def export(tmp: Path, model: str, source: str, *extra: str) -> tuple[int, Path]:
    out = tmp / model
    code = main(["export", "--model", model, "--source", source, "--format", "html", "--live", "--out", str(out),
                 *extra])  # fmt: skip
    return code, out / "page.html"


@pytest.fixture(scope="module")
def live_file(tmp_path_factory):
    code, path = export(tmp_path_factory.mktemp("live"), "en-hi", SOURCE)
    assert code == 0
    return path


@pytest.fixture(scope="module")
def llama_file(tmp_path_factory):
    code, path = export(tmp_path_factory.mktemp("live"), "llama-tiny", LLAMA)
    assert code == 0
    return path


@pytest.fixture(scope="module")
def blog_file(tmp_path_factory):
    code, path = export(tmp_path_factory.mktemp("live"), "blog", BLOG)
    assert code == 0
    return path


# --- the page in the browser ------------------------------------------------------------------------------------


def open_live(b, path: Path) -> None:
    b.requests.clear()
    b.console.clear()
    b.open(path)
    b.wait_for(READY, timeout=60)
    assert b.evaluate("document.body.dataset.run") == "0", b.evaluate("document.body.dataset.liveError")
    assert b.evaluate("document.getElementById('sf-source').disabled") is False


def runs(b) -> int:
    return int(b.evaluate("document.body.dataset.run"))


def type_sentence(b, text: str) -> None:
    """Real typing: a click into the box, its text selected, the keys (Chromium inserts the text as an IME does),
    then the page's own wait for more keys; returns once the run of exactly `text` is drawn."""
    before = runs(b)
    b.click(*b.centre_of("#sf-source"))
    b.evaluate("document.getElementById('sf-source').select()")
    if b.engine == "chromium":
        b.page("Input.insertText", text=text)
    else:
        for ch in text:
            b.key(ch)
    b.wait_for(f"+document.body.dataset.run > {before} && "
               f"document.getElementById('sf-live-shown').textContent.includes({json.dumps('“' + text + '”')})",
               timeout=30)  # fmt: skip


def enter(b, text: str, box: str = "sf-source") -> None:
    """`text` put into a box at once (as a paste does), then Enter."""
    b.evaluate(f"(() => {{ const s = document.getElementById({json.dumps(box)}); s.value = {json.dumps(text)};"
               " s.dispatchEvent(new InputEvent('input', {bubbles: true}));"
               " s.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})); })()")  # fmt: skip


def shown_tokens(b) -> list[list[str]]:
    """The token chips of the header: the source's line, then the decoder input's (where it differs)."""
    return b.evaluate("[...document.querySelectorAll('#sf-run .sf-tokens')].map((p) =>"
                      " [...p.querySelectorAll('span')].map((s) => s.textContent))")  # fmt: skip


def live_maps(b) -> dict:
    maps = json.loads(b.evaluate(DUMP))
    for m in maps.values():
        m["values"] = floats(m.pop("data"), m["shape"])
    return maps


def close(a: float, b: float, rel: float) -> bool:
    return abs(float(a) - float(b)) <= rel * max(1.0, abs(float(b)))


def same_maps(ours: dict, theirs: dict, values: dict, tolerance: float) -> float:
    """Every map's drawing (levels, colour map, labels, heads, vocabulary columns, masked) and values; the worst
    difference of values relative to the step's size."""
    assert ours.keys() == theirs.keys()
    worst = 0.0
    for key, mine in ours.items():
        their = theirs[key]
        for field in ("cmap", "row_dim", "col_dim", "rows", "cols", "heads", "masked", "gaps", "full", "shape"):
            assert mine[field] == their[field], (key, field, mine[field], their[field])
        assert mine.get("vocab_ids") == their.get("vocab_ids"), key
        for a, b in zip(mine["levels"], their["levels"]):
            assert abs(a - b) <= 1e-3 * max(abs(b), 1e-6), (key, mine["levels"], their["levels"])
        a, b = mine["values"], values[key]
        assert np.array_equal(np.isneginf(a), np.isneginf(b)), key
        finite = np.isfinite(b)
        if finite.any():
            scale = max(1.0, float(np.abs(b[finite]).max()))
            diff = float(np.abs(a[finite] - b[finite]).max()) / scale
            worst = max(worst, diff)
            assert diff <= tolerance, (key, diff)
    return worst


def python_maps(run) -> tuple[dict, dict]:
    """maps.py's maps of a run (item 0) and their float32 values, as a page of that run would be made from."""
    vocab = run.bundle.tgt_tokenizer.token_strings
    _, maps = build_maps(run.trace, [0], vocab)
    values = {f"{s.index}/0": np.stack([h.values for h in heatmaps_of(run.trace, s, 0, vocab)]) for s in run.trace}
    return maps, values


def typed_run(b, path: Path, model: str, text: str):
    """The live page at `path` with `text` typed: the translation and every map drawn are Python's run of it (values
    within 1e-4 of the step's size); Python's run, its maps' values and the worst difference."""
    run = sf.run(model=model, source=text)
    open_live(b, path)
    type_sentence(b, text)
    assert b.evaluate("document.getElementById('sf-translation').textContent") == run.translation
    maps, values = python_maps(run)
    return run, values, same_maps(live_maps(b), maps, values, 1e-4)


def test_the_recorded_sentence_rerun_in_the_page_is_the_recorded_page(live_file, engine_browser):
    index, chunks = read_page(live_file.read_text(encoding="utf-8"))
    recorded = {k: unpack_values(chunks[m["chunk"]], m["dtype"], tuple(m["shape"])) for k, m in index["maps"].items()}
    b = engine_browser
    open_live(b, live_file)
    enter(b, SOURCE)
    b.wait_for("document.body.dataset.run === '1'")
    worst = same_maps(live_maps(b), index["maps"], recorded, 1e-3)  # the recorded values are float16
    print(f"\n{b.engine}: the recorded sentence rerun, worst difference from the recorded page's maps {worst:.1e}")
    assert b.requests == [] and not b.console


def test_a_typed_sentence_is_python_s_run_on_screen(live_file, engine_browser):
    b = engine_browser
    run, values, worst = typed_run(b, live_file, "en-hi", NEW)
    assert shown_tokens(b) == [run.trace.source_tokens[0], run.trace.target_tokens[0]]
    assert run.translation and b.evaluate("document.title").startswith(f"en-hi · {NEW}")
    print(f"\n{b.engine}: a typed sentence, worst difference from Python's maps {worst:.1e}")
    # the steps shown: the page's own values of the map drawn, one head or all of them
    for name, head in (("encoder.0.self_attn.weights", 0), ("decoder.1.cross_attn.weights", 2),
                       ("decoder.0.ffn.hidden", 0), ("generator.probs", 0), ("decoder.1.self_attn.scores", "all")):
        step = run.trace[name]
        b.evaluate(f"(() => {{ const P = window.sfPage; P.state.head = {json.dumps(head)}; P.show({step.index}); }})()")
        b.wait_for(f"document.body.dataset.step === '{step.index}' && document.body.dataset.head === '{head}'")
        shown = b.evaluate("window.sfPage.currentValues()")
        want = values[f"{step.index}/0"] if head == "all" else values[f"{step.index}/0"][head]
        got = np.array(shown["values"], dtype=np.float64).reshape(want.shape)
        assert np.abs(got - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max())), name
    # stepping with → still works, and a hover reads the new run's value
    step = run.trace["decoder.1.cross_attn.weights"]
    b.evaluate(f"(() => {{ const P = window.sfPage; P.state.head = 0; P.show({step.index - 1}); }})()")
    b.wait_for(f"document.body.dataset.step === '{step.index - 1}'")
    b.click(*b.centre_of("#sf-title"))  # out of the text box, where → moves the caret
    b.key("ArrowRight", "ArrowRight", 39)
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    b.hover(*cell_centre(b, 2, 1))
    readout = b.evaluate("document.getElementById('sf-readout').textContent")
    target, source = run.trace.target_tokens[0][2], run.trace.source_tokens[0][1]
    assert readout.startswith(f"Head 1 · “{target}” (2) · “{source}” (1) = "), readout
    value = float(readout.rsplit("= ", 1)[1].replace("−", "-"))
    assert value == pytest.approx(float(step.tensor[0, 0, 2, 1]), abs=1e-3)
    assert b.requests == [] and not b.console and b.evaluate("document.body.dataset.error") is None


def test_the_explanation_derivation_and_lens_are_of_the_typed_run(live_file, engine_browser):
    """With the plug-ins in the page (live/explain.js, live/derive*.js) they are Python's for the
    typed sentence; without them the page says the recorded sentence's numbers are left out, and shows the command
    that derives a cell of the typed sentence."""
    run = sf.run("en-hi", NEW)
    step = run.trace["decoder.1.cross_attn.weights"]
    b = engine_browser
    open_live(b, live_file)
    enter(b, NEW)
    b.wait_for("document.body.dataset.run === '1'")
    b.evaluate(f"(() => {{ const P = window.sfPage; P.state.head = 0; P.show({step.index}); }})()")
    b.wait_for(f"document.body.dataset.step === '{step.index}'")
    explained = b.evaluate("document.getElementById('sf-explain').textContent")
    plugins = b.evaluate("[!!window.sfLiveExplain, !!window.sfLiveDerive]")
    if plugins[0]:
        ex = explain_step(run.trace, step, run.bundle.config, 0, run.bundle.tgt_tokenizer.token_strings)
        assert ex.what in explained and ex.numbers in explained
    else:
        assert f"These words explain the recorded sentence (“{SOURCE}”)" in explained
    b.click(*cell_centre(b, 2, 1))
    derived = b.evaluate("document.getElementById('sf-derivation').textContent")
    if plugins[1]:
        d = derive.compute(run.bundle, run.trace, step.name, cell_index(step, 0, 0, 2, 1))
        assert d.expression in derived and d.formula in derived and "(equal)" in derived
    else:
        assert f"scratchformer derive --model en-hi --source '{NEW}' {step.name} 0 0 2 1" in derived
    b.evaluate("document.getElementById('sf-lens-box').open = true")
    b.wait_for("document.getElementById('sf-lens').textContent !== ''")
    lensed = b.evaluate("document.getElementById('sf-lens').textContent")
    if plugins[1]:
        emitted = lens_analysis.compute(run.bundle, run.trace, 0).emitted
        assert all(f"→ {token}" in lensed for token in emitted), lensed[:200]
    else:
        assert "not recomputed for a typed sentence" in lensed
    assert b.requests == [] and not b.console


SET_TEXTS = """(() => { const s = document.getElementById('sf-source');
  for (const t of %s) { s.value = t; s.dispatchEvent(new InputEvent('input', {bubbles: true})); } })()"""
REFUSED = "document.getElementById('sf-live-status').classList.contains('sf-live-error')"


def test_typing_runs_at_once_and_a_refusal_waits_for_a_pause(live_file, engine_browser):
    b = engine_browser
    open_live(b, live_file)
    # a burst of changes in one go (a paste, fast keys): one run, of the latest text
    b.evaluate(SET_TEXTS % json.dumps(["the", "the girl", NEW]))
    b.wait_for("document.body.dataset.run === '1'")
    time.sleep(0.3)
    assert runs(b) == 1 and f"“{NEW}”" in b.evaluate("document.getElementById('sf-live-shown').textContent")
    b.evaluate(SET_TEXTS % json.dumps([NEW]))  # a change that leaves the text as it was: no run
    time.sleep(0.3)
    assert runs(b) == 1
    # text the model cannot read: the sentence waits for a pause in the typing (a key within it cancels it) …
    b.evaluate(SET_TEXTS % json.dumps(["😀"]))
    time.sleep(0.1)
    assert b.evaluate(REFUSED) is False  # not yet: the refusal waits 0.4 s
    b.evaluate(SET_TEXTS % json.dumps(["😀 🍎"]))
    b.wait_for(REFUSED, timeout=5)
    assert runs(b) == 1 and shown_tokens(b)[0] == sf.run("en-hi", NEW).trace.source_tokens[0]  # the last good run
    # … and the next good text runs at once and clears it
    b.evaluate(SET_TEXTS % json.dumps(["the girl eats an apple"]))
    b.wait_for("document.body.dataset.run === '2'")
    assert b.evaluate(REFUSED) is False


def test_bad_input_is_one_sentence_and_the_last_good_run_stays(live_file, engine_browser):
    b = engine_browser
    open_live(b, live_file)
    enter(b, NEW)
    b.wait_for("document.body.dataset.run === '1'")
    good = shown_tokens(b)
    max_chars = read_page(live_file.read_text(encoding="utf-8"))[0]["live"]["max_chars"]
    unknown = ("None of the words typed is in the model's vocabulary (each would be <unk>), so there is nothing for "
               "it to read.")
    cases = [
        ("", "The source text is empty; type a sentence first."),
        ("a" * 10_000, f"The source is 10,000 characters long; this page reads at most {max_chars:,}, so shorten it."),
        ("😀 🍎 🎉", unknown),
        ("שלום עולם مرحبا", unknown),
        (" ".join(["girl"] * 40), "The source has 40 tokens but this model reads at most 31; shorten the text."),
    ]  # fmt: skip
    for text, sentence in cases:
        b.evaluate("document.getElementById('sf-live-status').textContent = ''")
        start = time.monotonic()
        enter(b, text)
        b.wait_for("document.getElementById('sf-live-status').textContent !== ''", timeout=5)
        assert time.monotonic() - start < 5  # answered at once: the page did not freeze
        assert b.evaluate("document.getElementById('sf-live-status').textContent") == sentence
        assert b.evaluate("document.getElementById('sf-live-status').classList.contains('sf-live-error')")
        assert runs(b) == 1 and shown_tokens(b) == good  # the last good run stays on screen
        assert f"“{NEW}”" in b.evaluate("document.getElementById('sf-live-shown').textContent")
    # an unknown word among known ones runs, with the tokenizer's one-sentence note
    enter(b, "the girl eats 🍎")
    b.wait_for("document.body.dataset.run === '2'")
    assert b.evaluate("document.getElementById('sf-live-status').classList.contains('sf-live-error')") is False
    note = sf.run("en-hi", "the girl eats 🍎").inputs.notes[0]
    assert note in b.evaluate("document.getElementById('sf-run').textContent")
    # and its token is marked as the window marks a word it does not know
    marked = b.evaluate("[...document.querySelectorAll('#sf-run .sf-tokens span.sf-unk')].map((s) => s.textContent)")
    assert marked == ["<unk>"]
    assert b.requests == [] and not b.console


def test_a_typed_target_is_read_by_teacher_forcing(live_file, engine_browser):
    run = sf.run("en-hi", NEW, "लड़का पानी")
    b = engine_browser
    open_live(b, live_file)
    b.evaluate(f"document.getElementById('sf-source').value = {json.dumps(NEW)}")
    enter(b, "लड़का पानी", box="sf-target")
    b.wait_for("document.body.dataset.run === '1'")
    assert shown_tokens(b) == [run.trace.source_tokens[0], run.trace.target_tokens[0]]
    assert "teacher forcing" in b.evaluate("document.getElementById('sf-run').textContent")
    maps, values = python_maps(run)
    same_maps(live_maps(b), maps, values, 1e-4)


def test_llama_tiny_s_live_page_continues_the_typed_text(llama_file, engine_browser):
    b = engine_browser
    run = typed_run(b, llama_file, "llama-tiny", LLAMA_NEW)[0]
    assert b.evaluate("document.getElementById('sf-target')") is None  # a decoder alone reads one text
    assert shown_tokens(b) == [run.trace.source_tokens[0]]  # the decoder input is the text: one line
    assert b.requests == [] and not b.console


def test_blog_s_live_page_reads_gpt2_s_tokens_of_a_typed_sentence(blog_file, engine_browser):
    b = engine_browser
    # the logits' and probabilities' columns labelled as token_strings labels them
    run, _, worst = typed_run(b, blog_file, "blog", BLOG_NEW)
    assert shown_tokens(b) == [run.trace.source_tokens[0], run.trace.target_tokens[0]]  # " love", not "Ġlove"
    print(f"\n{b.engine}: blog, a typed sentence, worst difference from Python's maps {worst:.1e}")
    assert b.requests == [] and not b.console and b.evaluate("document.body.dataset.error") is None
    # the token ids' map: its colour bar's largest id (five digits) is written whole inside the canvas
    b.evaluate("window.sfPage.show(0)")
    b.wait_for("document.body.dataset.step === '0'")
    room = b.evaluate("""(() => { const c = document.querySelector('#sf-maps canvas'), f = c.sf;
      const ctx = document.createElement('canvas').getContext('2d'); ctx.font = '11px system-ui, sans-serif';
      const hi = String(window.sfPage.currentValues().levels[1]); // the bar's top value: the largest id
      return [parseFloat(c.style.width) - (f.left + f.cs * f.cols + 8 + 12), ctx.measureText(hi).width, hi]; })()""")
    assert len(room[2]) == 5 and room[0] >= room[1], room


# --- export ---------------------------------------------------------------------------------------------------


def test_the_live_page_refers_to_nothing_outside_itself(live_file):
    import re

    page = live_file.read_text(encoding="utf-8")
    assert not re.search(r"https?:|//[\w.-]+\.\w", page, re.I)  # no URL of any kind
    assert not re.search(r"""<[a-z][^>]*\s(src|href|action|data)\s*=""", page, re.I)  # no element loads anything
    assert not re.search(r"\bfetch\s*\(|XMLHttpRequest|WebSocket|EventSource|sendBeacon|importScripts|Worker\(", page)
    assert "@import" not in page and "url(" not in page and "@font-face" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert csp == "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


def test_the_cli_writes_a_live_page_within_its_size(live_file, capsys):
    text = live_file.read_text(encoding="utf-8")
    size = live_file.stat().st_size
    print(f"\nen-hi live page: {size / 1e6:.2f} MB")
    assert size <= PAGE_LIMIT
    assert '<input id="sf-source"' in text and '<input id="sf-target"' in text
    index, chunks = read_page(text)
    assert index["live"]["source"] == SOURCE and index["live"]["model"] == "en-hi"
    model = unpack_json(chunks["live"])["model"]
    assert model["config"]["name"] == "en-hi" and {w["dtype"] for w in model["weights"].values()} == {"f16"}
    assert "sfLivePage" in text and "sfLiveCore" in text


def test_blog_s_live_page_and_the_share_its_tokenizer_takes(blog_file):
    size = blog_file.stat().st_size
    model = unpack_json(read_page(blog_file.read_text(encoding="utf-8"))[1]["live"])["model"]
    tokenizer = len(pack_json(model["tokenizers"]))  # gzipped and base64-encoded, as the page carries it
    print(f"\nblog live page: {size / 1e6:.2f} MB, GPT-2's tokenizer {tokenizer / 1e6:.2f} MB of it "
          f"({tokenizer / size:.0%})")  # fmt: skip
    assert model["tokenizers"]["tgt"] == {"same_as": "src"}  # the merges once
    assert size <= PAGE_LIMIT and tokenizer < 300_000


def test_a_recorded_page_carries_no_model(tmp_path):
    out = tmp_path / "out"
    assert main(["export", "--source", SOURCE, "--format", "html", "--out", str(out)]) == 0
    text = (out / "page.html").read_text(encoding="utf-8")
    assert 'id="sf-source"' not in text and "sfLiveCore" not in text and "live" not in read_page(text)[1]


def test_a_model_the_page_cannot_rerun_is_refused_at_export_and_written_recorded(tmp_path, capsys):
    sentence = live_refusal(load_model("paper", "cpu"))  # the paper's base model: 279 MB of weights
    assert sentence is not None and "MB" in sentence
    code, path = export(tmp_path, "paper", "hello world")
    assert code == 0 and path.exists()  # the one sentence, and the recorded page as without --live
    assert f"note: {sentence} The recorded page is written instead." in capsys.readouterr().err
    text = path.read_text(encoding="utf-8")
    assert 'id="sf-source"' not in text and "sfLiveCore" not in text and "live" not in read_page(text)[0]
    view = sf.run("paper", "hello world").show(live=True)
    assert view.note == f"{sentence} The page below is the recorded one."
    assert html.escape(view.note) in view._repr_html_() and "live" not in read_page(view.html())[0]
    assert main(["export", "--source", SOURCE, "--live", "--out", str(tmp_path / "png")]) == 2
    assert "add --format html" in capsys.readouterr().err


def test_a_batch_is_refused_in_one_sentence_and_written_recorded(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("the girl eats an apple the boy drinks water " * 4, encoding="utf-8")
    assert main(["export", "--text-file", str(text), "--seq-len", "8", "--batch", "2", "--format", "html", "--live",
                 "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "A live page reruns one sentence, and this run has 2 batch items" in err
    assert "The recorded page is written instead." in err
    assert "live" not in read_page((tmp_path / "out" / "page.html").read_text(encoding="utf-8"))[0]


def test_run_show_live_is_the_live_page_in_a_notebook():
    view = sf.run("en-hi", NEW).show(live=True)
    index, chunks = read_page(view.html())
    assert index["live"] == {**index["live"], "model": "en-hi", "source": NEW, "target": ""} and "live" in chunks
    assert "sf-source" in view._repr_html_()
