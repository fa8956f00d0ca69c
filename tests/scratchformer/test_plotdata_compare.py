"""Plot data of the window's Compare tab, its Output tab's before → after, and the head-importance maps."""

from __future__ import annotations

import numpy as np
import pytest

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.patching.head_importance import HeadImportance
from scratchformer.patching.interventions import HeadChange, intervene
from scratchformer.plotdata import (
    DIVERGING,
    compare_step,
    first_changed_step,
    importance_heatmaps,
    importance_step,
    top_k_changes,
)

ATTENTION = "decoder.1.cross_attn"


@pytest.fixture(scope="module")
def runs():
    """en-hi on one sentence: the run with head 1 of decoder 2's cross-attention zeroed, and the same inputs
    without it."""
    bundle = load_model("en-hi", "cpu")
    with intervene(bundle.model, [HeadChange(ATTENTION, 0, "zero")]):
        inputs = bundle.prepare_run("the girl eats an apple", "")
        _, after = bundle.run(inputs, keep_output=False)
    _, before = bundle.run(inputs, keep_output=False)
    return bundle, before, after


def test_the_ablated_head_differs_by_minus_its_context(runs):
    _, before, after = runs
    c = compare_step(before, after, f"{ATTENTION}.context", 0, 0)
    expected = before[f"{ATTENTION}.context"].tensor[0, 0].numpy()  # (tgt_pos, d_head)
    assert np.array_equal(c.after.values, np.zeros_like(expected))
    assert np.allclose(c.difference.values, -expected)
    assert c.largest == pytest.approx(float(np.abs(expected).max()))
    assert c.difference.colormap == DIVERGING and c.difference.levels == (-c.largest, c.largest)
    assert c.before.levels == c.after.levels  # one scale for the two runs
    assert c.before.title.startswith("Before: ") and "head 1 zeroed" in c.after.title
    assert c.before.row_labels == after.target_tokens[0]


def test_steps_before_the_head_and_other_heads_do_not_change(runs):
    _, before, after = runs
    for name, head in (("encoder.1.add_norm2.out", 0), (f"{ATTENTION}.weights", 0), (f"{ATTENTION}.context", 1)):
        c = compare_step(before, after, name, 0, head)
        assert c.largest == 0.0 and not c.difference.values.any()
        assert c.difference.levels == (-1.0, 1.0)  # an all-zero difference still has a symmetric scale
    assert first_changed_step(before, after) == f"{ATTENTION}.context"
    assert first_changed_step(before, before) is None


def test_masked_cells_differ_by_zero_and_stay_flagged(runs):
    _, before, after = runs
    c = compare_step(before, after, "decoder.1.self_attn.masked_scores", 0, 0)
    assert c.difference.masked is not None and c.difference.masked.any()
    assert np.all(c.difference.values[c.difference.masked] == 0.0)
    assert np.all(np.isfinite(c.difference.values))


def test_vocabulary_steps_share_their_columns(runs):
    bundle, before, after = runs
    labels = bundle.tgt_tokenizer.token_strings
    c = compare_step(before, after, "generator.probs", 0, 0, labels)
    ids = c.after.extra["vocab_ids"]
    assert np.array_equal(ids, c.before.extra["vocab_ids"]) and np.array_equal(ids, c.difference.extra["vocab_ids"])
    assert c.after.col_labels == labels(ids.tolist())
    for trace in (before, after):  # each run's most likely token at each position is among the columns
        assert set(trace["generator.probs"].tensor[0].argmax(-1).tolist()) <= set(ids.tolist())
    pb = before["generator.probs"].tensor[0][:, ids].numpy()
    pa = after["generator.probs"].tensor[0][:, ids].numpy()
    assert np.allclose(c.difference.values, pa - pb)


def test_top_k_changes_lists_both_runs_probabilities(runs):
    bundle, before, after = runs
    rows = top_k_changes(before, after, 3, 0, bundle.tgt_tokenizer.token_strings)
    pb, pa = before["generator.probs"].tensor[0], after["generator.probs"].tensor[0]  # (T, vocab)
    assert len(rows) == pa.shape[0]
    for r in rows:
        assert len(r.ids) == 3
        assert r.before == pytest.approx([float(pb[r.position, i]) for i in r.ids])
        assert r.after == pytest.approx([float(pa[r.position, i]) for i in r.ids])
        assert int(pb[r.position].argmax()) in r.ids and int(pa[r.position].argmax()) in r.ids
        assert r.input_token == after.target_tokens[0][r.position]


def test_runs_of_other_inputs_do_not_compare(runs):
    bundle, before, _ = runs
    _, other = bundle.run(bundle.prepare("a boy reads", "एक"), keep_output=False)
    with pytest.raises(UserError, match="same input"):
        compare_step(before, other, "encoder.0.add_norm1.out")


def test_importance_maps_are_layers_by_heads_with_symmetric_levels():
    drops = {"decoder.cross_attn": np.array([[0.01, 0.0], [0.085, -0.02]]), "encoder.self_attn": np.zeros((2, 2))}
    maps = importance_heatmaps(HeadImportance(0.95, drops, 40))
    assert [m.extra["kind"] for m in maps] == ["decoder.cross_attn", "encoder.self_attn"]
    cross = maps[0]
    assert cross.shape == (2, 2) and np.allclose(cross.values, drops["decoder.cross_attn"] * 100)
    assert cross.levels == pytest.approx((-8.5, 8.5)) and maps[1].levels == cross.levels
    assert cross.row_labels == ["layer 1", "layer 2"] and cross.col_labels == ["head 1", "head 2"]
    assert "layer 2, head 1 (+8.5)" in cross.subtitle
    assert importance_step("decoder.cross_attn", 1) == "decoder.1.cross_attn.weights"
    assert cross.values.dtype == np.float32 and cross.values.flags.c_contiguous  # what the heatmap widget draws
