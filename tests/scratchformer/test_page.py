"""The interactive page without a browser: nothing in it points at the network, its data decode back to the
trace's values (to float16's precision), a budget reduces the right maps the way the window does, the stored
explanations and derivations are the library's, and `export --format html` writes one file."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch

from scratchformer.analyses import derive
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.explain import explain_step
from scratchformer.loading.bundle import load_model
from scratchformer.page import notebook_html, page_data, page_html, read_page, run_arguments, write_page
from scratchformer.page.maps import packed_within
from scratchformer.page.packing import pack_values, storage_dtype, unpack_values
from scratchformer.plotdata import block_reduce, display_reduction, heads_grid, step_heatmap
from scratchformer.plotdata.cells import cell_index

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def run():
    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare_run(SOURCE)
    _, trace = bundle.run(inputs, keep_output=False)
    data = page_data(bundle, trace, inputs, run_args=run_arguments("en-hi", SOURCE))
    return bundle, inputs, trace, data, page_html(data)


def f16(values) -> np.ndarray:
    """What float16 storage makes of float32 values."""
    return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)


def test_the_page_refers_to_nothing_outside_itself(run):
    page = run[4]
    assert not re.search(r"https?:|//[\w.-]+\.\w", page, re.I)  # no URL of any kind
    assert not re.search(r"""(src|href)\s*=\s*["']?[^"'\s>]""", page, re.I)  # nothing loaded by src or href
    assert not re.search(r"\bfetch\s*\(|XMLHttpRequest|WebSocket|EventSource|sendBeacon|importScripts", page)
    assert "@import" not in page and "url(" not in page and "@font-face" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "connect-src" not in csp  # every load forbidden, fetch included


def test_every_map_decodes_to_the_traces_values_at_float16_precision(run):
    _, _, trace, data, page = run
    index, chunks = read_page(page)
    assert index == data["index"] and chunks == data["chunks"]
    assert set(index["maps"]) == {f"{s.index}/0" for s in trace}
    for step in trace:
        info = index["maps"][f"{step.index}/0"]
        assert info["block"] == [1, 1], step.name  # a short sentence: every map whole
        stored = unpack_values(chunks[info["chunk"]], info["dtype"], tuple(info["shape"]))
        shown = np.stack([h.values for h in heads_grid(trace, step, 0)]) if step.n_heads > 1 else \
            step_heatmap(trace, step, 0, 0, run[0].tgt_tokenizer.token_strings).values[None]  # fmt: skip
        expected = shown if info["dtype"] == "f32" else f16(shown)
        np.testing.assert_array_equal(stored, expected, err_msg=step.name)  # −∞ of masks and NaN included
    weights = trace["decoder.0.self_attn.weights"]  # (batch, head, tgt, tgt): against the trace itself
    info = index["maps"][f"{weights.index}/0"]
    stored = unpack_values(chunks[info["chunk"]], info["dtype"], tuple(info["shape"]))
    np.testing.assert_allclose(stored, weights.tensor[0].numpy(), rtol=2**-11, atol=2**-25)
    assert np.isneginf(unpack_values(*(lambda i: (chunks[i["chunk"]], i["dtype"], tuple(i["shape"])))(
        index["maps"][f"{trace['decoder.0.self_attn.mask'].index}/0"]))).any()  # the causal mask's −∞ survive


def test_token_ids_and_large_values_are_kept_exact():
    ids = np.array([[[0, 30243, 50256, 7]]], dtype=np.float32)
    assert storage_dtype(ids) == "f32"
    np.testing.assert_array_equal(unpack_values(*pack_values(ids), ids.shape), ids)
    big = np.array([[[1e5, -3.0, np.inf]]], dtype=np.float32)
    assert storage_dtype(big) == "f32"
    small = np.array([[[0.1, -2.5, -np.inf, np.nan]]], dtype=np.float32)
    text, dtype = pack_values(small)
    assert dtype == "f16"
    np.testing.assert_array_equal(unpack_values(text, dtype, small.shape), f16(small))


def test_a_map_over_its_share_is_reduced_to_blocks_as_the_window_reduces_it():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((3, 100, 80)).astype(np.float32)  # (heads, rows, cols), signed: diverging
    values[0, 5, 7] = 40.0  # a stand-out cell must survive the reduction
    kept, block, text, dtype = packed_within(values, 6_000, "RdBu_r")
    assert block != (1, 1) and len(text) <= 6_000
    expected = np.stack([block_reduce(v, block, display_reduction("RdBu_r")) for v in values])
    np.testing.assert_array_equal(kept, expected)
    np.testing.assert_array_equal(unpack_values(text, dtype, kept.shape), f16(expected))
    assert unpack_values(text, dtype, kept.shape).max() == 40.0
    whole = packed_within(values, 1e9, "RdBu_r")
    assert whole[1] == (1, 1) and whole[0] is values


def test_a_small_budget_keeps_the_attention_weights_whole_and_reduces_the_rest(run):
    bundle, inputs, trace, full, _ = run
    weights = sum(len(full["chunks"][f"{s.index}/0"]) for s in trace if s.kind == "attention_weights")
    rest = sum(len(t) for t in full["chunks"].values()) - weights
    budget = weights / 0.96 + rest / 4  # the weights whole (tier 1 may take 96 %), the rest in a quarter
    data = page_data(bundle, trace, inputs, budget=budget, derive_cells=0)
    maps, chunks = data["index"]["maps"], data["chunks"]
    reduced = [s for s in trace if maps[f"{s.index}/0"]["block"] != [1, 1]]
    assert all(maps[f"{s.index}/0"]["block"] == [1, 1] for s in trace if s.kind == "attention_weights")
    assert len(reduced) > 20 and all(s.kind != "attention_weights" for s in reduced)
    # within the budget, give or take what a map reduced to its smallest blocks can still hold (maps.py): a map
    # whose sides reach MIN_SIDE cannot shrink further, so the last of them may overshoot by a few bytes
    assert sum(len(t) for t in chunks.values()) <= budget * 1.01
    assert data["index"]["derive"] == {}


def test_explanations_are_the_explain_modules_with_this_runs_numbers(run):
    bundle, _, trace, data, _ = run
    vocab = bundle.tgt_tokenizer.token_strings
    for name in ("encoder.0.self_attn.weights", "decoder.1.add_norm3.out", "generator.probs"):
        step = trace[name]
        ex = explain_step(trace, step, bundle.config, 0, vocab)
        stored = data["index"]["explain"][f"{step.index}/0"]
        assert (stored["what"], stored["why"], stored["numbers"]) == (ex.what, ex.why, ex.numbers)
        assert stored["links"] == [[i, text] for i, text in ex.links]


def test_stored_derivations_are_analyses_derive(run):
    bundle, _, trace, data, _ = run
    derived = data["index"]["derive"]
    weights = [s for s in trace if s.kind == "attention_weights"]
    assert {str(s.index) for s in weights} <= set(derived)  # every attention map of the sentence
    step = trace["decoder.1.cross_attn.weights"]
    cells = derived[str(step.index)]
    assert len(cells) == step.n_heads * step.shape[2] * step.shape[3]
    d = derive.compute(bundle, trace, step.name, cell_index(step, 0, 2, 3, 4))
    stored = cells["2,3,4"]
    assert (stored["f"], stored["e"], stored["n"], stored["ok"]) == (d.formula, d.expression, d.note, True)
    assert stored["v"] == pytest.approx(d.value, rel=1e-6) and stored["in"] == [[step.index - 1, step.shape[3]]]
    logits = trace["generator.logits"]  # a vocabulary axis: the map's columns are chosen ids
    if str(logits.index) in derived:
        vocab_ids = data["index"]["maps"][f"{logits.index}/0"]["vocab_ids"]
        d = derive.compute(bundle, trace, logits.name, (0, 1, vocab_ids[2]))
        assert derived[str(logits.index)]["0,1,2"]["v"] == pytest.approx(d.value, rel=1e-6)


def test_lens_and_translation_are_in_the_index(run):
    bundle, inputs, trace, data, _ = run
    index = data["index"]
    assert index["input"]["translation"] == inputs.translation and inputs.translation
    lens = index["lens"]["items"]["0"]
    assert lens["positions"] == trace.target_tokens[0]
    assert lens["steps"][-1] == trace["decoder.1.add_norm3.out"].index  # the last point: the model's own output
    probs = trace["generator.probs"].tensor[0]  # (tgt, vocab)
    top = probs.argmax(-1)
    for j, token in enumerate(lens["emitted"]):
        assert token == bundle.tgt_tokenizer.token_strings([int(top[j])])[0]
        assert lens["top"][-1][j][0][1] == pytest.approx(float(probs[j, top[j]]), rel=1e-4)
    assert [b["key"] for b in index["blocks"]][:2] == ["src_embed.embedding", "src_embed.positional"]


def test_the_notebook_view_is_the_page_in_an_iframe(run):
    page = run[4]
    view = notebook_html(page, height=600)
    srcdoc = re.fullmatch(r'<iframe srcdoc="([^"]*)" [^>]*height: 600px;[^>]*></iframe>', view).group(1)
    assert html.unescape(srcdoc) == page
    assert len(view) < len(page) * 1.05 + 1000  # the notebook grows by the page and little more


def test_an_unwritable_path_is_one_sentence(run, tmp_path):
    page = run[4]
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    for target in (tmp_path / "missing" / "page.html", not_a_folder / "page.html"):
        with pytest.raises(UserError) as caught:
            write_page(target, page)
        text = str(caught.value)
        assert text.endswith(".") and "\n" not in text and str(target.parent) in text
    write_page(tmp_path / "page.html", page)
    with pytest.raises(UserError, match="already exists"):
        write_page(tmp_path / "page.html", page)
    assert write_page(tmp_path / "page.html", page, overwrite=True) == len(page.encode("utf-8"))


def test_export_format_html_writes_one_page(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "--format", "html", "--out", str(out), "--source", SOURCE]) == 0
    files = list(out.iterdir())
    assert [f.name for f in files] == ["page.html"]
    assert "Wrote" in capsys.readouterr().out
    index, chunks = read_page(files[0].read_text(encoding="utf-8"))
    assert index["model"]["name"] == "en-hi" and index["input"]["source"][0][:5] == SOURCE.split()
    assert index["run_args"] == "--model en-hi --source 'the girl eats an apple'"
    assert len(chunks) == len(index["steps"]) == 114
    assert main(["export", "--format", "html", "--out", str(out), "--source", SOURCE]) == 2  # no silent replace
    assert "already exists" in capsys.readouterr().err


def test_export_html_refuses_what_the_page_does_not_take(tmp_path, capsys, model_never_opened):
    for extra in (["--format", "html,png"], ["--format", "html", "--steps", "all"]):
        assert main(["export", *extra, "--out", str(tmp_path), "--source", SOURCE]) == 2
        err = capsys.readouterr().err
        assert err.startswith("scratchformer: ") and err.count("\n") == 1


def test_a_batch_of_items_has_one_map_per_item_and_opens_at_the_chosen_one():
    bundle = load_model("en-hi", "cpu")
    inputs = bundle.prepare_padded("the boy reads a good book", variants=3)
    _, trace = bundle.run(inputs, keep_output=False)
    data = page_data(bundle, trace, inputs, item=2, derive_cells=0)
    index = data["index"]
    assert index["items"] == [0, 1, 2] and index["item"] == 2
    step = trace["encoder.0.self_attn.weights"]
    info = index["maps"][f"{step.index}/2"]
    stored = unpack_values(data["chunks"][info["chunk"]], info["dtype"], tuple(info["shape"]))
    np.testing.assert_array_equal(stored, f16(step.tensor[2].numpy()))
    assert index["explain"][f"{step.index}/1"] != index["explain"][f"{step.index}/0"]  # each item's numbers
    with pytest.raises(UserError, match="out of range"):
        page_data(bundle, trace, inputs, item=3)
    assert torch.equal(trace["src_embed.tokens"].tensor[1], inputs.src[1])


def test_a_vocabulary_axis_keeps_the_heatmaps_chosen_tokens_and_ids(tmp_path):
    bundle = load_model("blog", "cpu")  # GPT-2's 50 257 tokens, untrained
    inputs = bundle.prepare_run("machine learning using PyTorch")
    _, trace = bundle.run(inputs, keep_output=False)
    write_page(tmp_path / "blog.html", page_data(bundle, trace, inputs))
    index, chunks = read_page((tmp_path / "blog.html").read_text(encoding="utf-8"))
    assert index["model"]["untrained"] is True
    step = trace["generator.probs"]
    hm = step_heatmap(trace, step, 0, 0, bundle.tgt_tokenizer.token_strings)
    info = index["maps"][f"{step.index}/0"]
    assert info["cols"] == hm.col_labels and info["vocab_ids"] == hm.extra["vocab_ids"].tolist()
    assert info["rows"] == "tgt" and info["levels"] == [0.0, pytest.approx(hm.levels[1], rel=1e-6)]
    stored = unpack_values(chunks[info["chunk"]], info["dtype"], tuple(info["shape"]))
    np.testing.assert_array_equal(stored[0], f16(hm.values))


def test_a_decoder_only_models_page_says_the_decoder_read_its_continuation():
    """As `scratchformer trace` says it (commands/trace.decoder_input_text): a decoder-only model's generated
    input is the text and its continuation, not "the model's own output"."""
    from scratchformer.running.generation import Continuation

    bundle = load_model("llama-tiny", "cpu")
    inputs = bundle.prepare_run("3 1 4 <sep>", "", continuation=Continuation())
    assert inputs.decoder_input == "generated"
    _, trace = bundle.run(inputs, keep_output=False)
    said = page_data(bundle, trace, inputs)["index"]["input"]["decoder_input"]
    assert said.startswith("the text and the model's greedy continuation")
