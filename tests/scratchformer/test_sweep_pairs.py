"""`scratchformer sweep --pairs FILE`: each effect the mean over pairs of what one-pair sweeps give, its std, the
per-pair effects, several pairs' patched runs in one pass equal to each pair's own, and every refusal one sentence
(exit status 2)."""

from __future__ import annotations

import json

import pytest
import torch

from scratchformer.analyses import sweep, sweep_pairs
from scratchformer.cli import main
from scratchformer.datasets.pairs import read_pairs
from scratchformer.loading.bundle import load_model
from scratchformer.patching import components
from scratchformer.patching.batched import patched_metrics
from scratchformer.patching.many import patched_metrics_many
from scratchformer.patching.pair import make_pair
from tests.scratchformer.test_derive import FAMILIES, family_bundle
from tests.scratchformer.test_sweep_values import gpt2_folder  # noqa: F401 - a GPT-2 folder fixture

PAIRS = [  # the same token lengths: six source tokens each; --start-only: the decoder reads the start token
    {"source": "the girl eats an apple", "corrupt_word": "1=boy"},
    {"source": "the boy eats an apple", "corrupt": "the girl eats an apple"},
    {"source": "the boy eats a mango", "corrupt_word": "1=girl", "template": "names"},
    {"source": "the girl drinks the water", "corrupt_word": "1=boy"},
]


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def write(path, records) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def single(bundle, source: str, corrupt: str, method: str = "exact") -> dict:
    clean = bundle.prepare_run(source, "", start_only=True)
    return sweep.compute(bundle, clean, bundle.prepare(corrupt), method=method).to_dict()


def effects(d: dict, key: str = "effect") -> torch.Tensor:
    return torch.tensor([row[key] for fam in ("heads", "positions", "mlp") for row in d[fam]], dtype=torch.float64)


def test_the_mean_and_std_are_those_of_single_pair_sweeps_run_one_by_one(tmp_path, capsys, en_hi):
    f = write(tmp_path / "p.jsonl", PAIRS)
    assert main(["sweep", "--model", "en-hi", "--pairs", f, "--start-only", "--per-pair", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    specs = read_pairs(f)
    singles = [single(en_hi, s.source, s.corrupt) for s in specs]
    each = torch.stack([effects(d) for d in singles])  # (P, n)
    assert out["pairs"] == len(PAIRS)
    assert float((effects(out) - each.mean(0)).abs().max()) < 1e-5
    assert float((effects(out, "std") - each.std(0)).abs().max()) < 1e-5  # the sample std (n − 1)
    assert out["clean"] == pytest.approx(sum(d["clean"] for d in singles) / len(singles), abs=1e-5)
    assert out["corrupt"] == pytest.approx(sum(d["corrupt"] for d in singles) / len(singles), abs=1e-5)
    # the single-pair JSON's rows, with std beside each effect
    first = singles[0]
    for fam in ("heads", "positions", "mlp"):
        assert [{k: v for k, v in r.items() if k not in ("effect", "std")} for r in out[fam]] == \
               [{k: v for k, v in r.items() if k != "effect"} for r in first[fam]]  # fmt: skip
    for j, (row, d) in enumerate(zip(out["per_pair"], singles)):
        assert row["line"] == j + 1 and row["source"] == specs[j].source and row["corrupt_source"] == specs[j].corrupt
        assert float((torch.tensor(row["effects"], dtype=torch.float64) - effects(d)).abs().max()) < 1e-5
        assert row["answer"] == d["metric"]["answer"] and row["wrong"] == d["metric"]["wrong"]
        assert row["clean"] == pytest.approx(d["clean"], abs=1e-5)
    # the girl/boy pairs put different answers first: the metric says each pair has its own
    assert out["metric"]["answer"].startswith("each pair's own")
    # a real effect: the corrupted word's embedding restores each pair's clean answer
    embed = next(r for r in out["positions"] if r["step"] == "src_embed.sum" and r["position"] == 1)
    assert embed["effect"] == pytest.approx(1.0, abs=1e-5) and embed["std"] == pytest.approx(0.0, abs=1e-5)


def test_attribution_estimates_average_too_and_without_per_pair_there_is_no_per_pair(tmp_path, en_hi):
    specs = read_pairs(write(tmp_path / "p.jsonl", PAIRS[:2]))
    result = sweep_pairs.sweep_pairs(en_hi, specs, method="both", start_only=True)
    d = result.to_dict()
    assert "per_pair" not in d and d["method"] == "both"
    singles = [single(en_hi, s.source, s.corrupt, "both") for s in specs]
    mean_est = torch.stack([effects(s, "estimate") for s in singles]).mean(0)
    assert float((effects(d, "estimate") - mean_est).abs().max()) < 1e-5
    assert all("estimate_std" in r and "disagree" in r for r in d["heads"])


@pytest.mark.parametrize("family", ["gpt2_like", "qwen_like"])
def test_several_pairs_in_one_pass_equal_each_pair_alone(en_hi, family):
    """Decoder-only: the corrupted token at different positions, so one pass mixes items that start late (the KV
    cache of the corrupted run) with items that start early, and pairs with different answers."""
    bundle = family_bundle(en_hi, FAMILIES[family])
    texts = [("लड़का सेब खाता है", "लड़की सेब खाता है"), ("लड़का सेब खाता है", "लड़का आम खाता है"),
             ("लड़की पानी पीती है", "लड़की पानी पीता है")]  # fmt: skip
    pairs = [make_pair(bundle, bundle.prepare(a), bundle.prepare(b)) for a, b in texts]
    t = pairs[0].n_positions("tgt")
    every = (components.head_components(bundle.model, t, 0, True) + components.residual_components(bundle.model, t, 0)
             + components.mlp_components(bundle.model, t, 0))  # fmt: skip
    together = patched_metrics_many(pairs, every)
    assert len({p.metric.answer for p in pairs}) > 1 or len({p.metric.wrong for p in pairs}) > 1
    for j, p in enumerate(pairs):
        alone = patched_metrics(p, every)
        assert float((together[j] - alone).abs().max()) < 1e-5
        assert not torch.equal(alone, torch.full_like(alone, p.m_corrupt))  # patches that change something


def test_each_bad_input_is_one_sentence(tmp_path, capsys):
    def refused(*argv) -> str:
        assert main(["sweep", "--model", "en-hi", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("scratchformer: ") and "\n" not in err
        return err

    good = write(tmp_path / "good.jsonl", PAIRS[:2])
    longer = write(tmp_path / "longer.jsonl", [*PAIRS[:2], {"source": "the girl eats a red apple",
                                                            "corrupt_word": "1=boy"}])  # fmt: skip
    err = refused("--pairs", longer, "--start-only")
    assert "pair on line 3 has 7 source and 1 decoder tokens and the first pair (line 1) 6 source" in err
    uneven = write(tmp_path / "uneven.jsonl", [PAIRS[0], {"source": "the girl eats an apple",
                                                          "corrupt": "the girl eats a red apple"}])  # fmt: skip
    assert "pair on line 2: The corrupted source has 7 tokens" in refused("--pairs", uneven, "--start-only")
    odd = write(tmp_path / "a.jsonl", [PAIRS[0], {**PAIRS[1], "answer": "zzzqqq"}])
    assert "pair on line 2: --answer 'zzzqqq' is not in this model's vocabulary" in refused(
        "--pairs", odd, "--start-only"
    )
    assert "drop --source, --corrupt-word" in refused("--pairs", good, "--source", "a b", "--corrupt-word", "0=c")
    assert "add --pairs FILE" in refused("--source", "the girl eats an apple", "--corrupt-word", "1=boy",
                                         "--per-pair")  # fmt: skip
    assert "does not exist" in refused("--pairs", str(tmp_path / "missing.jsonl"))
    assert "line 2: each line must be one JSON object" in refused(
        "--pairs", str(_text(tmp_path / "bad.jsonl", '{"source": "a", "corrupt": "b"}\n[1]\n')))  # fmt: skip


def _text(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_sf_sweep_pairs_returns_what_the_command_prints(tmp_path, capsys):
    import scratchformer as sf

    f = write(tmp_path / "p.jsonl", PAIRS[:2])
    got = sf.sweep_pairs("en-hi", f, start_only=True, per_pair=True)
    assert main(["sweep", "--model", "en-hi", "--pairs", f, "--start-only", "--per-pair", "--json"]) == 0
    assert got == json.loads(capsys.readouterr().out)


def test_a_gpt2_pairs_file_keeps_the_answers_leading_space(tmp_path, gpt2_folder):  # noqa: F811 - the fixture
    """GPT-2's ' Mary' (with its space) and 'Mary' are two tokens: the pairs file's answer and wrong tokens reach
    the metric as written, so the mean is the effect on logit(' Mary') − logit(' John') that the file asks for."""
    pair = {"source": "When Mary and John went to the store, John gave a drink to",
            "corrupt": "When Mary and John went to the store, Mary gave a drink to"}  # fmt: skip
    path = write(tmp_path / "ioi.jsonl", [{**pair, "answer": " Mary", "wrong": " John"}])
    result = sweep_pairs.sweep_pairs(gpt2_folder, read_pairs(path)).to_dict(per_pair=True)
    tok = gpt2_folder.tgt_tokenizer
    row = result["per_pair"][0]
    assert (row["answer"]["id"], row["wrong"]["id"]) == (tok.encode(" Mary")[0], tok.encode(" John")[0])
    assert tok.encode(" Mary") != tok.encode("Mary")
    # the same numbers as the one-pair sweep given --answer ' Mary' --wrong ' John'
    one = make_pair(gpt2_folder, gpt2_folder.prepare_run(pair["source"]), gpt2_folder.prepare(pair["corrupt"]),
                    " Mary", " John")  # fmt: skip
    assert row["clean"] == pytest.approx(one.m_clean) and row["corrupt"] == pytest.approx(one.m_corrupt)
