"""Sparse dictionaries (issue 44): the module's arithmetic, the folder (SAELens's layout), training on a bundled
model, and a dictionary attached to a run — its steps, derive of its cells, and clamping a feature."""

import json

import pytest
import torch

from scratchformer.analyses.derive import compute
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.features.attach import Attached, Clamp, parse_clamp, traced
from scratchformer.features.build import Request, check, train_dictionary
from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.folder import CFG, WEIGHTS, load, save
from scratchformer.features.points import ffn_input
from scratchformer.features.training import TrainSettings
from scratchformer.loading.bundle import load_model

POINT = "decoder.1.add_norm3.out"
SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def bundle():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def sae_dir(tmp_path_factory, bundle):
    """A small SAE of en-hi's last decoder stream, trained through the command line."""
    out = tmp_path_factory.mktemp("sae") / "d"
    assert main(["features", "train", "--model", "en-hi", "--at", POINT, "--corpus", "task:en-hi", "--out", str(out),
                 "--tokens", "6000", "--width", "64", "--k", "4", "--steps", "150", "--json", "--quiet"]) == 0
    return out


def random_dictionary(arch="topk", d_in=6, d_sae=10, k=3, kind="sae", d_out=None):
    torch.manual_seed(1)
    d = Dictionary(d_in, d_sae, arch, k, d_out, DictionaryInfo("a", "b" if kind == "transcoder" else "a", kind=kind))
    with torch.no_grad():
        for p in (d.W_enc, d.W_dec, d.b_enc, d.b_dec):
            p.copy_(torch.randn_like(p))
        d.threshold.copy_(torch.rand(d_sae) * 0.5)
    return d


# --- the module ---------------------------------------------------------------------------------------------------


def test_topk_keeps_each_tokens_k_largest_positive_preactivations():
    d = random_dictionary("topk", k=3)
    x = torch.randn(5, 7, 6)
    pre, f, recon = d(x)
    assert torch.allclose(pre, (x - d.b_dec) @ d.W_enc + d.b_enc)
    assert ((f > 0).sum(-1) <= 3).all() and (f >= 0).all()
    third = pre.topk(3, dim=-1).values[..., -1:]  # a kept value is at least the third largest
    assert torch.equal(f > 0, (pre >= third) & (pre > 0))
    assert torch.allclose(recon, f @ d.W_dec + d.b_dec)


def test_jumprelu_fires_above_each_features_threshold_and_a_transcoder_reads_x_uncentred():
    d = random_dictionary("jumprelu")
    x = torch.randn(4, 6)
    pre, f, _ = d(x)
    assert torch.equal(f, torch.where(pre > d.threshold, pre.relu(), torch.zeros_like(pre)))
    t = random_dictionary("standard", kind="transcoder", d_out=9)
    assert torch.allclose(t.pre(x), x @ t.W_enc + t.b_enc) and t.decode(t.encode(x)).shape == (4, 9)


def test_batchtopk_keeps_k_per_token_on_average_over_the_batch():
    d = random_dictionary("batchtopk", k=2)
    pre = d.pre(torch.randn(8, 6))
    f = d.activate(pre, batch_topk=True)
    assert int((f > 0).sum()) == 16  # k · tokens, wherever in the batch they fall
    assert not torch.equal((f > 0).sum(-1), torch.full((8,), 2))  # not two per token: the batch shares them


# --- the folder -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["topk", "jumprelu", "standard"])
def test_a_folder_round_trips_in_saelens_layout(tmp_path, arch):
    d = random_dictionary(arch)
    save(d, tmp_path / "d")
    cfg = json.loads((tmp_path / "d" / CFG).read_text())
    assert (cfg["d_in"], cfg["d_sae"], cfg["architecture"], cfg["hook_name"]) == (6, 10, arch, "a")
    assert cfg["apply_b_dec_to_input"] is True and cfg["metadata"]["hook_name"] == "a"
    assert cfg["scratchformer"]["at"] == "a" and (cfg.get("k") == 3) == (arch == "topk")
    from safetensors.torch import load_file

    weights = load_file(str(tmp_path / "d" / WEIGHTS))
    assert weights["W_enc"].shape == (6, 10) and weights["W_dec"].shape == (10, 6)
    assert ("threshold" in weights) == (arch == "jumprelu")
    back = load(tmp_path / "d")
    x = torch.randn(3, 6)
    assert torch.equal(back.encode(x), d.encode(x)) and back.architecture == arch


def test_a_batchtopk_dictionary_is_stored_as_the_jumprelu_it_runs_as(tmp_path):
    d = random_dictionary("batchtopk")
    save(d, tmp_path / "d")
    assert json.loads((tmp_path / "d" / CFG).read_text())["architecture"] == "jumprelu"
    x = torch.randn(5, 6)
    assert torch.equal(load(tmp_path / "d").encode(x), d.encode(x))


def test_a_transcoder_is_stored_as_saelens_names_it(tmp_path):
    d = random_dictionary("batchtopk", kind="transcoder", d_out=6)
    save(d, tmp_path / "t")
    cfg = json.loads((tmp_path / "t" / CFG).read_text())
    assert cfg["architecture"] == "jumprelu_transcoder" and cfg["apply_b_dec_to_input"] is False
    assert cfg["metadata"]["hook_name_out"] == "b" and cfg["d_out"] == 6
    back = load(tmp_path / "t")
    assert back.transcoder and back.info.to == "b"


def test_unknown_cfg_fields_of_another_version_are_ignored(tmp_path):
    save(random_dictionary(), tmp_path / "d")
    cfg = json.loads((tmp_path / "d" / CFG).read_text())
    cfg |= {"some_future_field": [1, 2], "normalize_activations": "none"}
    (tmp_path / "d" / CFG).write_text(json.dumps(cfg))
    assert load(tmp_path / "d").d_sae == 10


@pytest.mark.parametrize("damage, words", [
    (lambda p: None, "does not exist"),
    (lambda p: p.write_text("x"), "is a file"),
    (lambda p: (p.mkdir(), (p / CFG).write_text("{}")), f"holds no {WEIGHTS}"),
    (lambda p: (p.mkdir(), (p / CFG).write_text("{nope"), (p / WEIGHTS).write_bytes(b"x")), "not valid JSON"),
    (lambda p: (p.mkdir(), (p / CFG).write_text("{}"), (p / WEIGHTS).write_bytes(b"\x00" * 40)), "safetensors"),
])  # fmt: skip
def test_a_folder_that_is_not_a_dictionary_is_one_sentence(tmp_path, damage, words):
    damage(tmp_path / "d")
    with pytest.raises(UserError, match=words):
        load(tmp_path / "d")


def test_an_architecture_scratchformer_cannot_run_is_named(tmp_path):
    save(random_dictionary(), tmp_path / "d")
    cfg = json.loads((tmp_path / "d" / CFG).read_text()) | {"architecture": "gated"}
    (tmp_path / "d" / CFG).write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="'gated' is not one scratchformer runs"):
        load(tmp_path / "d")


# --- training ---------------------------------------------------------------------------------------------------


def test_training_reports_the_fields_figures_and_learns(sae_dir, bundle):
    d = load(sae_dir)
    figures = d.info.trained
    assert set(figures) >= {"fvu", "l0", "dead", "dense", "ce_recovered", "tokens", "seconds"}
    assert figures["tokens"] == 6000 and figures["l0"] <= 4.0 + 1e-6
    # a trained dictionary explains most of the stream; the same dictionary untrained explains little of it
    assert figures["fvu"] < 0.5 and figures["ce_recovered"] > 0.5
    from scratchformer.features.activations import corpus_texts, gather
    from scratchformer.features.quality import reconstruction

    x = gather(bundle, corpus_texts("task:en-hi", 300)[-100:], [POINT], 2**30)[POINT]
    assert reconstruction(d, x)["fvu"] == pytest.approx(figures["fvu"], abs=0.15)
    fresh = Dictionary(d.d_in, d.d_sae, "topk", d.k)
    assert reconstruction(fresh, x)["fvu"] > 2 * figures["fvu"]


def test_cancelling_training_keeps_the_last_checkpoint(tmp_path, bundle):
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) > 30  # past the activations (one call a batch of 128), a few steps into training

    settings = TrainSettings(steps=500, checkpoint_every=10)
    from scratchformer.features.activations import corpus_texts

    figures = train_dictionary(bundle, Request(POINT, width=32, k=4, tokens=2000), corpus_texts("task:en-hi", 400),
                               tmp_path / "d", settings, 2**30, cancelled=cancelled)  # fmt: skip
    assert figures is None or figures.get("cancelled") is True
    assert load(tmp_path / "d").d_sae == 32


@pytest.mark.parametrize("argv, words", [
    (["--at", "decoder.9.add_norm3.out"], "not a step a dictionary can read"),
    (["--at", POINT, "--to", "decoder.1.ffn.out"], "--to is a transcoder's target"),
    (["--at", POINT, "--k", "99", "--width", "16"], "more than the dictionary's 16 features"),
    (["--at", POINT, "--width", "900000000"], "GiB"),
    (["--at", POINT, "--kind", "transcoder"], "give --to"),
    (["--at", POINT, "--corpus", "task:nope"], "no bundled task 'nope'"),
    (["--every-layer"], "--every-layer trains transcoders"),
])  # fmt: skip
def test_bad_training_requests_are_one_sentence(tmp_path, capsys, argv, words):
    corpus = [] if "--corpus" in argv else ["--corpus", "task:en-hi"]
    assert main(["features", "train", "--model", "en-hi", *argv, *corpus, "--out", str(tmp_path / "d"),
                 "--tokens", "100"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert words in err and err.count("\n") == 0 and "Traceback" not in err


def test_a_feed_forwards_input_is_the_step_it_reads_in_each_layout():
    en_hi = load_model("en-hi").model  # post-LN: the Add & Norm before the feed-forward
    assert ffn_input(en_hi, "decoder.1.ffn.out") == "decoder.1.add_norm2.out"
    assert ffn_input(en_hi, "encoder.0.ffn.out") == "encoder.0.add_norm1.out"
    llama = load_model("llama-tiny-random").model  # pre-LN: the norm in front of it, now a readable point
    assert ffn_input(llama, "decoder.0.ffn.out") == "decoder.0.add_norm3.norm"
    assert check(load_model("llama-tiny-random"), Request("decoder.0.add_norm3.norm", "decoder.0.ffn.out",
                                                          "transcoder")).architecture == "batchtopk"


# --- attached to a run ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(bundle, sae_dir):
    inputs = bundle.prepare_run(SOURCE, "")
    _, plain = bundle.run(inputs, keep_output=False)
    d = load(sae_dir)
    _, with_d = traced(bundle, inputs, [d], keep_output=False)
    return inputs, plain, with_d, d


def test_the_dictionarys_steps_follow_the_step_it_reads(runs):
    _, plain, t, d = runs
    names = t.names()
    i = names.index(POINT)
    assert names[i + 1 : i + 5] == [f"{POINT}.dict.{s}" for s in ("pre", "features", "recon", "error")]
    f = t[f"{POINT}.dict.features"]
    assert f.kind == "features" and f.dims == ("batch", "tgt_pos", "feature") and f.shape[-1] == d.d_sae
    assert t[f"{POINT}.dict.error"].dims == ("batch", "tgt_pos", "d_model")
    x = t[POINT].tensor
    assert torch.allclose(t[f"{POINT}.dict.recon"].tensor + t[f"{POINT}.dict.error"].tensor, x, atol=1e-6)
    assert torch.equal(t["generator.probs"].tensor, plain["generator.probs"].tensor)  # the pass is unchanged
    assert [n for n in names if ".dict." not in n] == plain.names()


def test_derive_recomputes_every_kind_of_dictionary_cell(bundle, runs):
    _, _, t, _ = runs
    f = t[f"{POINT}.dict.features"].tensor[0, 2]
    on, off = int(f.argmax()), int(f.argmin())
    for step, index in ((f"{POINT}.dict.pre", (0, 2, on)), (f"{POINT}.dict.features", (0, 2, on)),
                        (f"{POINT}.dict.features", (0, 2, off)), (f"{POINT}.dict.recon", (0, 2, 7)),
                        (f"{POINT}.dict.error", (0, 2, 7))):  # fmt: skip
        got = compute(bundle, t, step, index)
        assert got.agrees(), (step, got.value, got.recomputed)
    assert "cut to 0" in compute(bundle, t, f"{POINT}.dict.features", (0, 2, off)).note
    # the dictionary's weights are listed among the inputs by their own indices, so a click finds the right entry
    d = t.dictionaries[POINT][0]
    for step, index, name, weights in ((f"{POINT}.dict.pre", (0, 2, on), "W_enc", d.W_enc),
                                       (f"{POINT}.dict.recon", (0, 2, 7), "W_dec", d.W_dec)):  # fmt: skip
        cells = [c for c in compute(bundle, t, step, index).inputs if c.param == f"{POINT}.dict.{name}"]
        assert cells and all(c.value == pytest.approx(float(weights[c.index])) for c in cells)
        assert {c.index[1] for c in cells} == ({on} if name == "W_enc" else {7})  # W_enc[:, i], W_dec[i, u]


def test_clamping_a_feature_to_its_own_value_changes_nothing_and_to_zero_moves_the_stream_by_its_direction(
        bundle, runs):  # fmt: skip
    inputs, _, t, d = runs
    f = t[f"{POINT}.dict.features"].tensor
    top = int(f[0, 2].argmax())
    value = float(f[0, 2, top])
    _, same = traced(bundle, inputs, [d], [Clamp(POINT, top, value, 2)], keep_output=False)
    assert torch.equal(same["generator.probs"].tensor, t["generator.probs"].tensor)
    _, zero = traced(bundle, inputs, [d], [Clamp(POINT, top, 0.0, 2)], keep_output=False)
    moved = zero[POINT].tensor - t[POINT].tensor
    assert torch.allclose(moved[0, 2], -value * d.W_dec[top], atol=1e-5)
    assert moved[0, :2].abs().max() == 0 and "feature" in zero[POINT].title and "clamped to 0" in zero[POINT].title
    assert zero[f"{POINT}.dict.features"].tensor[0, 2, top] == 0
    assert torch.allclose(zero[f"{POINT}.dict.error"].tensor, t[f"{POINT}.dict.error"].tensor, atol=1e-6)
    assert not torch.equal(zero["generator.probs"].tensor, t["generator.probs"].tensor)


def test_bad_attachments_and_clamps_are_one_sentence(bundle, sae_dir, tmp_path):
    d = load(sae_dir)
    with pytest.raises(UserError, match="trained on another model"):
        Attached(load_model("llama-tiny-random").model, [Dictionary(32, 8, info=DictionaryInfo("decoder.0.ffn.out",
                                                                                             "decoder.0.ffn.out"))])
    with pytest.raises(UserError, match="features 0 to 63"):
        Attached(bundle.model, [d], [Clamp(POINT, 64, 1.0)])
    with pytest.raises(UserError, match="no attached dictionary reads"):
        Attached(bundle.model, [d], [Clamp("decoder.0.add_norm3.out", 1, 1.0)])
    with pytest.raises(UserError, match="STEP:FEATURE=VALUE"):
        parse_clamp("decoder.1.add_norm3.out=3")
    assert parse_clamp(f"{POINT}:5=-2.5@3") == Clamp(POINT, 5, -2.5, 3)


def test_the_command_line_and_python_attach_the_same_steps(sae_dir, capsys):
    import scratchformer as sf

    run = sf.run("en-hi", SOURCE, dictionaries=[str(sae_dir)])
    assert f"{POINT}.dict.features" in run
    assert main(["trace", "--model", "en-hi", "--source", SOURCE, "--dictionary", str(sae_dir), "--json"]) == 0
    names = [s["name"] for s in json.loads(capsys.readouterr().out)["steps"]]
    assert names == list(run)
    assert main(["derive", "--model", "en-hi", "--source", SOURCE, "--dictionary", str(sae_dir), "--json",
                 f"{POINT}.dict.features", "0", "1", "0"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["step"] == f"{POINT}.dict.features"
    assert main(["trace", "--model", "en-hi", "--source", SOURCE, "--clamp", f"{POINT}:1=0"]) == 2
    assert "attach the dictionary" in capsys.readouterr().err


def test_the_lens_reads_an_saes_reconstruction_right_after_its_point(bundle, runs):
    from scratchformer.analyses import lens

    _, plain, t, _ = runs
    got = lens.compute(bundle, t)
    i = got.steps.index(POINT)
    assert got.steps[i + 1] == f"{POINT}.dict.recon" and got.labels[i + 1].endswith("(SAE reconstruction)")
    assert len(got.steps) == len(lens.compute(bundle, plain).steps) + 1
    logp = lens.read_out(bundle.model, t[f"{POINT}.dict.recon"].item(0))  # (T, vocab)
    assert torch.allclose(got.top_probs[i + 1, :, 0], logp.max(-1).values.exp().cpu(), atol=1e-6)
