"""Pure plot-data functions: blocks, PE curves, masks per attention type, overview mosaic, top-k, stats."""

import numpy as np
import pytest
import torch

from scratchformer import plotdata as pd
from scratchformer.loading.bundle import load_model
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.embeddings import sinusoidal_encoding


@pytest.fixture(scope="module")
def blog_trace():
    bundle = load_model("blog")
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch", "the answer"))
    return bundle, trace


def test_architecture_follows_the_config():
    c = TransformerConfig(n_encoder_layers=3, n_decoder_layers=2, d_model=8, n_heads=2, d_ff=16)
    keys = [b.key for b in pd.architecture(c)]
    assert keys.count("encoder.2.self_attn") == 1 and "encoder.3.self_attn" not in keys
    assert [k for k in keys if k.startswith("decoder.1")] == [
        "decoder.1.self_attn", "decoder.1.add_norm1", "decoder.1.cross_attn", "decoder.1.add_norm2",
        "decoder.1.ffn", "decoder.1.add_norm3",
    ]
    assert keys[-2:] == ["generator.linear", "generator.softmax"]
    enc_only = TransformerConfig(n_encoder_layers=2, n_decoder_layers=0, d_model=8, n_heads=2, d_ff=16)
    assert all(b.column == "encoder" for b in pd.architecture(enc_only))
    dec_only = TransformerConfig(n_encoder_layers=0, n_decoder_layers=1, d_model=8, n_heads=2, d_ff=16)
    dec_keys = [b.key for b in pd.architecture(dec_only)]
    assert "decoder.0.cross_attn" not in dec_keys and "decoder.0.add_norm2" not in dec_keys
    assert "decoder.0.add_norm3" in dec_keys


def test_every_step_belongs_to_a_drawn_block(blog_trace):
    bundle, trace = blog_trace
    drawn = {b.key for b in pd.architecture(bundle.config)}
    assert {pd.block_key(s) for s in trace} == drawn


def test_pe_curves_match_the_formula_at_the_added_positions():
    pe = sinusoidal_encoding(12, 16).numpy()
    curves = pd.pe_curves(pe, [0, 1, 6, 7])
    for c in curves:
        np.testing.assert_allclose(np.interp(c.x_points, c.x, c.y), c.y_points, atol=1e-5)
    assert curves[0].label.startswith("dim 0 (sin") and curves[1].label.startswith("dim 1 (cos")
    assert pd.default_pe_dims(512) == [0, 1, 256, 257]


def test_masks_per_attention_type(blog_trace):
    _, trace = blog_trace
    assert pd.attention_types(trace) == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    dec = pd.mask_heatmaps(trace, "decoder.self_attn")
    causal = dec[0]
    assert causal.title.endswith("Causal (no peeking ahead)")
    assert causal.masked.tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    combined = dec[-1]
    np.testing.assert_array_equal(combined.values, trace["decoder.0.self_attn.mask"].tensor[0].numpy())
    cross = pd.mask_heatmaps(trace, "decoder.cross_attn")
    assert cross[-1].shape == (3, 6) and cross[-1].masked is None


def test_padding_masks_come_from_the_pad_id(blog_trace):
    _, trace = blog_trace
    pad_id = int(trace["src_embed.tokens"].tensor[0, -1])  # pretend the last source token is padding
    src = pd.mask_heatmaps(trace, "encoder.self_attn", pad_id=pad_id)[0]
    assert src.title.endswith("Source padding")
    assert src.masked[:, -1].all() and not src.masked[:, :-1].any()


def test_target_padding_mask_follows_the_model_where_the_start_token_is_the_pad_token(blog_trace):
    """MarianMT decodes from <pad>: the drawn target-padding mask must not block the start column, as the model
    does not — and the combined mask drawn beside it (read from the trace) must agree."""
    _, trace = blog_trace
    start = int(trace["tgt_embed.tokens"].tensor[0, 0])
    tgt_padding = next(m for m in pd.mask_heatmaps(trace, "decoder.self_attn", pad_id=start)
                       if m.title.endswith("Target padding"))
    assert tgt_padding.masked is None or not tgt_padding.masked[:, 0].any()


def test_overview_mosaic_and_cell_lookup(blog_trace):
    _, trace = blog_trace
    m = pd.overview_mosaic(trace, "decoder.cross_attn", tile=48)
    assert m.values.shape == (3, 2 * 6 + 1)
    np.testing.assert_allclose(m.values[:, 7:], trace["decoder.0.cross_attn.weights"].tensor[0, 1].numpy())
    assert np.isnan(m.values[:, 6]).all()  # the gap between heads
    assert pd.overview_cell(m, 1, 8) == (0, 1)
    assert pd.overview_cell(m, 1, 6) is None


def test_overview_block_averages_long_sequences():
    w = torch.rand(1, 2, 100, 100)
    shrunk = pd.overview._shrink(w[0, 0].numpy(), 50)
    assert shrunk.shape == (50, 50)
    assert shrunk[0, 0] == pytest.approx(float(w[0, 0, :2, :2].mean()), rel=1e-5)


def test_top_k_table(blog_trace):
    bundle, trace = blog_trace
    rows = pd.top_k_table(trace, 3, vocab_labels=bundle.tgt_tokenizer.token_strings)
    assert [r.input_token for r in rows] == ["<|endoftext|>", "the", " answer"]
    probs = trace["generator.probs"].tensor[0, 1]
    assert rows[1].ids == torch.topk(probs, 3).indices.tolist()
    assert rows[1].probs == sorted(rows[1].probs, reverse=True)


def test_tensor_stats_ignores_masked_cells():
    t = torch.tensor([[0.0, float("-inf")], [2.0, 4.0]])
    s = pd.tensor_stats(t)
    assert (s.minimum, s.maximum, s.n_masked) == (0.0, 4.0, 1)
    assert s.mean == pytest.approx(2.0)


def test_top_columns_keeps_rank_order():
    values = np.array([[0.1, 0.5, 0.2, 0.9], [0.8, 0.1, 0.3, 0.0]], dtype=np.float32)
    cols_values, cols = pd.top_columns(values, 2)
    assert cols.tolist() == [3, 0]  # rank 1 of each row first
    np.testing.assert_array_equal(cols_values, values[:, [3, 0]])


def _brute_blocks(values, block, pick):
    br, bc = block
    rows, cols = values.shape
    out = np.empty((-(-rows // br), -(-cols // bc)), dtype=np.float32)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = pick(values[i * br : (i + 1) * br, j * bc : (j + 1) * bc].ravel())
    return out


def test_block_reduce_keeps_the_maximum_of_every_block():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((37, 101)).astype(np.float32)  # blocks that do not divide the shape
    for block in [(1, 4), (3, 7), (5, 1), (37, 101), (40, 200)]:
        got = pd.block_reduce(values, block, pd.MAX)
        np.testing.assert_array_equal(got, _brute_blocks(values, block, np.max))


def test_block_reduce_keeps_a_single_bright_cell_of_a_feed_forward_map():
    values = np.zeros((512, 2048), dtype=np.float32)
    values[301, 1234] = 0.9
    block = pd.display_blocks(values.shape, (618, 572))
    assert block == (1, 4)
    reduced = pd.block_reduce(values, block, pd.MAX)
    assert reduced.shape == (512, 512)
    assert reduced[301, 1234 // 4] == np.float32(0.9) and np.count_nonzero(reduced) == 1


def test_block_reduce_extreme_keeps_the_value_farthest_from_zero_with_its_sign():
    rng = np.random.default_rng(1)
    values = rng.uniform(-1, 1, (20, 30)).astype(np.float32)
    values[4, 9] = -7.0  # a plain maximum would hide this dark-blue cell
    got = pd.block_reduce(values, (4, 5), pd.EXTREME)
    np.testing.assert_array_equal(got, _brute_blocks(values, (4, 5), lambda b: b[np.argmax(np.abs(b))]))
    assert got[1, 1] == -7.0


def test_block_reduce_masked_and_nan_cells():
    values = np.array([[-np.inf, -np.inf, 0.5, -np.inf],
                       [-np.inf, -np.inf, -np.inf, -np.inf],
                       [np.nan, np.nan, np.nan, 2.0]], dtype=np.float32)  # fmt: skip
    for mode in (pd.MAX, pd.EXTREME):
        got = pd.block_reduce(values, (1, 2), mode)
        assert got[0, 0] == -np.inf and got[0, 1] == 0.5  # −∞ only when no cell of the block is finite
        assert np.isnan(got[2, 0]) and got[2, 1] == 2.0  # NaN only when every cell is NaN
    assert pd.block_reduce(values, (2, 4), pd.EXTREME)[0, 0] == 0.5


def test_display_blocks_round_up_and_never_go_below_one():
    assert pd.display_blocks((512, 512), (618, 572)) == (1, 1)
    assert pd.display_blocks((512, 2048), (300, 1000)) == (2, 3)
    assert pd.display_blocks((10, 10), (0, -5)) == (10, 10)
    assert pd.display_reduction(pd.DIVERGING) == pd.EXTREME and pd.display_reduction(pd.SEQUENTIAL) == pd.MAX


def test_timeline_rows_are_the_emitted_tokens_not_decoder_inputs():
    from scratchformer.running.decoding import timeline

    bundle = load_model("blog")
    tl = timeline(bundle, "machine learning", "is fun")
    hm = pd.timeline_heatmap(tl, upto=len(tl.steps) - 1)
    assert hm.row_dim == "emitted" and hm.row_labels == [s.token for s in tl.steps if s.cross_attention is not None]


@pytest.mark.parametrize("layers", [(2, 2), (0, 2), (2, 0)])
def test_every_diagram_block_holds_steps_of_the_trace(layers):
    """Encoder-decoder, decoder-only and encoder-only: each block the diagram draws is one the trace fills."""
    import torch

    from scratchformer.plotdata import architecture, block_steps
    from scratchformer.transformer.config import TransformerConfig
    from scratchformer.transformer.model import Transformer

    config = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=layers[0], n_decoder_layers=layers[1],
                               src_vocab_size=20, tgt_vocab_size=20, max_len=8, dropout=0.0)
    ids = torch.tensor([[1, 2, 3]])
    src, tgt = (ids if config.has_encoder else None), (ids if config.has_decoder else None)
    _, trace = Transformer(config).eval().run_with_trace(src, tgt)
    filled = block_steps(trace)
    assert [b.key for b in architecture(config) if b.key not in filled] == []
