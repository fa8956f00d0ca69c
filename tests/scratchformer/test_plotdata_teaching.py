"""Plot data the tutorials explain: PE·PEᵀ, the wavelengths of the sinusoids, LayerNorm vs BatchNorm."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scratchformer.loading.bundle import load_model
from scratchformer.plotdata import (
    Heatmap,
    layer_norm_input,
    layer_norm_step_near,
    layer_norm_steps,
    norm_comparison,
    pe_similarity,
    pe_wavelength_heatmap,
    pe_wavelengths,
)
from scratchformer.transformer.config import blog
from scratchformer.transformer.embeddings import sinusoidal_encoding
from scratchformer.transformer.model import Transformer

# --- positional encoding ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout,positional", [("interleaved", "sinusoidal"), ("halves", "sinusoidal_halves")])
@pytest.mark.parametrize("d_model", [128, 512])
def test_pe_similarity_peaks_on_the_diagonal_and_decays(layout, positional, d_model):
    n = 32
    pe = sinusoidal_encoding(n, d_model, layout).numpy()
    hm = pe_similarity(pe, positional)
    assert isinstance(hm, Heatmap) and hm.values.shape == (n, n)
    np.testing.assert_allclose(hm.values, pe.astype(np.float64) @ pe.T.astype(np.float64), rtol=1e-5, atol=1e-4)
    assert "diagonal" in hm.title and "distance" in hm.title
    v = hm.values.astype(np.float64)
    for row in range(n):
        assert np.argmax(v[row]) == row  # each position is most like itself
        others = np.delete(v[row], row)
        assert v[row, row] > others.max() + 0.5
    np.testing.assert_allclose(np.diag(v), d_model / 2, rtol=1e-5)  # Σ sin² + cos² over d/2 pairs
    # depends only on the distance p − q (a Toeplitz matrix) ...
    for k in range(1, 6):
        np.testing.assert_allclose(np.diag(v, k), np.diag(v, k)[0], rtol=1e-4, atol=1e-3)
    # ... and falls off as positions move apart
    by_distance = [np.diag(v, k).mean() for k in range(6)]
    assert all(a > b for a, b in zip(by_distance, by_distance[1:])), by_distance
    assert np.diag(v, n - 1).mean() < 0.8 * v[0, 0]


def test_pe_similarity_labels_and_learned_positions():
    rng = np.random.default_rng(0)
    pe = rng.normal(size=(5, 8)).astype(np.float32)
    hm = pe_similarity(pe, "learned", labels=["a", "b", "c"], pos_dim="src_pos")
    assert hm.row_labels == ["a", "b", "c", "3", "4"] and hm.row_dim == hm.col_dim == "src_pos"
    assert "learned" in hm.title
    np.testing.assert_allclose(hm.values, hm.values.T, rtol=1e-6)


@pytest.mark.parametrize("d_model", [6, 7, 128])
def test_pe_wavelengths_match_the_formula(d_model):
    wl = pe_wavelengths(d_model, "sinusoidal")
    assert wl.shape == (d_model,)
    for dim in range(d_model):
        i = dim // 2
        assert wl[dim] == pytest.approx(2 * np.pi * 10000 ** (2 * i / d_model))
    assert wl[0] == pytest.approx(2 * np.pi) and np.all(np.diff(wl) >= 0)
    # the wave in the table really repeats with that wavelength: PE(pos + λ) = PE(pos) for the fastest pair
    pe = sinusoidal_encoding(64, d_model).numpy()
    x = np.arange(64)
    np.testing.assert_allclose(pe[:, 0], np.sin(2 * np.pi * x / wl[0]), atol=1e-5)
    hm = pe_wavelength_heatmap(d_model, "sinusoidal")
    np.testing.assert_allclose(hm.values[0], np.log10(wl), rtol=1e-6)
    np.testing.assert_allclose(hm.extra["wavelengths"], wl)


def test_pe_wavelengths_halves_layout_and_learned():
    d = 8
    wl = pe_wavelengths(d, "sinusoidal_halves")  # sines of pairs 0..3, then cosines of pairs 0..3
    expected = [2 * np.pi * 10000 ** (2 * i / d) for i in range(4)] * 2
    np.testing.assert_allclose(wl, expected)
    pe = sinusoidal_encoding(40, d, "halves").numpy()
    np.testing.assert_allclose(pe[:, 5], np.cos(2 * np.pi * np.arange(40) / wl[5]), atol=1e-5)
    assert pe_wavelengths(d, "learned").size == 0 and pe_wavelengths(d, "none").size == 0
    assert pe_wavelength_heatmap(d, "learned") is None


# --- LayerNorm vs BatchNorm --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def en_hi_trace():
    bundle = load_model("en-hi")
    rows = [bundle.encode_source(s) for s in ("the boy eats an apple", "we are friends", "the girl reads")]
    n = max(map(len, rows))
    src = torch.tensor([r + [bundle.config.pad_id] * (n - len(r)) for r in rows])
    tgt = torch.tensor([[bundle.config.bos_id, 5, 6, 7]] * len(rows))
    source_tokens = [[f"s{b}.{i}" for i in range(n)] for b in range(len(rows))]
    target_tokens = [[f"t{b}.{i}" for i in range(4)] for b in range(len(rows))]
    _, trace = bundle.model.eval().run_with_trace(src, tgt, src_pad=src == bundle.config.pad_id,
                                                  source_tokens=source_tokens, target_tokens=target_tokens)
    return bundle, trace


def test_norm_comparison_on_a_trained_model(en_hi_trace):
    bundle, trace = en_hi_trace
    eps = bundle.config.layer_norm_eps
    steps = layer_norm_steps(trace)
    assert len(steps) == 2 * 2 + 2 * 3  # two Add & Norms per encoder layer, three per decoder layer
    for step in steps:
        for batch in (0, 2):
            c = norm_comparison(trace, step, batch, eps)
            assert c is not None and c.step == step.name and c.batch == batch
            assert c.input_step == step.name.replace(".out", ".residual")
            x = trace[c.input_step].tensor.to(torch.float64)  # (B, T, d)
            n_batch, n_pos, d = x.shape
            xb = x[batch]
            # before: the residual's own per-token statistics
            np.testing.assert_allclose(c.mean_before, xb.mean(-1).numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(c.std_before, xb.std(-1, unbiased=False).numpy(), rtol=1e-5)
            # the normalised rows are (x − μ)/σ, exactly F.layer_norm without γ, β
            z = (xb - xb.mean(-1, keepdim=True)) / torch.sqrt(xb.var(-1, unbiased=False, keepdim=True) + eps)
            ref = F.layer_norm(xb.float(), (d,), eps=eps)
            np.testing.assert_allclose(c.layer_norm.values, z.numpy(), atol=1e-5)
            np.testing.assert_allclose(c.layer_norm.values, ref.numpy(), atol=1e-4)
            np.testing.assert_allclose(c.mean_normalized, 0, atol=1e-5)
            np.testing.assert_allclose(c.std_normalized, 1, atol=2e-3)
            # after: the step's output = γ·z + β with the trained γ, β (so not exactly 0 / 1)
            out = trace[step.name].tensor[batch].to(torch.float64)
            np.testing.assert_allclose(c.output.values, out.numpy(), atol=1e-6)
            np.testing.assert_allclose(c.mean_after, out.mean(-1).numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(c.std_after, out.std(-1, unbiased=False).numpy(), rtol=1e-5)
            norm = bundle.model.get_submodule(step.name.replace(".out", ".norm"))
            gamma, beta = norm.weight.detach().double(), norm.bias.detach().double()
            np.testing.assert_allclose(out.numpy(), (z * gamma + beta).numpy(), atol=1e-4)
            # BatchNorm: per-feature statistics over every batch item and position
            rows = x.reshape(-1, d)
            assert c.n_rows == n_batch * n_pos
            np.testing.assert_allclose(c.feature_mean, rows.mean(0).numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(c.feature_std, rows.std(0, unbiased=False).numpy(), rtol=1e-5, atol=1e-6)
            bn_ref = F.batch_norm(x.reshape(-1, d).float(), None, None, training=True, eps=eps).reshape(x.shape)
            np.testing.assert_allclose(c.batch_norm.values, bn_ref[batch].numpy(), atol=1e-4)
            # each LayerNorm row has mean 0, std 1; BatchNorm's rows do not, its columns do (across the batch)
            assert np.abs(c.batch_norm.values.mean(-1)).max() > 1e-2
            all_bn = np.stack([norm_comparison(trace, step, b, eps).batch_norm.values for b in range(n_batch)])
            np.testing.assert_allclose(all_bn.reshape(-1, d).mean(0), 0, atol=1e-5)
            np.testing.assert_allclose(all_bn.reshape(-1, d).std(0), 1, atol=1e-3)
            assert c.labels == trace.labels(step.dims[1], batch)[:n_pos]
            assert c.labels[0] == ("s" if step.stack == "encoder" else "t") + f"{batch}.0"
            assert c.layer_norm.levels == c.batch_norm.levels  # one colour scale for both


def test_norm_comparison_with_identity_affine_is_mean_0_std_1():
    torch.manual_seed(0)
    model = Transformer(blog()).eval()  # fresh LayerNorms: γ = 1, β = 0
    src = torch.randint(0, 50257, (3, 7))
    tgt = torch.randint(0, 50257, (3, 4))
    _, trace = model.run_with_trace(src, tgt)
    for step in layer_norm_steps(trace):
        c = norm_comparison(trace, step, 1)
        np.testing.assert_allclose(c.mean_after, 0, atol=1e-5)
        np.testing.assert_allclose(c.std_after, 1, atol=1e-3)  # σ/√(σ² + ε): 1 up to ε
        np.testing.assert_allclose(c.output.values, c.layer_norm.values, atol=1e-5)


def test_other_layer_norm_inputs_and_other_kinds():
    from scratchformer.transformer.config import TransformerConfig

    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                            src_vocab_size=20, tgt_vocab_size=20, max_len=10, embed_layer_norm=True,
                            final_layer_norm=True)
    torch.manual_seed(0)
    _, trace = Transformer(cfg).eval().run_with_trace(torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 3)))
    emb = trace["src_embed.layer_norm"]
    assert layer_norm_input(trace, emb).name == "src_embed.sum"
    final = trace["encoder.final_norm.out"]
    assert layer_norm_input(trace, final).name == "encoder.0.add_norm2.out"
    assert layer_norm_input(trace, trace["decoder.final_norm.out"]).name == "decoder.0.add_norm3.out"
    for step in (emb, final):
        c = norm_comparison(trace, step, 0)
        x = trace[c.input_step].tensor[0]
        ref = F.layer_norm(x, (8,), eps=1e-5)
        np.testing.assert_allclose(c.layer_norm.values, ref.numpy(), atol=1e-5)
    assert norm_comparison(trace, "encoder.0.self_attn.weights") is None
    assert norm_comparison(trace, "encoder.0.add_norm1.residual") is None
    # the view's choice: the LayerNorm at or after a step, else the last one
    assert layer_norm_step_near(trace, trace.index_of("encoder.0.self_attn.q")).name == "encoder.0.add_norm1.out"
    assert layer_norm_step_near(trace, emb.index).name == "src_embed.layer_norm"
    assert layer_norm_step_near(trace, len(trace) - 1).name == "decoder.final_norm.out"


def test_single_token_batch_norm_says_it_has_nothing_to_compare():
    torch.manual_seed(0)
    model = Transformer(blog()).eval()
    _, trace = model.run_with_trace(torch.randint(0, 50257, (1, 4)), torch.tensor([[50256]]))
    c = norm_comparison(trace, "decoder.0.add_norm1.out")
    assert c.n_rows == 1 and c.notes and np.all(c.batch_norm.values == 0)
