"""Feature cards recomputed from the model: a card's top context carries the activations a traced run with the
dictionary attached records on that input, its density is the share of the corpus's tokens where the feature
fires, its pushed tokens are the generator's own logit change along W_dec[i]; the card set is read back from its
cache while the weights are unchanged and made again when they change; the per-token table has one row per
token; a folder that is no dictionary, or one of another width, is one sentence."""

from __future__ import annotations

import csv
import io

import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.features import cards as cards_module
from scratchformer.features.activations import corpus_texts
from scratchformer.features.attach import attached
from scratchformer.features.cards import cards_for, compute_cards, direct_effect, strongest_per_token
from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.folder import load, save
from scratchformer.loading.bundle import load_model

STEP = "decoder.1.add_norm3.out"
CORPUS = "task:en-hi"
N_INPUTS = 24


def random_dictionary(d_in: int = 128, width: int = 48, seed: int = 0) -> Dictionary:
    """A TopK SAE with Gao et al.'s initialisation (unit decoder rows, encoder = their transpose): every token fires
    k features, so each card has contexts to check."""
    d = Dictionary(d_in, width, "topk", 4, info=DictionaryInfo(STEP, STEP, "en-hi"))
    d.reset_parameters(torch.Generator().manual_seed(seed))
    with torch.no_grad():
        d.b_enc.normal_(0, 0.05, generator=torch.Generator().manual_seed(seed + 1))
    return d


@pytest.fixture(scope="module")
def bundle():
    return load_model("en-hi", "cpu")


@pytest.fixture(scope="module")
def made(bundle):
    d = random_dictionary()
    texts = corpus_texts(CORPUS, N_INPUTS)
    return d, texts, compute_cards(bundle, d, STEP, texts, CORPUS)


def traced(bundle, d, text):
    inputs = bundle.prepare_run(text.source, text.target)
    with attached(bundle.model, [d]):
        _, trace = bundle.run(inputs, keep_output=False)
    return trace


def test_top_context_equals_the_traced_features_on_that_input(bundle, made):
    d, texts, cards = made
    checked = 0
    for feature in (0, 7, 23):
        card = cards.card(feature)
        assert card.contexts, f"feature {feature} never fired"
        top = card.contexts[0]
        f = traced(bundle, d, texts[top.input])[f"{STEP}.dict.features"].tensor[0, :, feature]  # (T,)
        assert len(top.acts) == f.shape[0]
        torch.testing.assert_close(torch.tensor(top.acts), f.float(), atol=1e-5, rtol=1e-5)
        assert top.top == pytest.approx(card.max_act)  # the strongest context holds the largest value
        checked += 1
    assert checked == 3


def test_density_is_the_share_of_firing_tokens(bundle, made):
    d, texts, cards = made
    fired = torch.zeros(d.d_sae)
    tokens = 0
    for text in texts:
        f = traced(bundle, d, text)[f"{STEP}.dict.features"].tensor[0]  # (T, d_sae)
        fired += (f > 0).sum(0).float()
        tokens += f.shape[0]
    assert cards.tokens == tokens
    for i in range(d.d_sae):
        assert cards.card(i).fired == int(fired[i])
        assert cards.card(i).density == pytest.approx(float(fired[i]) / tokens)
        assert sum(cards.card(i).hist_counts) == int(fired[i])  # the histogram counts every non-zero value


def test_pushed_tokens_are_the_generators_own_logit_change(bundle, made):
    d, _texts, cards = made
    gen = bundle.model.generator
    x = torch.randn(1, 1, bundle.config.d_model)
    with torch.no_grad():
        change = (gen.logits(x + d.W_dec[5]) - gen.logits(x))[0, 0]  # (vocab,)
    want = change.topk(3)
    card = cards.card(5)
    names = bundle.tgt_tokenizer.token_strings(want.indices.tolist())
    assert [t for t, _ in card.up[:3]] == names
    assert [v for _, v in card.up[:3]] == pytest.approx(want.values.tolist(), abs=1e-4)
    assert card.down[0][1] == pytest.approx(float(change.min()), abs=1e-4)
    assert "straight into the generator" in cards.effect_note  # the last layer of a post-LN model
    _, note = direct_effect(bundle, d, "decoder.0.add_norm3.out")
    assert note.startswith("Direct path only")


def test_cards_are_cached_and_made_again_when_the_weights_change(bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = save(random_dictionary(seed=3), tmp_path / "dict")
    calls = []
    real = cards_module.compute_cards

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cards_module, "compute_cards", counting)
    first = cards_for(bundle, load(folder), STEP, CORPUS, folder, max_inputs=8)
    assert len(calls) == 1 and list(folder.glob("cards-*.json"))
    again = cards_for(bundle, load(folder), STEP, CORPUS, folder, max_inputs=8)
    assert len(calls) == 1  # read back: no pass over the corpus
    assert again.card(3).fired == first.card(3).fired
    assert again.card(3).contexts[0].acts == first.card(3).contexts[0].acts
    save(random_dictionary(seed=4), folder)  # retrained: other weights in the same folder
    changed = cards_for(bundle, load(folder), STEP, CORPUS, folder, max_inputs=8)
    assert len(calls) == 2 and changed.weights != first.weights
    cards_for(bundle, load(folder), STEP, "task:copy", folder, max_inputs=8)  # another corpus: another file
    assert len(calls) == 3 and len(list(folder.glob("cards-*.json"))) == 2


def test_strongest_per_token_and_its_csv(bundle, made):
    from scratchformer.exporting.feature_table import token_features_csv

    d, texts, _cards = made
    trace = traced(bundle, d, texts[0])
    rows = strongest_per_token(trace, STEP, 0, top=3)
    f = trace[f"{STEP}.dict.features"].tensor[0]  # (T, d_sae)
    assert len(rows) == f.shape[0] == len(trace.target_tokens[0])
    for r in rows:
        assert r.features[0] == (int(f[r.position].argmax()), pytest.approx(float(f[r.position].max())))
    table = list(csv.reader(io.StringIO(token_features_csv(rows))))
    assert table[0][:4] == ["position", "token", "feature_1", "activation_1"]
    assert len(table) == 1 + f.shape[0]  # one row per token
    assert [row[1] for row in table[1:]] == list(trace.target_tokens[0])
    with pytest.raises(UserError, match="no dictionary on decoder.0"):
        strongest_per_token(trace, "decoder.0.add_norm3.out")


def test_bad_folders_are_one_sentence(bundle, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("hello")
    with pytest.raises(UserError, match="holds no cfg.json"):
        load(tmp_path / "notes")
    narrow = Dictionary(64, 32, "topk", 4, info=DictionaryInfo(STEP, STEP, "other"))
    with pytest.raises(UserError, match="vectors of 64 numbers"):
        with attached(bundle.model, [narrow]):
            pass
    with pytest.raises(UserError, match="corpus is empty"):
        compute_cards(bundle, random_dictionary(), STEP, [], CORPUS)
