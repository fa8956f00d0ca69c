"""The memory estimate is the count its docstring gives, worked out by hand for the paper preset, and it stays
close to what a lazy trace really holds: an upper bound, but never more than three quarters as much again (an
estimate ten or two times too high would refuse runs that fit)."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.loading.memory import RUNTIME_BYTES, estimate_run

MiB = 2**20


def test_the_paper_presets_estimate_for_8_windows_of_512_tokens_by_hand():
    paper = TransformerConfig()  # the paper's base model: d_model 512, h 8, d_ff 2048, N = 6, GPT-2's 50,257 tokens
    estimate = estimate_run(paper, 8, 512, 512, model_bytes=300 * MiB, keep_output=True)
    # held: per item, every stream-sized step counted at 512 × 512 floats — 6 encoder layers × 4 (attention out,
    # Add & Norm, FFN out, Add & Norm), 6 decoder layers × 6 (three sublayers), 2 embeddings × 6 (ids, lookup,
    # ×√d_model, PE, sum, norm) and the output layer's input: 24 + 36 + 12 + 1 = 73 tensors. At 512 tokens no
    # interior is small enough to keep (the smallest, a 512 × 512 head-row map, is 1 MiB > 256 KiB).
    assert estimate.held == 8 * 73 * 512 * 512 * 4 == 612_368_384
    # working: the largest of 5 attention maps (8 heads × 512 × 512), 3 × the logits (512 × 50,257) and the FFN
    assert estimate.working == max(5 * 8 * 512 * 512 * 4, 3 * 512 * 50257 * 4, 3 * 512 * 2048 * 4) == 308_779_008
    assert estimate.output == 8 * 512 * 50257 * 4  # the (8, 512, vocab) logits handed back
    assert estimate.cache == 256 * MiB and estimate.model == 300 * MiB
    assert estimate.total == 612_368_384 + 308_779_008 + 823_410_688 + 256 * MiB + 300 * MiB + RUNTIME_BYTES
    assert estimate_run(paper, 8, 512, 512, 300 * MiB).output == 0  # not kept: not counted
    # a small vocabulary: the attention maps are the largest interior; a short target: the FFN is
    small_vocab = TransformerConfig(src_vocab_size=100, tgt_vocab_size=100)
    assert estimate_run(small_vocab, 1, 512, 512, 0).working == 5 * 8 * 512 * 512 * 4
    assert estimate_run(TransformerConfig(n_heads=1, d_ff=8192), 1, 16, 16, 0).working == 3 * 16 * 50257 * 4
    assert estimate_run(TransformerConfig(n_heads=1, d_ff=8192, tgt_vocab_size=100, src_vocab_size=100), 1, 16, 16,
                        0).working == 3 * 16 * 8192 * 4


SMALL = dict(src_vocab_size=1000, tgt_vocab_size=1000, d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2,
             n_decoder_layers=2, dropout=0.0, max_len=64)


@pytest.mark.parametrize("overrides", [{}, dict(norm_first=True, final_layer_norm=True), dict(n_encoder_layers=0),
                                       dict(n_decoder_layers=0)],
                         ids=["post-LN", "pre-LN", "decoder-only", "encoder-only"])
def test_the_estimate_is_within_three_quarters_again_of_what_a_lazy_trace_holds(overrides):
    torch.manual_seed(0)
    config = TransformerConfig(**{**SMALL, **overrides})
    model = Transformer(config).eval()
    b, s, t = 2, 60, 50  # long enough that the trace keeps some interiors and recomputes others
    src = torch.randint(4, 1000, (b, s)) if config.has_encoder else None
    tgt = torch.randint(4, 1000, (b, t)) if config.has_decoder else None
    _, trace = model.run_with_trace(src, tgt, keep_output=False)
    held = estimate_run(config, b, s, t, 0).held
    assert trace.stored_bytes() <= held <= 1.75 * trace.stored_bytes()
