"""Live experiments: each claim asserted on the bundled models, with expected values derived independently
(Monte-Carlo in numpy, torch's own norms and autograd, the model's full forward pass), the command line's JSON,
and the one sentence an experiment says where it does not apply."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.experiments import EXPERIMENTS, NotApplicable, experiment_named, run_experiment
from scratchformer.experiments.measures import softmax_jacobian
from scratchformer.experiments.norm import batch_norm, layer_norm
from scratchformer.loading.bundle import load_model, snapshots_of
from scratchformer.loading.checkpoint import save_checkpoint
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def families(en_hi):
    return {name: family_bundle(en_hi, FAMILIES[name]) for name in ("gpt2_like", "t5_like", "bert_like")}


def expected_max_weight(std: float, seed: int = 7, rows: int = 200_000, keys: int = 10) -> tuple[float, float]:
    """E[max softmax] and E[entropy] of rows of `keys` independent N(0, std²) scores, by numpy Monte-Carlo."""
    s = np.random.default_rng(seed).normal(0.0, std, size=(rows, keys))
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ent = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(1)
    return float(p.max(1).mean()), float(ent.mean())


def test_names_are_the_lessons_names_and_the_alias_is_accepted():
    assert list(EXPERIMENTS) == ["scaling", "mask", "order", "norm", "teacher_forcing", "temperature",
                                 "superposition", "polysemantic"]
    assert experiment_named("teacher-forcing").name == "teacher_forcing"
    with pytest.raises(UserError, match="experiments are scaling, mask"):
        experiment_named("dropout")


def test_scaling_keeps_the_softmax_spread_and_its_gradient_alive(en_hi):
    r = run_experiment("scaling", en_hi, SOURCE)
    rows = {row["d_k"]: row for row in r["rows"]}
    assert {8, 64, 512} <= set(rows) and r["samples"] == 1000 and r["keys"] == 10
    unscaled_max = [rows[d]["unscaled"]["max_weight"] for d in (8, 64, 512)]
    unscaled_ent = [rows[d]["unscaled"]["entropy"] for d in (8, 64, 512)]
    assert unscaled_max == sorted(unscaled_max) and unscaled_ent == sorted(unscaled_ent, reverse=True)
    # Unscaled, q·k of unit-variance vectors has variance d_k: softmax of N(0, d_k) scores, drawn independently
    for d in (8, 64, 512):
        want_max, want_ent = expected_max_weight(math.sqrt(d))
        assert rows[d]["unscaled"]["max_weight"] == pytest.approx(want_max, abs=0.03)
        assert rows[d]["unscaled"]["entropy"] == pytest.approx(want_ent, abs=0.06)
    assert rows[512]["unscaled"]["max_weight"] > 0.9 and rows[512]["unscaled"]["entropy"] < 0.2
    # Scaled, the scores have variance 1 whatever d_k: the same spread row each time
    want_max, want_ent = expected_max_weight(1.0)
    for d in (8, 64, 512):
        assert rows[d]["scaled"]["max_weight"] == pytest.approx(want_max, abs=0.02)
        assert rows[d]["scaled"]["entropy"] == pytest.approx(want_ent, abs=0.05)
        assert rows[d]["score_std"]["scaled"] == pytest.approx(1.0, abs=0.06)
        assert rows[d]["score_std"]["unscaled"] == pytest.approx(math.sqrt(d), rel=0.06)
    # the gradient: scaled keeps it, unscaled loses it as d_k grows
    assert rows[512]["scaled"]["mean_abs_gradient"] > 5 * rows[512]["unscaled"]["mean_abs_gradient"]
    # the model's own q and k: en-hi's d_k is 128 / 4 heads; ÷ √32 divides the scores' spread by √32
    own = r["model_qk"]
    assert own["attention"] == "encoder.0.self_attn" and own["d_k"] == 32 and own["model_scales"]
    assert own["score_std"]["scaled"] == pytest.approx(own["score_std"]["unscaled"] / math.sqrt(32))
    assert own["unscaled"]["entropy"] < own["scaled"]["entropy"]


def test_the_softmax_jacobian_is_autograds():
    s = torch.tensor([0.3, -1.2, 2.0, 0.5], dtype=torch.float64)
    want = torch.autograd.functional.jacobian(lambda x: x.softmax(-1), s)
    assert torch.allclose(softmax_jacobian(s.softmax(-1)), want)


def test_the_causal_mask_blocks_every_later_token_exactly(en_hi):
    r = run_experiment("mask", en_hi, SOURCE)
    assert r["with_mask"]["max_change_from_future"] == 0.0
    assert r["without_mask"]["max_change_from_future"] > 0.01
    t = len(r["decoder_tokens"])
    assert r["decoder_tokens"][0] == "<s>" and t == 5  # the start token and the model's 4-token translation
    masked, free = np.array(r["with_mask"]["changes"]), np.array(r["without_mask"]["changes"])
    assert masked.shape == (t, t)
    # the replaced position itself always changes (column j, row j): the token went in there
    assert all(masked[j, j] > 0 for j in range(1, t))
    # without the mask the first position already reads the second token
    assert free[0, 1] > 0


def test_without_positional_encoding_a_shuffled_source_gives_the_same_rows(en_hi):
    r = run_experiment("order", en_hi, SOURCE, seed=3)
    perm = r["permutation"]
    assert sorted(perm) == list(range(len(perm))) and perm != sorted(perm)
    assert r["without_pe"]["max_diff_after_unpermuting"] < 1e-5  # float rounding only
    assert r["with_pe"]["max_diff_after_unpermuting"] > 0.1
    assert r["without_pe"]["max_diff_in_place"] > 0.1  # the rows did move
    assert r["shuffled_tokens"] == [r["source_tokens"][i] for i in perm]


def test_layernorm_ignores_the_rest_of_the_batch_and_batchnorm_does_not(en_hi):
    r = run_experiment("norm", en_hi, SOURCE)
    assert r["layernorm"]["change_from_other_items"] == 0.0 and r["layernorm"]["padding_shift"] == 0.0
    assert r["batchnorm"]["change_from_other_items"] > 1e-3
    assert r["batchnorm"]["padding_shift"] > 1e-3
    # the batch: the sentence (6 tokens with </s>) and two shorter versions, padded at the end: 1 + 2 pads
    assert r["padding"] == {"rows": 18, "padded": 3}
    assert r["input_step"] == "encoder.0.add_norm1.residual"


def test_the_two_norms_are_torchs():
    x = torch.randn(3, 4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(layer_norm(x, 1e-5), F.layer_norm(x, (6,), eps=1e-5))
    flat = F.batch_norm(x.reshape(-1, 6), None, None, training=True, eps=1e-5)
    assert torch.allclose(batch_norm(x, 1e-5), flat.reshape(3, 4, 6))
    rows = torch.ones(3, 4, dtype=torch.bool)
    rows[2, 2:] = False
    kept = F.batch_norm(x[rows], None, None, training=True, eps=1e-5)  # (10, 6): the statistics of real rows
    assert torch.allclose(batch_norm(x, 1e-5, rows)[rows], kept)


def test_teacher_forcing_is_right_at_least_as_often_as_free_running_early_on(en_hi):
    r = run_experiment("teacher_forcing", en_hi, SOURCE)
    steps = [s.step for s in snapshots_of("en-hi")]
    assert r["snapshot"]["step"] in steps and r["snapshot"]["step"] < steps[-1] + 1
    tf, fr = r["teacher_forced"], r["free_running"]
    assert tf["accuracy"] >= fr["accuracy"] and tf["accuracy"] > fr["accuracy"]  # the early snapshot errs
    assert tf["accuracy"] == pytest.approx(sum(tf["correct"]) / len(tf["correct"]))
    assert r["reference"]["text"] == en_hi.prepare_run(SOURCE).translation
    # teacher forcing is one forward pass over the reference shifted right: its argmax, recomputed here
    early = load_model(r["snapshot"]["spec"])
    ref = en_hi.prepare_run(SOURCE).generated + [en_hi.config.eos_id]
    src = torch.tensor([en_hi.encode_source(SOURCE)])
    with torch.inference_mode():
        logits = early.model(src, torch.tensor([[en_hi.start_id(), *ref[:-1]]]))
    assert tf["predicted"] == en_hi.tgt_tokenizer.token_strings(logits[0].argmax(-1).tolist())
    # the trained model reproduces its own greedy output both ways: 100 %
    assert r["snapshots"][-1] == {"step": "final", "teacher_forced": 1.0, "free_running": 1.0}
    for s in r["snapshots"]:
        assert s["teacher_forced"] >= s["free_running"]


def test_temperature_flattens_the_distribution_as_it_grows(en_hi):
    r = run_experiment("temperature", en_hi, SOURCE, temperature=2.0, seed=1)
    curve = r["curve"]
    entropies = [c["entropy"] for c in curve]
    assert all(a < b for a, b in zip(entropies, entropies[1:]))
    assert curve[0]["top_probability"] > 0.99 and entropies[-1] < r["uniform_entropy"]
    # the entropy of softmax(logits / 2), by hand from the model's logits
    tgt = en_hi.prepare_run(SOURCE).tgt
    with torch.inference_mode():
        logits = en_hi.model(torch.tensor([en_hi.encode_source(SOURCE)]), tgt)[0, 0].double().numpy()
    p = np.exp((logits - logits.max()) / 2.0)
    p /= p.sum()
    assert r["next_token"]["entropy"] == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-9)
    assert r["next_token"]["top_probability"] == pytest.approx(float(p.max()), rel=1e-9)
    assert r["greedy"]["text"] == en_hi.prepare_run(SOURCE).translation
    again = run_experiment("temperature", en_hi, SOURCE, temperature=2.0, seed=1)
    assert again["sampled"] == r["sampled"]  # seeded
    cold = run_experiment("temperature", en_hi, SOURCE, temperature=0.05)
    assert cold["sampled"]["text"] == cold["greedy"]["text"]  # near T = 0 sampling is greedy


def test_an_experiment_that_does_not_apply_says_why_in_one_sentence(families):
    bert, t5, gpt2 = families["bert_like"], families["t5_like"], families["gpt2_like"]
    for name in ("mask", "teacher_forcing", "temperature"):
        with pytest.raises(NotApplicable, match="no decoder|has none"):
            run_experiment(name, bert, SOURCE)
    with pytest.raises(NotApplicable, match="relative position bias"):
        run_experiment("order", t5, SOURCE)
    with pytest.raises(NotApplicable, match="no encoder"):
        run_experiment("order", gpt2, SOURCE)
    # where they apply, the claims hold on these families too
    assert run_experiment("mask", gpt2, SOURCE)["with_mask"]["max_change_from_future"] == 0.0
    assert run_experiment("mask", t5, SOURCE)["without_mask"]["max_change_from_future"] > 0
    order = run_experiment("order", bert, SOURCE)
    assert order["without_pe"]["max_diff_after_unpermuting"] < 1e-5 < order["with_pe"]["max_diff_after_unpermuting"]
    assert run_experiment("norm", bert, SOURCE)["layernorm"]["change_from_other_items"] == 0.0


def test_the_command_line_prints_json_of_the_designed_shape(capsys):
    shapes = {"mask": ("with_mask", "without_mask", "max_change_from_future"),
              "order": ("with_pe", "without_pe", "max_diff_after_unpermuting"),
              "norm": ("layernorm", "batchnorm", "change_from_other_items")}  # fmt: skip
    for name, (a, b, key) in shapes.items():
        assert main(["experiment", name, "--model", "en-hi", "--source", SOURCE, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["experiment"] == name and out["model"] == "en-hi"
        assert isinstance(out[a][key], float) and isinstance(out[b][key], float)
    assert main(["experiment", "scaling", "--model", "en-hi", "--source", SOURCE, "--d-k", "128", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [row["d_k"] for row in out["rows"]] == [8, 64, 128, 512]
    assert set(out["rows"][0]) >= {"d_k", "scaled", "unscaled"} and "max_weight" in out["rows"][0]["scaled"]
    assert "entropy" in out["model_qk"]["scaled"]
    assert main(["experiment", "temperature", "--model", "en-hi", "--source", SOURCE]) == 0
    table = capsys.readouterr().out
    assert "greedy:" in table and "sampled:" in table


def test_the_command_line_refuses_in_one_sentence(capsys, tmp_path, families):
    bert = families["bert_like"]
    save_checkpoint(tmp_path / "bert", bert.model, bert.src_tokenizer, bert.tgt_tokenizer)
    assert main(["experiment", "mask", "--model", str(tmp_path / "bert"), "--source", SOURCE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scratchformer: The mask experiment needs a decoder") and "\n" not in err
    assert main(["experiment", "dropout", "--model", "en-hi", "--source", SOURCE]) == 2
    assert "experiments are" in capsys.readouterr().err
    assert main(["experiment", "mask", "--model", "en-hi", "--source", SOURCE, "--temperature", "2"]) == 2
    assert "--temperature does not apply to the mask experiment" in capsys.readouterr().err
    assert main(["experiment", "temperature", "--model", "en-hi", "--source", SOURCE, "--temperature", "0"]) == 2
    assert "temperature must be above 0" in capsys.readouterr().err
    assert main(["experiment", "teacher-forcing", "--model", "en-hi", "--source", SOURCE, "--snapshot", "5"]) == 2
    assert "no training snapshot at step 5" in capsys.readouterr().err


def test_plot_data_draws_the_switch_side_on_one_colour_scale(en_hi):
    from scratchformer.plotdata.experiments import charts, charts_csv, maps

    r = run_experiment("mask", en_hi, SOURCE)
    on, off = maps(r, True)[0], maps(r, False)[0]
    assert np.array_equal(on.values, np.array(r["with_mask"]["changes"], dtype=np.float32))
    assert np.array_equal(off.values, np.array(r["without_mask"]["changes"], dtype=np.float32))
    top = max(np.abs(on.values).max(), np.abs(off.values).max())
    assert on.levels == off.levels == (0.0, pytest.approx(top))
    assert on.row_labels == r["decoder_tokens"] and on.col_labels[1].startswith("लड़की → ")
    chart = charts(r)[0]  # per position: the largest change any later token makes
    want = [max(row[i + 1 :], default=0.0) for i, row in enumerate(r["without_mask"]["changes"])]
    assert chart.series[1].y == pytest.approx(want) and chart.series[0].y == [0.0] * len(want)
    lines = charts_csv([chart]).splitlines()
    assert lines[0] == "chart,series,x,y" and len(lines) == 1 + 2 * len(want)
