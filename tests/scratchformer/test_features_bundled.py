"""The dictionaries en-hi ships with (issue 44): an SAE of its last decoder layer's stream and a transcoder set,
trained (they explain the stream and keep the model's loss) and opening offline; models without any say so."""


from scratchformer.features.attach import traced
from scratchformer.features.bundled import bundled_saes, bundled_transcoders
from scratchformer.features.folder import load
from scratchformer.features.points import ffn_steps
from scratchformer.loading.bundle import load_model


def test_en_hi_ships_a_trained_sae_of_its_last_decoder_stream():
    (folder,) = bundled_saes("en-hi")
    d = load(folder)
    assert d.info.at == "decoder.1.add_norm3.out" and d.info.model == "en-hi" and d.architecture == "topk"
    assert d.info.trained["fvu"] < 0.1 and d.info.trained["ce_recovered"] > 0.95
    bundle = load_model("en-hi")
    _, trace = traced(bundle, bundle.prepare_run("the boy reads a book", ""), [d], keep_output=False)
    f = trace["decoder.1.add_norm3.out.dict.features"].tensor
    assert ((f > 0).sum(-1) == d.k).all()  # every token of the translation reads as k features
    x = trace["decoder.1.add_norm3.out"].tensor
    err = trace["decoder.1.add_norm3.out.dict.error"].tensor
    assert err.pow(2).sum() < 0.2 * (x - x.mean((0, 1))).pow(2).sum()  # it explains this new sentence too


def test_en_hi_ships_a_transcoder_for_every_feed_forward():
    folder = bundled_transcoders("en-hi")
    bundle = load_model("en-hi")
    assert sorted(p.name for p in folder.iterdir()) == sorted(ffn_steps(bundle.model))
    for p in folder.iterdir():
        t = load(p)
        assert t.transcoder and t.info.to == p.name and t.info.trained["fvu"] < 0.1


def test_other_models_ship_none():
    assert bundled_saes("llama-tiny") == [] and bundled_transcoders("reverse") is None
    assert bundled_saes("paper") == [] and bundled_saes("en-hi@step-000004") == bundled_saes("en-hi")


def test_cards_of_a_bundled_dictionary_are_cached_for_the_user_never_in_the_package(tmp_path, monkeypatch):
    from scratchformer.features.cards import cache_paths

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (folder,) = bundled_saes("en-hi")
    paths = cache_paths(folder, "task:en-hi", "en-hi", 100)
    assert paths and all(p.is_relative_to(tmp_path) for p in paths)
    own = cache_paths(tmp_path / "mine", "task:en-hi", "en-hi", 100)
    assert own[0].parent == tmp_path / "mine"  # a user's own dictionary keeps its cards beside it
