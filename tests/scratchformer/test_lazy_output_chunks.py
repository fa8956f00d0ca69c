"""The Output view's top-k rows on a batch that a lazy trace ran in several chunks (and softmaxed one item at a
time) are each item's own: the same tokens and probabilities as an untraced forward pass of the whole batch."""

from __future__ import annotations

import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.plotdata.output import top_k_table
from scratchformer.recording.lazy import TOP_K, LazyOutputSummary
from scratchformer.transformer.model import chunk_items


def test_top_k_of_every_item_equals_an_untraced_forward_across_chunks():
    torch.manual_seed(3)
    config = TransformerConfig(src_vocab_size=600, tgt_vocab_size=600, d_model=16, n_heads=2, d_ff=32,
                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=80)
    model = Transformer(config).eval()
    with torch.no_grad():  # sharpen the output layer so every item's top tokens are far apart and distinct
        model.generator.proj.weight.mul_(8)
    b, s, t = 7, 64, 64  # 4 items per chunk: chunks of 4 and 3, each chunk's logits above keep_bytes
    assert chunk_items(s) == 4 and 4 * t * 600 * 4 > 256 * 1024
    src, tgt = torch.randint(4, 600, (b, s)), torch.randint(4, 600, (b, t))
    with torch.no_grad():
        probs = model(src, tgt).softmax(-1)  # (B, T, vocab), no tracing
    _, trace = model.run_with_trace(src, tgt, keep_output=False)
    assert trace.output_summary.top_ids.shape[:2] == (b, t)
    for item in range(b):
        rows = top_k_table(trace, k=5, batch=item)
        expected = probs[item].topk(5, dim=-1)  # (T, 5)
        assert [r.ids for r in rows] == expected.indices.tolist(), item
        got = torch.tensor([r.probs for r in rows])
        assert torch.allclose(got, expected.values, atol=1e-6), item
        # the probability of the token that follows in the decoder input, position by position
        following = probs[item, torch.arange(t - 1), tgt[item, 1:]]
        assert torch.allclose(trace.output_summary.next_probs[item], following, atol=1e-6), item


def test_the_summary_is_made_only_when_read_one_chunk_at_a_time_from_the_outputs_rerun():
    """A lazy trace that keeps no output probabilities makes no summary during the pass (the softmax and top-k
    over the vocabulary at every position are the costliest part of tracing a long batch): reading item b makes
    its chunk's, from the same rerun that shows the probabilities, and gives the eager trace's tokens."""
    torch.manual_seed(4)
    config = TransformerConfig(src_vocab_size=600, tgt_vocab_size=600, d_model=16, n_heads=2, d_ff=32,
                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=80)
    model = Transformer(config).eval()
    b, n = 7, 64  # chunks of 4 and 3 items
    src, tgt = torch.randint(4, 600, (b, n)), torch.randint(4, 600, (b, n))
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    _, lazy = model.run_with_trace(src, tgt, keep_output=False)
    summary = lazy.output_summary
    assert isinstance(summary, LazyOutputSummary) and summary.made() == 0
    assert len(lazy.cache) == 0  # nothing was rerun either
    probs = lazy["generator.probs"].item(5)  # the Output view's map of item 5: reruns the second chunk
    assert summary.item(5).top_ids.shape == (1, n, TOP_K) and summary.made() == 1
    assert lazy.cache.misses == 1  # the summary came with that rerun, not from one of its own
    assert torch.equal(summary.item(5).top_probs[0], probs.topk(TOP_K, dim=-1).values)
    assert [r.ids for r in top_k_table(lazy, 5, 2)] == [r.ids for r in top_k_table(eager, 5, 2)]
    for key in ("top_ids", "top_probs", "next_probs"):  # the whole batch, bit for bit
        assert torch.equal(getattr(summary, key), getattr(eager.output_summary, key)), key
