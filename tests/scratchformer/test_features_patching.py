"""Patching features (issue 44): `sweep --dictionary DIR` sets each feature that differs between the clean and the
corrupted run to its clean value in the corrupted run, one at a time, and reports the sweep's effect for it."""

import json

import pytest

from scratchformer.cli import main
from scratchformer.features.attach import Clamp, traced
from scratchformer.features.bundled import bundled_saes
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
