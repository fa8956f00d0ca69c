"""The Output view's top-k rows on a batch that a lazy trace ran in several chunks (and softmaxed one item at a
time) are each item's own: the same tokens and probabilities as an untraced forward pass of the whole batch."""

from __future__ import annotations

import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.model import chunk_items
from scratchformer.plotdata.output import top_k_table


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
