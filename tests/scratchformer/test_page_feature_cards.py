"""The interactive page carries the cards of the features it shows (issue 44): each token's strongest feature of an
attached dictionary, its density, top context and pushed-up tokens, in the index and in that step's explanation —
read in Chromium from the file alone."""

from __future__ import annotations

import pytest

from scratchformer.features.attach import traced
from scratchformer.features.bundled import bundled_saes
from scratchformer.features.cards import cards_for, strongest_per_token
from scratchformer.features.folder import load
from scratchformer.loading.bundle import load_model
from scratchformer.page import page_data, write_page
from tests.scratchformer.chromium import Browser, find_chromium

STEP = "decoder.1.add_norm3.out"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(cache))
    bundle = load_model("en-hi")
    folder = bundled_saes("en-hi")[0]
    d = load(folder)
    inputs = bundle.prepare_run("the girl eats an apple", "")
    _, trace = traced(bundle, inputs, [d], keep_output=False)
    cards = {STEP: cards_for(bundle, d, STEP, "task:en-hi", folder, max_inputs=200)}
    data = page_data(bundle, trace, inputs, cards=cards)
    yield trace, cards[STEP], data
    mp.undo()


def test_the_index_holds_the_cards_of_each_tokens_strongest_feature(made):
    trace, cardset, data = made
    entry = data["index"]["cards"][STEP]
    strongest = {t.features[0][0] for t in strongest_per_token(trace, STEP, 0, top=1) if t.features}
    assert set(map(int, entry["features"])) == strongest and entry["corpus"] == "task:en-hi"
    for f, compact in entry["features"].items():
        card = cardset.card(int(f))
        assert compact["density"] == pytest.approx(card.density, abs=1e-6)
        assert compact["contexts"][0]["tokens"] == card.contexts[0].tokens
        assert [t for t, _ in compact["up"]] == [t for t, _ in card.up[:5]]


def test_the_features_steps_explanation_says_what_each_shown_feature_fires_on(made, tmp_path):
    trace, cardset, data = made
    i = trace.index_of(f"{STEP}.dict.features")
    text = data["index"]["explain"][f"{i}/0"]["numbers"]
    f = strongest_per_token(trace, STEP, 0, top=1)[2].features[0][0]
    assert f"Feature {f} fires on {cardset.card(f).density:.2%}" in text and "pushes up" in text
    if find_chromium() is None:
        pytest.fail("Chromium is needed to read the page as a student does: scripts/setup.sh installs it.")
    path = tmp_path / "page.html"
    write_page(path, data)
    with Browser() as b:
        b.open(path)
        b.wait_for("document.body.dataset.ready === '1'", timeout=20)
        b.evaluate(f"document.querySelectorAll('#sf-steps li')[{i}].click()")
        b.wait_for(f"document.body.dataset.step === '{i}'")
        shown = b.evaluate("document.getElementById('sf-explain').textContent")
        assert f"Feature {f} fires on" in shown and not b.console and b.requests == []
