"""Head metrics' gold alignment over several sentence pairs: the share of all scored target words (pooled over the
pairs, not averaged per pair) whose cross-attention row has its largest weight on the gold source token. Checked
against a count made by hand from each pair's own traced attention, against hand-made weights, and with a head
forced to look at the gold source token, which must score exactly 1; it always lies in [0, 1]."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scratchformer.analyses import head_metrics
from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import StepEdit, intervene
from scratchformer.tasks import Pair, load_task_splits
from tests.scratchformer.test_head_metrics import write_series

CROSS = "decoder.cross_attn"
FORCED = "decoder.1.cross_attn.weights"  # layer 2's cross-attention; its head 1 is made to look at the gold token


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    return write_series(tmp_path_factory.mktemp("alignment") / "run", load_model("en-hi"))


@pytest.fixture(autouse=True)
def no_importance(monkeypatch):
    """Each head's importance (zeroing it, one forward pass per head) is not what these tests measure: skip it."""
    monkeypatch.setattr(head_metrics, "head_importance", lambda *a, **k: SimpleNamespace(drops={}))


@pytest.fixture(scope="module")
def pairs():
    """Five en-hi validation pairs of 3 to 8 target words (so the batch is padded), and one pair without a gold
    alignment, which must not be scored."""
    valid = load_task_splits("en-hi")["valid"]
    chosen = list(valid[:5])
    assert len({len(p.alignment) for p in chosen}) >= 3
    return [*chosen, Pair("the shoe is red", "जूता लाल है", ())]


def hand_count(bundle, pairs: list[Pair]) -> tuple[np.ndarray, int]:
    """(layers, heads) hits / words, counted over every pair traced on its own (no padding), in float64."""
    hits, words = None, 0
    for pair in pairs:
        if not pair.alignment:
            continue
        _, trace = bundle.run(bundle.prepare(pair.source, pair.target), keep_output=False)
        assert trace.source_tokens[0][: len(pair.source.split())] == pair.source.split()  # word i is token i
        per_layer = []
        for step in trace.attention_steps():
            if step.attention_type != CROSS:
                continue
            w = step.item(0).double().numpy()  # (H, T, S); row j emits target word j
            gold = np.asarray(pair.alignment)
            per_layer.append((w[:, : len(gold)].argmax(-1) == gold).sum(-1))  # (H,) hits of this pair
        hits = np.stack(per_layer) if hits is None else hits + np.stack(per_layer)
        words += len(pair.alignment)
    return hits.astype(np.float64) / words, words


def test_the_alignment_over_several_pairs_is_the_pooled_share_of_hits(series, pairs):
    result = head_metrics.compute(str(series), pairs=pairs)
    got = result.alignment[CROSS]  # (checkpoints, layers, heads)
    assert got.shape[0] == len(result.checkpoints)
    for i, point in enumerate(result.checkpoints):
        expected, words = hand_count(load_model(point.spec), pairs)
        np.testing.assert_allclose(got[i], expected, rtol=0, atol=1e-12, err_msg=point.label)
    assert result.n_aligned_words == words == sum(len(p.alignment) for p in pairs)
    assert result.n_pairs == len(pairs)
    assert np.all(got >= 0) and np.all(got <= 1)
    assert got.max() > 0  # some head hits some word: a wrong denominator would show


def test_hand_made_weights_score_what_a_count_says():
    """Three pairs of 2, 4 and 3 words in a padded batch of 5 target rows and 6 source columns; head 1 puts all
    its weight on the gold token, head 2 always on a wrong one, head 3 on the gold token in every other row."""
    gold = [[0, 2], [3, 1, 1, 0], [2, 4, 5]]
    w = torch.full((3, 3, 5, 6), 1 / 6, dtype=torch.float32)  # padding rows and columns hold junk weights
    for b, g in enumerate(gold):
        for j, s in enumerate(g):
            w[b, 0, j] = torch.nn.functional.one_hot(torch.tensor(s), 6).float()
            w[b, 1, j] = torch.nn.functional.one_hot(torch.tensor((s + 1) % 6), 6).float()
            w[b, 2, j] = torch.nn.functional.one_hot(torch.tensor(s if j % 2 == 0 else (s + 3) % 6), 6).float()
    share, n = head_metrics.alignment_per_head(w, gold)
    assert n == 9
    # head 3 hits rows 0 (of 2), 0 and 2 (of 4), 0 and 2 (of 3): 1 + 2 + 2 = 5 of 9
    np.testing.assert_array_equal(share, [1.0, 0.0, 5 / 9])
    share, n = head_metrics.alignment_per_head(w[[0, 2, 1]], [gold[0], None, gold[1]])  # an unscored pair
    assert n == 6
    np.testing.assert_array_equal(share, [1.0, 0.0, 3 / 6])


def gold_head(pairs: list[Pair]):
    """An edit of the cross-attention weights (B, H, T, S): head 1's row j of pair b puts all its weight on pair
    b's gold source token for target word j."""

    def edit(w: torch.Tensor) -> torch.Tensor:
        w = w.clone()
        for b, pair in enumerate(pairs):
            for j, s in enumerate(pair.alignment):
                w[b, 0, j] = 0.0
                w[b, 0, j, s] = 1.0
        return w

    return edit


def test_a_head_that_looks_at_the_gold_token_scores_exactly_one(series, pairs, monkeypatch):
    real = head_metrics.measure

    def measure_with_a_gold_head(bundle, batch_pairs, cancelled=None):
        with intervene(bundle.model, [StepEdit(FORCED, gold_head(batch_pairs), "looking at the gold token")]):
            return real(bundle, batch_pairs, cancelled)

    monkeypatch.setattr(head_metrics, "measure", measure_with_a_gold_head)
    result = head_metrics.compute(str(series), pairs=pairs)
    got = result.alignment[CROSS]
    assert np.all(got[:, 1, 0] == 1.0)  # every checkpoint, over all the pairs
    assert np.all(got >= 0) and np.all(got <= 1)
    assert np.all(got[:, 1, 1:] < 1)  # the heads left alone miss some words
