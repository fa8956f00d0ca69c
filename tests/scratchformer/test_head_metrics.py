"""Head metrics over training on a hand-made snapshot series (a small model saved at three "steps" in a temporary
run folder): each head's entropy and alignment equal a computation from each checkpoint's own traced attention
maps, its importance equals head_importance on the same input; progress and cancelling; the step revisions of a
Hugging Face cache; the bundled en-hi; the curves' plot data; the command line; and the refusals."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from scratchformer.analyses import head_metrics
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint, snapshot_name
from scratchformer.patching.head_importance import head_importance
from scratchformer.plotdata.head_metrics import checkpoint_at, head_curves
from scratchformer.tasks import Pair
from tests.scratchformer.test_derive import family_bundle
from tests.scratchformer.test_hf_cache import step_revision_cache

PAIR = Pair("the girl eats an apple", "लड़की सेब खाती है", (1, 4, 2, 2))
SHORT = Pair("we are friends", "हम दोस्त हैं", (0, 2, 1))
STEPS = (1, 2)  # the snapshots; the final model is step 3


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def write_series(root, en_hi):
    """A run folder as `scratchformer train --snapshots` writes it: the final model, snapshots/step-N, and
    training.json; each checkpoint a small model with other random weights."""
    final = family_bundle(en_hi, {}, seed=3)
    final.model.config.extra = {}  # trained on no built-in task (a new dict: en-hi's own stays as it is)
    record = {"steps": 3, "snapshots": [{"step": s, "valid_loss": 4.0 - s} for s in STEPS]}
    save_checkpoint(root, final.model, final.src_tokenizer, final.tgt_tokenizer,
                    extra_files={"training.json": json.dumps(record)})  # fmt: skip
    for s in STEPS:
        snap = family_bundle(en_hi, {}, seed=s)
        save_checkpoint(root / "snapshots" / snapshot_name(s), snap.model, snap.src_tokenizer, snap.tgt_tokenizer)
    return root


@pytest.fixture(scope="module")
def series(en_hi, tmp_path_factory):
    return write_series(tmp_path_factory.mktemp("series") / "run", en_hi)


def reference(bundle, pair: Pair):
    """Entropy (type → (layers, heads)) and cross-attention alignment from the model's own trace of one pair."""
    _, trace = bundle.run(bundle.prepare(pair.source, pair.target), keep_output=False)
    entropy, alignment = {}, []
    for step in trace.attention_steps():
        w = step.item(0).double().numpy()  # (H, Q, K)
        logs = np.log(np.where(w > 0, w, 1.0))
        entropy.setdefault(step.attention_type, []).append((-(w * logs).sum(-1)).mean(-1))  # (H,)
        if step.attention_type == "decoder.cross_attn":
            gold = np.array(pair.alignment)
            alignment.append((w[:, : len(gold)].argmax(-1) == gold).mean(-1))  # (H,)
    return {k: np.stack(v) for k, v in entropy.items()}, np.stack(alignment) if alignment else None


def test_checkpoints_are_the_snapshots_then_the_final_model(series):
    points = head_metrics.checkpoints_of(str(series))
    assert [(c.label, c.step, c.final) for c in points] == [("step 1", 1, False), ("step 2", 2, False),
                                                            ("final", 3, True)]  # fmt: skip
    assert points[0].spec == f"{series}@step-000001" and points[0].valid_loss == 3.0


def test_entropy_and_alignment_are_those_of_each_checkpoints_attention(series):
    result = head_metrics.compute(str(series), pairs=[PAIR])
    assert result.n_aligned_words == len(PAIR.alignment)
    for i, point in enumerate(result.checkpoints):
        bundle = load_model(point.spec)
        entropy, alignment = reference(bundle, PAIR)
        for kind, values in entropy.items():
            np.testing.assert_allclose(result.entropy[kind][i], values, rtol=1e-5)
        np.testing.assert_allclose(result.alignment["decoder.cross_attn"][i], alignment)
        inputs = bundle.prepare(PAIR.source, PAIR.target)
        drops = head_importance(bundle.model, inputs.src, inputs.tgt).drops
        for kind, values in drops.items():
            np.testing.assert_allclose(result.importance[kind][i], values, atol=1e-6)


def test_padding_rows_are_left_out_of_the_mean_entropy(series):
    """Two pairs of different lengths in one padded batch: the mean over each pair's own rows, pooled."""
    result = head_metrics.compute(str(series), pairs=[PAIR, SHORT])
    bundle = load_model(f"{series}@step-000002")
    rows = {}
    for pair in (PAIR, SHORT):
        _, trace = bundle.run(bundle.prepare(pair.source, pair.target), keep_output=False)
        for step in trace.attention_steps():
            w = step.item(0).double().numpy()
            rows.setdefault(step.name, []).append(-(w * np.log(np.where(w > 0, w, 1.0))).sum(-1))  # (H, Q)
    pooled = np.concatenate(rows["decoder.1.cross_attn.weights"], axis=1).mean(-1)
    np.testing.assert_allclose(result.entropy["decoder.cross_attn"][1, 1], pooled, rtol=1e-5)
    pooled = np.concatenate(rows["encoder.0.self_attn.weights"], axis=1).mean(-1)
    np.testing.assert_allclose(result.entropy["encoder.self_attn"][1, 0], pooled, rtol=1e-5)


def test_progress_is_told_and_a_cancel_stops_the_work(series):
    told = []
    head_metrics.compute(str(series), pairs=[PAIR], progress=lambda done, total: told.append((done, total)))
    assert told == [(1, 3), (2, 3), (3, 3)]
    assert head_metrics.compute(str(series), pairs=[PAIR], cancelled=lambda: True) is None
    after_one = []
    result = head_metrics.compute(str(series), pairs=[PAIR], progress=lambda d, t: after_one.append(d),
                                  cancelled=lambda: bool(after_one))  # fmt: skip
    assert result is None and after_one == [1]


def test_the_curves_follow_the_checkpoints_steps(series):
    result = head_metrics.compute(str(series), pairs=[PAIR])
    curves = head_curves(result, "entropy", "decoder.cross_attn", layer=1)
    assert [c.label for c in curves.curves] == [f"layer 2 head {h + 1}" for h in range(4)]
    assert curves.steps == [1, 2, 3] and curves.checkpoint_labels == ["step 1", "step 2", "final"]
    assert curves.curves[2].values == [float(v) for v in result.entropy["decoder.cross_attn"][:, 1, 2]]
    assert len(head_curves(result, "importance", "encoder.self_attn").curves) == 8  # every layer
    assert checkpoint_at(result, 2) == 1 and checkpoint_at(result, None) == 2 and checkpoint_at(result, 7) is None


def test_the_bundled_en_hi_learns_its_guided_head(en_hi):
    result = head_metrics.compute("en-hi", n_pairs=8)
    assert [c.step for c in result.checkpoints] == [32, 64, 128, 256, 2030] and result.checkpoints[-1].final
    guided = result.alignment["decoder.cross_attn"][:, 1, 0]  # layer 2, head 1: trained on the gold alignment
    assert guided[-1] >= 0.9 and guided[-1] > guided[0] + 0.5
    cross = result.entropy["decoder.cross_attn"]
    assert cross[-1].mean() < cross[0].mean()  # attention sharpens over training
    assert set(result.importance) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}


def test_the_step_revisions_of_a_hugging_face_cache_are_a_series(tmp_path, monkeypatch):
    repo = step_revision_cache(tmp_path, monkeypatch, (("step20", "b" * 40), ("step3", "a" * 40), ("main", "b" * 40)))
    points = head_metrics.checkpoints_of("someone/tiny-bert")
    assert [(c.label, c.step) for c in points] == [("step3", 3), ("step20", 20)]
    result = head_metrics.compute("someone/tiny-bert", source="the cat sat on the mat")
    assert result.importance == {} and result.alignment == {}
    for i, point in enumerate(points):
        entropy, _ = reference(load_model(point.spec), Pair("the cat sat on the mat", ""))
        np.testing.assert_allclose(result.entropy["encoder.self_attn"][i], entropy["encoder.self_attn"], rtol=1e-5)
    (repo / "refs" / "step20").unlink()
    with pytest.raises(UserError, match="1 step revision.*need at least two.*--revision step1000"):
        head_metrics.checkpoints_of("someone/tiny-bert")


def test_the_refusals_say_what_would_work(series, tmp_path):
    with pytest.raises(UserError, match="blog has no training snapshots.*--snapshots N"):
        head_metrics.compute("blog")
    broken = shutil.copytree(series, tmp_path / "broken")
    (broken / "snapshots" / snapshot_name(2) / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(UserError, match="The step 2 checkpoint of .* cannot be opened .*delete that snapshot folder"):
        head_metrics.compute(str(broken), pairs=[PAIR])
    with pytest.raises(UserError, match="not trained on a built-in task.*--source"):
        head_metrics.compute(str(series))


def test_the_command_line_prints_json_and_refuses_in_one_sentence(capsys):
    assert main(["head-metrics", "--model", "copy", "--source", "3 1 4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"checkpoints", "entropy", "alignment", "importance", "input"} <= set(out)
    assert [c["step"] for c in out["checkpoints"]] == [33, 66, 132, 264, 528, 1056]
    layers = np.asarray(out["alignment"]["decoder.cross_attn"])
    assert layers.shape == (6, 2, 4) and layers.max() <= 1
    assert main(["head-metrics", "--model", "blog"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scratchformer: blog has no training snapshots") and "\n" not in err


def test_the_csv_holds_every_checkpoint_metric_and_head(series):
    import csv
    import io

    from scratchformer.plotdata.head_metrics import head_metrics_csv

    result = head_metrics.compute(str(series), pairs=[PAIR])
    rows = list(csv.DictReader(io.StringIO(head_metrics_csv(result))))
    n = sum(arr.size for d in (result.entropy, result.alignment, result.importance) for arr in d.values())
    assert len(rows) == n
    row = next(r for r in rows if r["checkpoint"] == "step 2" and r["metric"] == "alignment" and r["layer"] == "2"
               and r["head"] == "3")  # fmt: skip
    assert float(row["value"]) == pytest.approx(result.alignment["decoder.cross_attn"][1, 1, 2], abs=1e-6)


def test_the_task_pairs_are_the_first_pairs_of_the_validation_split(en_hi):
    from scratchformer.tasks import load_task_splits

    assert head_metrics.task_pairs(en_hi.config, 32) == load_task_splits("en-hi")["valid"][:32]
    assert head_metrics.gold_alignment(en_hi.config, PAIR.source, PAIR.target) == (1, 4, 2, 2)
    copy_model = load_model("copy")
    assert head_metrics.gold_alignment(copy_model.config, "3 1 4", "3 1 4") == (0, 1, 2)
    assert head_metrics.gold_alignment(copy_model.config, "3 1 4", "4 1 3") == ()
