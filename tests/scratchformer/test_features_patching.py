"""Patching features (issue 44): `sweep --dictionary DIR` sets each feature that differs between the clean and the
corrupted run to its clean value in the corrupted run, one at a time, and reports the sweep's effect for it."""

import json

import pytest
import torch

from scratchformer.cli import main
from scratchformer.features.attach import Clamp, traced
from scratchformer.features.bundled import bundled_saes, bundled_transcoders
from scratchformer.features.folder import load
from scratchformer.loading.bundle import load_model

SOURCE, CORRUPT = "the girl eats an apple", "the boy eats an apple"


@pytest.fixture(scope="module")
def swept():
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["sweep", "--model", "en-hi", "--source", SOURCE, "--corrupt-source", CORRUPT, "--target",
                     "लड़की सेब", "--dictionary", str(bundled_saes("en-hi")[0]), "--json"]) == 0  # fmt: skip
    return json.loads(out.getvalue())


def test_each_feature_row_is_the_corrupted_run_with_that_feature_clamped_to_its_clean_value(swept):
    rows = swept["features"]
    assert rows and [abs(r["effect"]) for r in rows] == sorted((abs(r["effect"]) for r in rows), reverse=True)
    bundle, d = load_model("en-hi"), load(bundled_saes("en-hi")[0])
    corrupt = bundle.prepare(CORRUPT, "लड़की सेब")
    metric = swept["metric"]
    answer, wrong = metric["answer"]["id"], metric["wrong"]["id"]

    def m(clamps):
        _, t = traced(bundle, corrupt, [d], clamps, keep_output=False)
        logits = t["generator.logits"].tensor[0, -1]
        return float(logits[answer] - logits[wrong])

    m_corrupt = m([])
    assert m_corrupt == pytest.approx(swept["corrupt"], abs=1e-4)
    for r in rows[:3]:
        assert r["corrupt"] != r["clean"]
        got = m([Clamp(r["step"], r["feature"], r["clean"], r["position"])])
        assert (got - swept["corrupt"]) / (swept["clean"] - swept["corrupt"]) == pytest.approx(r["effect"], abs=1e-4)
    assert max(abs(r["effect"]) for r in rows) > 0.05  # some feature carries the changed word


def test_a_pairs_files_feature_sweep_averages_each_pairs_feature_effects(tmp_path, capsys):
    rows = [{"source": SOURCE, "corrupt": CORRUPT}, {"source": "the boy eats an apple", "corrupt_word": "1=girl"}]
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    sae = str(bundled_saes("en-hi")[0])
    assert main(["sweep", "--model", "en-hi", "--pairs", str(f), "--start-only", "--dictionary", sae, "--json"]) == 0
    mean = {(r["feature"], r["position"]): r for r in json.loads(capsys.readouterr().out)["features"]}
    singles = []
    for r in rows:
        args = ["sweep", "--model", "en-hi", "--source", r["source"], "--start-only", "--dictionary", sae, "--json"]
        args += ["--corrupt-source", r["corrupt"]] if "corrupt" in r else ["--corrupt-word", r["corrupt_word"]]
        assert main(args) == 0
        singles.append({(x["feature"], x["position"]): x["effect"] for x in json.loads(capsys.readouterr().out)
                        ["features"]})  # fmt: skip
    assert set(mean) == set(singles[0]) | set(singles[1])
    for key, row in mean.items():
        each = [one.get(key, 0.0) for one in singles]  # a pair where the feature does not differ adds 0
        assert row["effect"] == pytest.approx(sum(each) / 2, abs=1e-6)
        assert row["std"] == pytest.approx(abs(each[0] - each[1]) / 2**0.5, abs=1e-6)
        assert row["pairs_differing"] == sum(1 for one in singles if key in one)


@pytest.fixture(scope="module")
def en_hi_bundle():
    return load_model("en-hi")


def _trace_patched(bundle, folder: str, steps: list[str], clamps: tuple = ()):
    """What `trace --dictionary FOLDER --patch STEP… --from-source CLEAN` runs on CORRUPT: (the clean trace, the
    patched trace), both with the dictionary attached, the clean one unchanged."""
    import argparse

    from scratchformer.commands.common import run_traced
    from scratchformer.commands.intervening import patches

    args = argparse.Namespace(patch=steps, from_source=SOURCE, from_target=None, dictionary=[folder],
                              clamp=list(clamps))  # fmt: skip
    inputs = bundle.prepare(CORRUPT, "लड़की सेब खाती है")
    given = patches(bundle, args, inputs)
    _, patched = run_traced(bundle, inputs, args, given, keep_output=False)
    _, clean = traced(bundle, bundle.prepare(SOURCE, "लड़की सेब खाती है"), [load(folder)], keep_output=False)
    _, corrupt = traced(bundle, inputs, [load(folder)], keep_output=False)
    return clean, corrupt, patched


def test_patching_a_dictionarys_steps_from_the_clean_run(en_hi_bundle):
    """--patch S.dict.features takes the clean run's features (S becomes y + (f_clean − f) W_dec); patching the
    reconstruction and the error together gives S the clean run's value itself, so everything after it is the
    clean run's."""
    folder = str(bundled_saes("en-hi")[0])
    point = "decoder.1.add_norm3.out"
    d = load(folder)
    clean, corrupt, patched = _trace_patched(en_hi_bundle, folder, [f"{point}.dict.features"])
    f_clean, f_corrupt = clean[f"{point}.dict.features"].tensor, corrupt[f"{point}.dict.features"].tensor
    assert not torch.equal(f_clean, f_corrupt)
    assert torch.equal(patched[f"{point}.dict.features"].tensor, f_clean)
    expected = corrupt[point].tensor + (f_clean - f_corrupt) @ d.W_dec
    assert torch.allclose(patched[point].tensor, expected, atol=1e-5)
    assert "features patched from" in patched[point].title
    # pre-activations give the same features as the features themselves
    _, _, by_pre = _trace_patched(en_hi_bundle, folder, [f"{point}.dict.pre"])
    assert torch.allclose(by_pre[point].tensor, patched[point].tensor, atol=1e-6)
    # x̂ and e together: S is the clean run's S, and so are the probabilities after it
    _, _, both = _trace_patched(en_hi_bundle, folder, [f"{point}.dict.recon", f"{point}.dict.error"])
    assert torch.allclose(both[point].tensor, clean[point].tensor, atol=1e-5)
    assert torch.allclose(both["generator.probs"].tensor, clean["generator.probs"].tensor, atol=1e-5)
    assert torch.allclose(both[f"{point}.dict.error"].tensor, clean[f"{point}.dict.error"].tensor, atol=1e-5)
    # the error alone: S = this run's x̂ + the clean run's e
    _, _, err = _trace_patched(en_hi_bundle, folder, [f"{point}.dict.error"])
    recon = corrupt[f"{point}.dict.recon"].tensor
    assert torch.allclose(err[point].tensor, recon + clean[f"{point}.dict.error"].tensor, atol=1e-5)


def test_patching_a_transcoders_features_moves_its_feed_forward_only(en_hi_bundle):
    folder = str(bundled_transcoders("en-hi") / "decoder.0.ffn.out")
    d = load(folder)
    at = d.info.at
    clean, corrupt, patched = _trace_patched(en_hi_bundle, folder, [f"{at}.dict.features"])
    ffn = "decoder.0.ffn.out"
    f_clean, f_corrupt = clean[f"{at}.dict.features"].tensor, corrupt[f"{at}.dict.features"].tensor
    assert not torch.equal(f_clean, f_corrupt)
    assert torch.equal(patched[at].tensor, corrupt[at].tensor)  # the step read is this run's
    expected = corrupt[ffn].tensor + (f_clean - f_corrupt) @ d.W_dec
    assert torch.allclose(patched[ffn].tensor, expected, atol=1e-5)


@pytest.mark.parametrize("steps, dictionary, expected", [
    (["decoder.1.add_norm3.out.dict.features"], False, "is a dictionary's step: patch it in `trace` with the "
                                                       "dictionary attached"),
    (["decoder.0.add_norm3.out.dict.features"], True, "no attached dictionary reads decoder.0.add_norm3.out"),
])  # fmt: skip
def test_patching_a_dictionary_step_without_its_dictionary_is_one_sentence(capsys, steps, dictionary, expected):
    extra = ["--dictionary", str(bundled_saes("en-hi")[0])] if dictionary else []
    code = main(["trace", "--model", "en-hi", "--source", CORRUPT, "--from-source", SOURCE, "--patch", steps[0],
                 *extra, "--json"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err and err.count("\n") == 1
