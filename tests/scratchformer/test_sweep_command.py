"""`scratchformer sweep`: its JSON as DESIGN.md defines it (and equal to compute()'s), each refusal one sentence,
and the plot data the window and the exports draw (maps per attention type, points × positions, CSV, the
explanation in this run's numbers)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from scratchformer.analyses import sweep
from scratchformer.cli import main
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint
from scratchformer.plotdata.sweep import explanation, head_maps, point_maps, sweep_csv
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the girl eats an apple"
COMMON = ["--model", "en-hi", "--source", SOURCE, "--corrupt-word", "1=boy", "--start-only"]


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def result(en_hi):
    clean, corrupt = en_hi.prepare_run(SOURCE, start_only=True), en_hi.prepare("the boy eats an apple")
    return sweep.compute(en_hi, clean, corrupt, method="both")


def run_json(capsys, *argv) -> dict:
    assert main(["sweep", *COMMON, *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_json_has_the_designed_shape_and_equals_compute(capsys, en_hi, result):
    out = run_json(capsys, "--method", "both")
    assert out == json.loads(json.dumps(result.to_dict(), ensure_ascii=False))
    c = en_hi.config
    assert out["metric"]["kind"] == "logit-diff" and set(out["metric"]["answer"]) == {"id", "token"}
    assert out["clean"] > out["corrupt"]  # the clean answer's logit difference is the clean run's to win
    heads = out["heads"]
    assert len(heads) == c.n_heads * (c.n_encoder_layers + 2 * c.n_decoder_layers)
    assert {h["attention"] for h in heads} == {"encoder.0.self_attn", "encoder.1.self_attn", "decoder.0.self_attn",
                                               "decoder.0.cross_attn", "decoder.1.self_attn", "decoder.1.cross_attn"}
    assert all(set(h) == {"attention", "layer", "head", "position", "effect", "estimate", "disagree"}
               and h["position"] is None for h in heads)  # fmt: skip
    n_src, n_tgt = 6, 1  # 'the girl eats an apple </s>'; the start token alone
    assert len(out["positions"]) == (1 + 2 * c.n_encoder_layers) * n_src + (1 + 3 * c.n_decoder_layers) * n_tgt
    assert len(out["mlp"]) == c.n_encoder_layers * n_src + c.n_decoder_layers * n_tgt
    assert all(set(p) >= {"step", "position", "effect"} for p in out["positions"] + out["mlp"])
    assert out["disagree_threshold"] == 0.1
    # the corrupted word's embedding carries everything the source changed
    embed = next(p for p in out["positions"] if p["step"] == "src_embed.sum" and p["position"] == 1)
    assert embed["effect"] == pytest.approx(1.0, abs=1e-5)


def test_per_position_attribution_path_and_check(capsys, en_hi):
    out = run_json(capsys, "--per-position", "--method", "attribution", "--check-top", "3", "--path",
                   "encoder.0.self_attn.head2", "decoder.1.cross_attn.head0.k")  # fmt: skip
    assert out["method"] == "attribution"
    assert {h["position"] for h in out["heads"] if h["attention"].startswith("encoder")} == set(range(6))
    assert len(out["checked"]) == 3 and all(set(c) >= {"component", "estimate", "effect"} for c in out["checked"])
    path = out["path"]
    assert set(path) == {"sender", "receiver", "possible", "effect", "direct_effect", "total_effect", "m_patched"}
    assert path["possible"] and path["direct_effect"] == 0.0  # an encoder head reaches the logits through heads
    out = run_json(capsys, "--metric", "logprob", "--answer", "id:5")
    assert out["metric"]["kind"] == "logprob" and out["metric"]["answer"]["id"] == 5 and "wrong" not in out["metric"]


def test_the_text_report_names_the_metric_and_the_largest_effects(capsys):
    assert main(["sweep", *COMMON]) == 0
    text = capsys.readouterr().out
    assert text.startswith("m_clean = ") and "heads: largest |effect| of 24" in text
    assert "encoder embeddings at position 2" in text


def test_bad_input_is_one_sentence(capsys, tmp_path, en_hi):
    def refused(*argv) -> str:
        assert main(["sweep", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("scratchformer: ") and "\n" not in err
        return err

    base = ["--model", "en-hi", "--source", SOURCE, "--start-only"]
    assert "corrupted source has 7 tokens" in refused(*base, "--corrupt-source", "the girl eats a red apple")
    assert "not in this model's vocabulary" in refused(*COMMON, "--answer", "zzzqqq")
    assert "is not one token" in refused(*COMMON, "--answer", "वह लड़की")  # the answer is a target token
    assert "has ids 0 to 496" in refused(*COMMON, "--wrong", "id:999999")
    assert "Give the corrupted input" in refused(*base)
    assert "the source has words 0 to 4" in refused(*base, "--corrupt-word", "9=dog")
    assert "no sender head 'decoder.7.self_attn.head0'" in refused(*COMMON, "--path", "decoder.7.self_attn.head0",
                                                                    "logits")  # fmt: skip
    assert "no receiver 'decoder.1.cross_attn.head0.x'" in refused(*COMMON, "--path", "decoder.0.self_attn.head0",
                                                                   "decoder.1.cross_attn.head0.x")  # fmt: skip
    assert "--check-top" in refused(*COMMON, "--check-top", "2")
    bert = family_bundle(en_hi, FAMILIES["bert_like"])
    save_checkpoint(tmp_path / "bert", bert.model, bert.src_tokenizer, bert.tgt_tokenizer)
    assert "has no decoder" in refused("--model", str(tmp_path / "bert"), "--source", SOURCE, "--corrupt-word",
                                       "1=boy")  # fmt: skip


def test_the_maps_csv_and_explanation(result):
    maps = head_maps(result)
    assert [m.title.split(" heads")[0] for m in maps] == ["Patching encoder self-attention",
                                                          "Patching decoder self-attention", "Patching cross-attention"]
    assert all(m.shape == (2, 4) and m.levels[0] == -m.levels[1] and m.levels[1] >= 1 for m in maps)
    cross = maps[2]
    cell = cross.extra["cells"][1][2]
    assert cell["step"] == "decoder.1.cross_attn.context" and cell["head"] == 2
    index = next(i for i, c in enumerate(result.heads.components) if c.step == cell["step"] and c.head == 2)
    assert cross.values[1, 2] == pytest.approx(float(result.heads.effects[index]))
    assert cross.extra["disagree"][1, 2] == bool(result.heads.disagree()[index])
    estimate = head_maps(result, "attribution")[2]
    assert estimate.values[1, 2] == pytest.approx(float(result.heads.estimates[index]))
    resid = point_maps(result, "resid")
    assert [m.col_dim for m in resid] == ["src_pos", "tgt_pos"] and resid[0].shape == (5, 6)
    assert resid[0].row_labels[0] == "encoder embeddings" and resid[0].col_labels[1] == "girl"
    assert [m.shape for m in point_maps(result, "mlp")] == [(2, 6), (2, 1)]
    rows = list(csv.reader(io.StringIO(sweep_csv(result))))
    n = len(result.heads.components) + len(result.positions.components) + len(result.mlp.components)
    assert rows[0][:2] == ["family", "component"] and len(rows) == n + 2
    assert np.isclose(float(rows[1][6]), float(result.heads.effects[0]))
    text = explanation(result)
    assert f"m_clean = {result.m_clean:.3g}" in text and f"m_corrupt = {result.m_corrupt:.3g}" in text
    assert result.metric.answer_token in text and "differ by more than 0.1" in text


def test_per_position_head_maps_are_layer_head_rows_by_position(en_hi):
    clean, corrupt = en_hi.prepare_run(SOURCE, start_only=True), en_hi.prepare("the boy eats an apple")
    s = sweep.compute(en_hi, clean, corrupt, per_position=True)
    maps = head_maps(s)
    assert maps[0].shape == (8, 6) and maps[0].row_labels[:2] == ["L1 H1", "L1 H2"]
    assert maps[2].shape == (8, 1)
