"""Token trajectories: the coordinates are numpy's SVD PCA of the very vectors the trace holds (fitted on every
point, or on one step), the explained variance is the singular values' share, the paths have a vertex per point,
and the command line prints the designed JSON and refuses in one sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scratchformer.analyses import trajectory
from scratchformer.analyses.stream import residual_points
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata.trajectory import trajectory_paths
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the thirsty teacher washes the clean car"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def run(bundle, source=SOURCE):
    _, trace = bundle.run(bundle.prepare_run(source), keep_output=False)
    return trace


def numpy_pca(x: np.ndarray):
    """The reference: centre, SVD, project on the first two right singular vectors."""
    centred = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T, (s[:2] ** 2 / (s**2).sum())


def same_up_to_sign(ours: np.ndarray, reference: np.ndarray) -> None:
    """PCA fixes each axis only up to its sign: compare each column with the reference's, flipped if need be."""
    for k in range(2):
        sign = np.sign(ours[:, k] @ reference[:, k])
        np.testing.assert_allclose(ours[:, k], sign * reference[:, k], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["en-hi", "gpt2_like"])
def test_the_coordinates_are_numpys_svd_pca_of_every_point(name, en_hi):
    bundle = en_hi if name == "en-hi" else family_bundle(en_hi, FAMILIES[name])
    trace = run(bundle)
    result = trajectory.compute(bundle, trace)
    c = bundle.config
    stacks = [s for s, has in (("encoder", c.has_encoder), ("decoder", c.has_decoder)) if has]
    names = [n for s in stacks for n in residual_points(trace, s, c.norm_first)]
    assert result.points == names  # the encoder's points, then the decoder's
    vectors = [trace[n].item(0).double().numpy() for n in names]
    reference, shares = numpy_pca(np.concatenate(vectors))
    same_up_to_sign(np.concatenate(result.coords), reference)
    np.testing.assert_allclose(result.explained_variance, shares, rtol=1e-9)
    assert [len(c) for c in result.coords] == [len(v) for v in vectors] == [len(t) for t in result.tokens]
    if name == "en-hi":
        assert result.tokens[0] == trace.source_tokens[0] and result.tokens[-1] == trace.target_tokens[0]
        assert result.labels[0] == "encoder embeddings" and result.labels[-1] == "decoder layer 2 feed-forward"


def test_fit_on_one_step_projects_every_point_on_that_steps_axes(en_hi):
    trace = run(en_hi)
    step = "encoder.1.add_norm2.out"
    result = trajectory.compute(en_hi, trace, fit_on=step)
    fitted = trace[step].item(0).double().numpy()
    reference, shares = numpy_pca(fitted)
    i = result.points.index(step)
    same_up_to_sign(result.coords[i], reference)
    np.testing.assert_allclose(result.explained_variance, shares, rtol=1e-9)
    # another point on the same axes: (x − μ_fit) · V_fit
    centred = fitted - fitted.mean(axis=0)
    vt = np.linalg.svd(centred, full_matrices=False)[2][:2]
    other = trace["decoder.0.add_norm2.out"].item(0).double().numpy()
    same_up_to_sign(result.coords[result.points.index("decoder.0.add_norm2.out")],
                    (other - fitted.mean(axis=0)) @ vt.T)  # fmt: skip
    with pytest.raises(UserError, match="is not a step of this run; residual-stream steps are for example"):
        trajectory.compute(en_hi, trace, fit_on="encoder.1.add_norm9.out")
    with pytest.raises(UserError, match="is not a vector per token"):
        trajectory.compute(en_hi, trace, fit_on="encoder.0.self_attn.weights")


def test_the_paths_have_a_labelled_vertex_per_point_of_their_stack(en_hi):
    trace = run(en_hi)
    result = trajectory.compute(en_hi, trace)
    plot = trajectory_paths(result)
    n_src, n_tgt = len(trace.source_tokens[0]), len(trace.target_tokens[0])
    assert len(plot.paths) == n_src + n_tgt
    enc = [p for p in plot.paths if p.stack == "encoder"]
    assert [p.token for p in enc] == trace.source_tokens[0]
    assert enc[2].steps == residual_points(trace, "encoder", False)
    assert (enc[2].xs[1], enc[2].ys[1]) == tuple(result.coords[1][2])
    assert enc[2].hover(0) == "“teacher” (source position 3) · encoder embeddings"
    assert plot.x_title.startswith("PC1 (") and "of the variance" in plot.y_title


def test_the_command_line_prints_json_of_the_designed_shape(capsys):
    assert main(["trajectory", "--model", "en-hi", "--source", "we are friends", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"points", "coords", "tokens", "explained_variance"} <= set(out)
    assert len(out["coords"]) == len(out["points"]) == len(out["tokens"])
    assert all(len(xy) == 2 for point in out["coords"] for xy in point)
    assert len(out["explained_variance"]) == 2 and 0 < out["explained_variance"][1] <= out["explained_variance"][0]
    assert main(["trajectory", "--model", "en-hi", "--source", "we are friends", "--fit-on", "nowhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scratchformer: --fit-on nowhere is not a step") and "\n" not in err


def test_the_csv_holds_every_point_and_token(en_hi):
    import csv
    import io

    from scratchformer.plotdata.trajectory import trajectory_csv

    result = trajectory.compute(en_hi, run(en_hi))
    rows = list(csv.DictReader(io.StringIO(trajectory_csv(result))))
    assert len(rows) == sum(len(t) for t in result.tokens)
    row = next(r for r in rows if r["step"] == "decoder.0.add_norm2.out" and r["position"] == "2")
    i = result.points.index("decoder.0.add_norm2.out")
    assert row["token"] == result.tokens[i][2]
    assert (float(row["pc1"]), float(row["pc2"])) == pytest.approx(tuple(result.coords[i][2]), rel=1e-5)
