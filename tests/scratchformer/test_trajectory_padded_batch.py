"""Token trajectories of a padded batch (items of different lengths): each item's coordinates are a float64 numpy
SVD PCA of that item's own real tokens' vectors, read from the trace and selected with the padding the batch was
built with; padding positions enter neither the fit nor the output, and the tokens listed are the item's own."""

from __future__ import annotations

import numpy as np
import pytest

from scratchformer.analyses import trajectory
from scratchformer.analyses.stream import residual_points
from scratchformer.api import Run
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the thirsty teacher washes the clean car"
ITEMS = 3  # the sentence, then versions one and two words shorter, padded at the end


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module", params=["en-hi", "gpt2_like"])
def padded(request, en_hi):
    """(bundle, inputs, trace) of a padded batch: an encoder-decoder, and a decoder-only model."""
    bundle = en_hi if request.param == "en-hi" else family_bundle(en_hi, FAMILIES[request.param])
    inputs = bundle.prepare_padded(SOURCE, variants=ITEMS)
    _, trace = bundle.run(inputs, keep_output=False)
    return bundle, inputs, trace


def real_rows(inputs, stack: str, item: int) -> np.ndarray:
    """Which positions of an item hold a real token (not padding), from the batch as it was built."""
    pad = inputs.src_pad if stack == "encoder" else inputs.tgt_pad
    return ~pad[item].numpy()


def reference(bundle, inputs, trace, item: int):
    """Per point (stack, name, the item's real tokens' vectors in float64), and the tokens' strings per stack."""
    c = bundle.config
    points = []
    for stack, has in (("encoder", c.has_encoder), ("decoder", c.has_decoder)):
        if has:
            keep = real_rows(inputs, stack, item)
            for name in residual_points(trace, stack, c.norm_first):
                points.append((stack, name, trace[name].tensor[item].double().numpy()[keep]))
    tokens = {"encoder": inputs.source_tokens[item], "decoder": inputs.target_tokens[item]}
    return points, tokens


def svd_pca(x: np.ndarray):
    """Centre, SVD, the first two right singular vectors: (mean, components (2, d), shares of the variance)."""
    mean = x.mean(axis=0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
    return mean, vt[:2], s[:2] ** 2 / (s**2).sum()


def assert_same_up_to_sign(ours: np.ndarray, expected: np.ndarray) -> None:
    for k in range(expected.shape[1]):
        sign = 1.0 if ours[:, k] @ expected[:, k] >= 0 else -1.0
        np.testing.assert_allclose(ours[:, k], sign * expected[:, k], rtol=1e-6, atol=1e-8)


def test_the_batch_really_has_items_of_different_lengths(padded):
    _, inputs, _ = padded
    lengths = [int(real_rows(inputs, "decoder", i).sum()) for i in range(ITEMS)]
    assert len(set(lengths)) == ITEMS and min(lengths) < inputs.tgt.shape[1]


@pytest.mark.parametrize("item", range(ITEMS))
def test_each_items_coordinates_are_a_pca_of_its_own_real_tokens(padded, item):
    bundle, inputs, trace = padded
    points, tokens = reference(bundle, inputs, trace, item)
    result = trajectory.compute(bundle, trace, batch=item)
    assert result.points == [name for _, name, _ in points]
    # the tokens listed are the item's own, padding left out
    for stack, toks in zip(result.stacks, result.tokens):
        want = [t for t, real in zip(tokens[stack], real_rows(inputs, stack, item)) if real]
        assert toks == want and "<pad>" not in toks
    # one row of coordinates per real token, no more
    assert [len(xy) for xy in result.coords] == [len(x) for _, _, x in points]
    mean, comps, shares = svd_pca(np.concatenate([x for _, _, x in points]))
    np.testing.assert_allclose(result.explained_variance, shares, rtol=1e-9)
    np.testing.assert_allclose(result.mean, mean, rtol=1e-9, atol=1e-12)
    expected = np.concatenate([(x - mean) @ comps.T for _, _, x in points])
    assert_same_up_to_sign(np.concatenate(result.coords), expected)


def test_fitting_on_one_step_of_a_short_item_leaves_its_padding_out(padded):
    bundle, inputs, trace = padded
    item = ITEMS - 1  # the shortest: two padding positions
    stack = "encoder" if bundle.config.has_encoder else "decoder"
    step = residual_points(trace, stack, bundle.config.norm_first)[-1]
    keep = real_rows(inputs, stack, item)
    assert not keep.all()
    fitted = trace[step].tensor[item].double().numpy()[keep]
    mean, comps, shares = svd_pca(fitted)
    result = trajectory.compute(bundle, trace, batch=item, fit_on=step)
    np.testing.assert_allclose(result.explained_variance, shares, rtol=1e-9)
    np.testing.assert_allclose(result.mean, mean, rtol=1e-9, atol=1e-12)
    i = result.points.index(step)
    assert_same_up_to_sign(result.coords[i], (fitted - mean) @ comps.T)


def test_the_python_apis_batch_argument_reads_that_item(padded):
    bundle, inputs, trace = padded
    item = ITEMS - 1
    points, _ = reference(bundle, inputs, trace, item)
    got = Run(bundle, inputs, trace, SOURCE).trajectory(batch=item)
    assert [len(xy) for xy in got["coords"]] == [len(x) for _, _, x in points]
    mean, comps, shares = svd_pca(np.concatenate([x for _, _, x in points]))
    np.testing.assert_allclose(got["explained_variance"], shares, rtol=1e-9)
    expected = np.concatenate([(x - mean) @ comps.T for _, _, x in points])
    assert_same_up_to_sign(np.concatenate([np.asarray(xy) for xy in got["coords"]]), expected)
