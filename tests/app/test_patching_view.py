"""The Patching view (What if group) on en-hi: the sweep runs off the UI thread and draws the core's own numbers,
hover says a cell's effect, a click runs that cell's patched run with Compare open on it (and the patched run's own
logits give the map's number back), a bad corrupted input is one sentence, Cancel stops a sweep, attribution
patching sits beside the exact sweep with its disagreements outlined, and the maps export as PNG/SVG and CSV."""

from __future__ import annotations

import csv
import io
import threading

import numpy as np
import pytest
import torch

from app.export import actions
from app.export.actions import current_figure
from app.export.render import render_bytes
from app.views.compare_view import CompareView
from app.views.patching_view import PatchingView
from scratchformer.analyses import sweep as sweep_module
from scratchformer.analyses.sweep import compute
from scratchformer.plotdata.sweep import head_maps, point_maps
from tests.app.conftest import run_and_wait
from tests.app.test_views import show

SOURCE, CORRUPT = "the girl eats an apple", "the boy eats an apple"
WAIT_MS = 60_000


@pytest.fixture
def en_hi(qtbot, make_window):
    """en-hi reading the start token alone: the answer is the translation's first word, लड़की against लड़का."""
    w = make_window(source=SOURCE, target="", model="en-hi")
    w.input_bar.start_only.setChecked(True)
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    return w


def swept(qtbot, w, method="exact", per_position=False) -> PatchingView:
    view = show(w, PatchingView)
    view.controls.set_word(1, "boy")
    view.controls.method.setCurrentIndex(view.controls.method.findData(method))
    view.controls.per_position.setChecked(per_position)
    view.sweep()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert view.made is not None, view.status.text()
    return view


def reference(w, **options):
    """The core's sweep of the same inputs, made here on the test's thread."""
    bundle = w.current_bundle()
    clean = bundle.prepare_run(SOURCE, start_only=True)
    return compute(bundle, clean, bundle.prepare(CORRUPT), **options)


def test_a_sweep_runs_off_the_ui_thread_and_draws_the_cores_numbers(qtbot, en_hi, monkeypatch):
    threads: list[str] = []
    real = sweep_module.sweep_pair
    monkeypatch.setattr("app.views.patching_work.sweep_pair",
                        lambda *a, **k: threads.append(threading.current_thread().name) or real(*a, **k))
    w = en_hi
    view = swept(qtbot, w)
    assert threads and threading.current_thread().name not in threads
    ref = reference(w)
    assert view.made.sweep.m_clean == pytest.approx(ref.m_clean) and ref.m_clean - ref.m_corrupt > 1.0
    expected = head_maps(ref)
    assert [m.title for m in view.maps] == [m.title for m in expected]  # one per attention type
    for shown, made in zip(view.maps, expected):
        np.testing.assert_allclose(shown.values, made.values, atol=1e-6)
    assert np.abs(np.concatenate([m.values.ravel() for m in view.maps])).max() > 0.05  # not all zeros
    for family, name in (("resid", "resid"), ("mlp", "mlp")):  # the points × positions and feed-forward maps
        view.family.setCurrentIndex(view.family.findData(family))
        expected = point_maps(ref, name)
        assert len(view.maps) == len(expected) == 2  # encoder and decoder
        for shown, made in zip(view.maps, expected):
            np.testing.assert_allclose(shown.values, made.values, atol=1e-6)
    assert f"m_clean = {ref.m_clean:.4g}, m_corrupt = {ref.m_corrupt:.4g}" in view.caption.text()
    assert view.explain_facts()["patching"].startswith(f"m_clean = {ref.m_clean:.3g}")


def test_hover_says_the_effect_and_a_click_opens_the_patched_run_in_compare(qtbot, en_hi):
    w = en_hi
    view = swept(qtbot, w)
    cross = next(i for i, m in enumerate(view.maps) if "cross-attention" in m.title)
    hm = view.maps[cross]
    row, col = np.unravel_index(np.nanargmax(np.abs(hm.values)), hm.values.shape)
    value = float(hm.values[row, col])
    text = view.widgets[cross].describe_cell(int(row), int(col))
    assert text.startswith(f"decoder layer {row + 1} cross-attention head {col + 1}: effect {value:+.4f}")
    sweep = view.made.sweep
    assert f"m = {sweep.m_corrupt + value * (sweep.m_clean - sweep.m_corrupt):.4g}" in text

    view.widgets[cross].clicked.emit(int(row), int(col))
    assert isinstance(w.current_view(), CompareView)
    qtbot.waitUntil(lambda: w.current_result().request.prepared is not None and not w.is_busy()
                    and not view.is_busy(), timeout=WAIT_MS)  # fmt: skip
    result = w.current_result()
    step = f"decoder.{row}.cross_attn.context"
    assert w.current_step().name == step and w.current_head() == col
    assert [i.step for i in result.trace.interventions] == [step]
    assert result.trace.source_tokens[0][1] == "boy"  # the corrupted input, with the clean decoder input
    compare = w.current_view()
    assert compare.comparison is not None and compare.comparison.largest > 0  # before: corrupted, after: patched
    # each side named for what it is: the corrupted run, and it with this cell from the clean run
    caption = compare.caption.text()
    label = f"decoder layer {row + 1} cross-attention head {col + 1}"
    assert caption.startswith("<b>Corrupted run</b> | <b>Patched run</b>: " + label)
    assert "taken from the clean run" in caption and "no interventions" not in caption
    titles = [m.title for m in compare.current_heatmaps()]
    assert titles[0].startswith("Corrupted run: ") and titles[1].startswith("Patched run: ")
    assert titles[2].startswith("Patched run − corrupted run")
    # the explanation panel explains patching here, not an ablation, and names the patched component
    from app.panels.teaching import tab_explanation_for

    assert compare.explains == "compare_patch"
    said = tab_explanation_for(result, compare.explains, 0, compare.explain_facts())
    assert "patching" in said.why.lower() and label in said.numbers
    qtbot.waitUntil(lambda: view._replay is not None and view._replay.measured is not None, timeout=WAIT_MS)
    m, effect = view._replay.measured
    logits = result.trace["generator.logits"].tensor[0, -1]
    metric = view.made.pair.metric
    assert m == pytest.approx(float(logits[metric.answer] - logits[metric.wrong]), abs=1e-5)
    assert effect == pytest.approx(value, abs=1e-4)  # the map's number is the patched run's
    assert f"= {effect:+.4f}" in view.replay_label.text() and f"{value:+.4f}" in view.replay_label.text()

    show(w, PatchingView)  # Back to the clean run: the fields' sentence again, unpatched
    assert view.back_button.isVisible()
    view.back_button.click()
    qtbot.waitUntil(lambda: w.current_result().request.prepared is None and not w.is_busy(), timeout=WAIT_MS)
    assert w.current_trace().source_tokens[0][1] == "girl" and not w.current_trace().interventions


def test_a_corrupted_sentence_of_another_length_is_one_sentence(qtbot, en_hi):
    w = en_hi
    view = show(w, PatchingView)
    view.controls.set_sentence("the tall boy eats an apple")
    view.sweep()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    text = view.status.text()
    assert "same token length" in text and "Traceback" not in text and text.count(". ") <= 1
    assert view.made is None and view.maps == [] and w.message_text() == text
    view.controls.set_word(1, "")  # nothing typed: said at once, no job
    view.sweep()
    assert not view.is_busy() and view.status.text() == "Pick a word of the source and type the word that replaces it."
    view.controls.set_word(1, "boy")
    view.controls.answer.setText("zebra-not-a-word")
    view.sweep()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert view.status.text().startswith("The answer token 'zebra-not-a-word' is not in this model's vocabulary")


def test_the_answer_fields_keep_a_leading_space(qtbot, en_hi):
    """GPT-2's ' Mary' is another token than 'Mary' (the refusal's own hint says so): the typed answer and wrong
    tokens reach the sweep as typed; a blank field means the model's own top token."""
    view = show(en_hi, PatchingView)
    view.controls.set_word(1, "boy")
    view.controls.answer.setText(" Mary")
    view.controls.wrong.setText("   ")
    for ask in (view.controls.ask(SOURCE, "", True), view.controls.pairs_ask(True)):
        assert (ask.answer, ask.wrong) == (" Mary", None)


def test_cancel_stops_the_sweep_and_draws_nothing(qtbot, en_hi, monkeypatch):
    release = threading.Event()
    real = sweep_module.sweep_pair

    def slow(*args, **kw):  # the sweep waits at its first batch until the test has cancelled it
        inner = kw["cancelled"]
        kw["progress"] = lambda done, total: release.wait(10)
        return real(*args, **{**kw, "cancelled": inner})

    monkeypatch.setattr("app.views.patching_work.sweep_pair", slow)
    w = en_hi
    view = show(w, PatchingView)
    view.controls.set_word(1, "boy")
    view.sweep()
    assert view.is_busy() and view.cancel_button.isVisible()
    view.cancel()
    release.set()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert view.status.text() == "Cancelled." and not view.cancel_button.isVisible()
    assert view.made is None and view.maps == []


def test_attribution_beside_the_exact_sweep_with_disagreements_outlined_and_checked(qtbot, en_hi):
    w = en_hi
    view = swept(qtbot, w, method="both")
    ref = reference(w, method="both")
    assert [m.extra["grid"] for m in view.maps] == ["exact", "attribution"] * 3  # each estimate beside its sweep
    for shown, made in zip(view.maps[1::2], head_maps(ref, "attribution")):
        np.testing.assert_allclose(shown.values, made.values, atol=1e-5)
    flags = [m.extra["disagree"] for m in view.maps]
    assert sum(int(f.sum()) for f in flags) > 0  # en-hi's heads have cells where the estimate is off
    for widget, flag in zip(view.widgets, flags):
        assert widget.highlighted == sorted((int(r), int(c)) for r, c in np.argwhere(flag))
    assert "estimate" in view.widgets[0].describe_cell(0, 0)
    # the exports outline the same cells: one frame per run of adjacent disagreeing cells in a row
    from app.export.render import outline_runs, render_image
    from scratchformer.plotdata.heatmap import OUTLINE_COLOUR

    fig = current_figure(w)
    assert "outlined: the estimate and the real patch differ" in fig.subtitle
    assert fig.grid() == (3, 2)  # as the view lays them out: each estimate beside its exact map
    frames = sum(len(outline_runs(m.outlined)) for m in view.maps if m.outlined is not None)
    assert frames > 0
    svg = render_bytes(fig, "svg").decode("utf-8")
    assert svg.lower().count(f'stroke="{OUTLINE_COLOUR}"') == frames
    img = render_image(fig, scale=1.0)
    pixels = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())
    rgb = pixels[:, : img.width() * 4].reshape(img.height(), img.width(), 4)
    pink = [int(OUTLINE_COLOUR[i:i + 2], 16) for i in (1, 3, 5)]
    assert (np.abs(rgb[..., [2, 1, 0]].astype(int) - pink).sum(-1) < 30).sum() > 20  # drawn in the PNG too
    view.top_k.setValue(3)
    view.check_button.click()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    checked = view.made.sweep.checked
    assert len(checked) == 3 and "Checked by real patching" in view.caption.text()
    every = {(c.step, c.head, c.position): float(e) for g in (ref.heads, ref.positions, ref.mlp)
             for c, e in zip(g.components, g.effects)}  # fmt: skip
    for row in checked:  # the real patches equal the exact sweep's cells
        assert row["effect"] == pytest.approx(every[(row["step"], row["head"], row["position"])], abs=1e-5)


def test_path_patching_and_per_position_heads(qtbot, en_hi):
    w = en_hi
    view = show(w, PatchingView)
    c = view.controls
    c.path_sender.setCurrentIndex(c.path_sender.findData("decoder.0.self_attn.head0"))
    c.path_receiver.setCurrentIndex(c.path_receiver.findData("decoder.1.cross_attn.head1"))
    c.path_part.setCurrentIndex(c.path_part.findData("q"))
    view = swept(qtbot, w, per_position=True)
    path = view.made.sweep.path
    assert (path.sender, path.receiver) == ("decoder.0.self_attn.head0", "decoder.1.cross_attn.head1.q")
    assert f"{path.path:+.3f}" in view.caption.text()
    encoder = view.maps[0]
    assert encoder.values.shape == (2 * 4, 6)  # layer·head rows × the source's 6 positions


def test_a_chosen_sender_maps_its_path_into_every_head(qtbot, en_hi, tmp_path):
    """With a sender chosen, Show › path from the sender draws the path into every head's q as layers × heads
    maps: the core's path_sweep numbers, the chosen receiver's cell equal to the one path's effect, heads that
    cannot read the sender left as gaps; a click replays the path's second pass, whose logits give the number back;
    the CSV lists the paths."""
    from scratchformer.patching.paths import path_sweep

    w = en_hi
    view = show(w, PatchingView)
    c = view.controls
    sender = "decoder.0.self_attn.head0"
    c.path_sender.setCurrentIndex(c.path_sender.findData(sender))
    c.path_receiver.setCurrentIndex(c.path_receiver.findData("decoder.1.cross_attn.head1"))
    c.path_part.setCurrentIndex(c.path_part.findData("q"))
    view = swept(qtbot, w)
    view.family.setCurrentIndex(view.family.findData("path"))
    titles = [m.title for m in view.maps]
    assert [t.split(" head's q")[0] for t in titles] == [f"Path from {sender} into each {k}" for k in
                                                         ("encoder self-attention", "decoder self-attention",
                                                          "cross-attention")]  # fmt: skip
    receivers, effects = path_sweep(view.made.pair, sender, "q")
    enc, dec, cross = view.maps
    assert np.isnan(enc.values).all()  # the encoder runs before a decoder head: no path
    assert np.isnan(dec.values[0]).all() and not np.isnan(dec.values[1]).any()  # layer 1: the sender's own
    want = {(r.attention, r.head): float(e) for r, e in zip(receivers, effects)}
    for layer in range(2):
        for head in range(4):
            assert cross.values[layer, head] == pytest.approx(want[(f"decoder.{layer}.cross_attn", head)], abs=1e-5)
    assert cross.values[1, 1] == pytest.approx(view.made.sweep.path.path, abs=1e-5)  # the one path, the same
    text = view.widgets[2].describe_cell(1, 1)
    assert text.startswith(f"Path {sender} → decoder layer 2 cross-attention head 2 q: effect")

    view.widgets[2].clicked.emit(1, 1)
    qtbot.waitUntil(lambda: view._replay is not None and view._replay.measured is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=WAIT_MS)
    assert [i.step for i in w.current_result().trace.interventions] == ["decoder.1.cross_attn.q"]
    assert view._replay.measured[1] == pytest.approx(float(cross.values[1, 1]), abs=1e-4)
    rows = list(csv.DictReader(io.StringIO(view.save_csv(tmp_path / "paths.csv").read_text(encoding="utf-8"))))
    paths = [r for r in rows if r["family"] == "path"]
    assert len(paths) == int((~np.isnan(np.concatenate([m.values.ravel() for m in view.maps]))).sum())
    assert rows[-1]["family"] == "metric"


def test_the_maps_export_as_png_svg_and_csv(qtbot, en_hi, tmp_path, monkeypatch):
    w = en_hi
    view = swept(qtbot, w)
    fig = current_figure(w)
    assert len(fig.heatmaps) == len(view.maps) == 3
    for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<?xm"), ("pdf", b"%PDF")):
        path = tmp_path / f"sweep.{fmt}"
        monkeypatch.setattr(actions, "ask_save_path", lambda *a, p=path: str(p))
        assert actions.handle(w, f"view_{fmt}") == path
        assert path.read_bytes()[:4] == magic
        assert render_bytes(fig, fmt)[:4] == magic
    monkeypatch.setattr(actions, "ask_save_path", lambda *a: str(tmp_path / "sweep.csv"))
    view.save_button.click()
    rows = list(csv.DictReader(io.StringIO((tmp_path / "sweep.csv").read_text(encoding="utf-8"))))
    sweep = view.made.sweep
    n = len(sweep.heads.components) + len(sweep.positions.components) + len(sweep.mlp.components)
    assert len(rows) == n + 1 and rows[-1]["family"] == "metric"
    heads = [float(r["effect"]) for r in rows if r["family"] == "head"]
    assert torch.allclose(torch.tensor(heads), sweep.heads.effects, atol=1e-5)


def test_a_decoder_only_models_cell_replays_as_its_patched_run(qtbot, make_window):
    """llama-tiny-random (GPT-2's tokens, random weights) reads the text itself: the corrupted text is the patched
    run's input."""
    w = make_window(source="When Mary and John went to the store, John gave a drink to", target="",
                    model="llama-tiny-random")
    run_and_wait(qtbot, w)
    view = show(w, PatchingView)
    view.controls.set_word(8, "Mary")  # the second "John"
    view.controls.per_position.setChecked(True)
    view.sweep()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert view.made is not None, view.status.text()
    hm = view.maps[0]
    row, col = np.unravel_index(np.nanargmax(np.abs(np.nan_to_num(hm.values))), hm.values.shape)
    assert abs(float(hm.values[row, col])) > 0.01
    view.widgets[0].clicked.emit(int(row), int(col))
    qtbot.waitUntil(lambda: view._replay is not None and view._replay.measured is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=WAIT_MS)
    result = w.current_result()
    assert result.request.source.endswith("store, Mary gave a drink to")
    assert torch.equal(result.inputs.tgt, view.made.corrupt.tgt)  # the patched run read the corrupted text
    assert torch.equal(w.current_trace()["tgt_embed.tokens"].tensor.cpu(), view.made.corrupt.tgt.cpu())
    assert view._replay.measured[1] == pytest.approx(float(hm.values[row, col]), abs=1e-4)


@pytest.fixture(scope="module")
def gpt2_shaped(tmp_path_factory):
    """A GPT-2-shaped folder as the issue's benchmark has it, 12 layers × 12 heads, made narrow (random weights)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from scratchformer.loading.tokenizers import gpt2_tokenizer

    directory = tmp_path_factory.mktemp("gpt2-shaped")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=32, n_embd=24, n_layer=12, n_head=12, initializer_range=0.3)
    GPT2LMHeadModel(config).save_pretrained(str(directory))
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    return str(directory)


def test_a_tall_map_keeps_its_rows_readable_and_scrolls(qtbot, make_window, gpt2_shaped):
    """Per-position heads of a 12 × 12 model: 144 rows, each at least MIN_ROW_PX high, in a scroll area."""
    from app.views.patching_view import MIN_ROW_PX

    w = make_window(source="When Mary and John went to the store, John gave a drink to", target="", model=gpt2_shaped)
    w.resize(1400, 900)
    run_and_wait(qtbot, w)
    view = show(w, PatchingView)
    view.controls.set_word(8, "Mary")
    view.controls.per_position.setChecked(True)
    view.sweep()
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert view.made is not None, view.status.text()
    qtbot.wait(50)
    heads = view.maps[0]
    assert heads.values.shape[0] == 144
    widget = view.widgets[0]
    assert widget.plot.getViewBox().height() >= 144 * MIN_ROW_PX  # the rows' own height, not the chrome's
    bar = view.scroll.verticalScrollBar()
    assert bar.maximum() > 0 and view.grid_host.height() > view.scroll.viewport().height()
    bar.setValue(bar.maximum())  # the bottom of the map can be reached
    qtbot.wait(20)
    bottom = widget.mapTo(view.scroll.viewport(), widget.rect().bottomLeft()).y()
    assert bottom <= view.scroll.viewport().height()
    # a map of a few rows (the residual stream) fits the view as before: no scrolling
    view.family.setCurrentIndex(view.family.findData("mlp"))
    qtbot.wait(50)
    assert view.maps[0].values.shape[0] == 12 and view.scroll.verticalScrollBar().maximum() == 0



def test_a_pairs_file_sweeps_every_pair_and_draws_the_mean_effects(qtbot, en_hi, tmp_path):
    """Patching › Pairs file…: every pair of a JSONL file swept off the UI thread; the maps are the core's mean
    effects over the pairs (scratchformer sweep --pairs), and a click replays the first pair's cell."""
    import json

    from scratchformer.analyses.sweep_pairs import sweep_pairs
    from scratchformer.datasets.pairs import read_pairs

    rows = [{"source": SOURCE, "corrupt": CORRUPT}, {"source": "the boy eats an apple", "corrupt_word": "1=girl"},
            {"source": "the girl reads a book", "corrupt_word": "1=boy"}]  # fmt: skip
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    view = show(en_hi, PatchingView)
    view.sweep_pairs_file(str(path))
    assert view.is_busy()  # the work runs in the background
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert view.made is not None and view.made.pairs == 3, view.status.text()
    assert "each of 3 pairs" in view.status.text()
    ref = sweep_pairs(en_hi.current_bundle(), read_pairs(path), start_only=True)
    for shown, made in zip(view.maps, head_maps(ref.mean)):
        np.testing.assert_allclose(shown.values, made.values, atol=1e-6)
    assert view.made.ask.source == SOURCE and view.made.text == CORRUPT  # a click replays the first pair
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "the girl eats an apple"}\n', encoding="utf-8")
    view.sweep_pairs_file(str(bad))
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=WAIT_MS)
    assert "line 1" in view.status.text() and "Traceback" not in view.status.text()
