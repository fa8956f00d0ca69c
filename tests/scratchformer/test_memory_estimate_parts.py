"""The parts of the memory estimate, each worked out by hand for tiny models whose tensors can be counted on
paper: how many stream-sized steps a trace keeps per layer kind, which small interiors it keeps (and where the
256 KiB line falls), the estimate of encoder-only and decoder-only models, the budget check at its edge and the
sizes as a system monitor shows them. Found by mutation testing (scripts/mutation.sh memory): the paper preset's
closed form and the trace bound left all of these unchecked."""

from __future__ import annotations

import pytest

from scratchformer import TransformerConfig, UserError
from scratchformer.loading import memory
from scratchformer.loading.memory import (
    MemoryEstimate,
    check_budget,
    default_budget,
    estimate_run,
    held_steps_per_item,
    physical_memory,
    size_text,
    small_interiors_per_item,
)

MiB = 2**20
# d_model 8, 2 heads of d_k 4 (h·d_k = 8), d_ff 16, 10 tokens
TINY = dict(src_vocab_size=10, tgt_vocab_size=10, d_model=8, n_heads=2, d_ff=16, dropout=0.0, max_len=64)


def tiny(**overrides) -> TransformerConfig:
    return TransformerConfig(**{**TINY, **overrides})


@pytest.mark.parametrize(("overrides", "steps"), [
    # encoder layers × 4 (attention out, Add & Norm, FFN out, Add & Norm), decoder layers × 6, 6 per embedding
    # (ids, lookup, ×√d_model, PE, sum, norm), + 1 (the output layer's input)
    (dict(n_encoder_layers=2, n_decoder_layers=3), 2 * 4 + 3 * 6 + 2 * 6 + 1),  # 39
    # pre-LN: each sublayer adds its norm → 6 per encoder layer, 9 per decoder layer; a final norm: 2 more
    (dict(n_encoder_layers=2, n_decoder_layers=3, norm_first=True, final_layer_norm=True), 12 + 27 + 12 + 2 + 1),
    # decoder-only: no cross-attention, so a decoder layer is an encoder layer's 4 (6 pre-LN); one embedding
    (dict(n_encoder_layers=0, n_decoder_layers=3), 3 * 4 + 6 + 1),  # 19
    (dict(n_encoder_layers=0, n_decoder_layers=3, norm_first=True, final_layer_norm=True), 3 * 6 + 6 + 2 + 1),
    (dict(n_encoder_layers=2, n_decoder_layers=0), 2 * 4 + 6 + 1),  # encoder-only: 15
    (dict(n_encoder_layers=2, n_decoder_layers=0, norm_first=True), 2 * 6 + 6 + 1),  # 19
], ids=["post-LN", "pre-LN+final", "decoder-only", "decoder-only pre-LN+final", "encoder-only", "encoder-only pre-LN"])
def test_held_steps_per_item_count_each_layer_kind_by_hand(overrides, steps):
    assert held_steps_per_item(tiny(**overrides)) == steps


def test_small_interiors_of_a_tiny_encoder_decoder_by_hand():
    """1 encoder and 1 decoder layer, 3 source and 2 target tokens: every interior is far below 256 KiB."""
    config = tiny(n_encoder_layers=1, n_decoder_layers=1)
    # an attention over tq queries and tk keys keeps: scores, scaled, masked, weights (h·tq·tk each); q, context,
    # concat (tq·8 each); k, v (tk·8 each); the q, k, v projection (tq·3·8); the additive mask (tq·tk)
    enc_self = 4 * 2 * 3 * 3 + 3 * 24 + 2 * 24 + 72 + 9  # 273 floats
    enc_ffn = 3 * 16 + 2 * 3 * 8  # hidden (3 × 16) and the two residual inputs (3 × 8): 96
    dec_self = 4 * 2 * 2 * 2 + 3 * 16 + 2 * 16 + 48 + 4  # 164
    dec_cross = 4 * 2 * 2 * 3 + 3 * 16 + 2 * 24 + 48 + 6  # 198
    dec_ffn = 2 * 16 + 2 * 2 * 8  # 64
    dec_extra = 2 * 8  # the decoder layer's third residual
    logits = 2 * 2 * 10  # logits and probabilities, 2 × 10 each
    floats = enc_self + enc_ffn + dec_self + dec_cross + dec_ffn + dec_extra + logits
    assert floats == 851
    assert small_interiors_per_item(config, 3, 2) == 851 * 4
    # a gated feed-forward keeps three hidden tensors (act(xW₁), xV, their product) instead of one
    gated = tiny(n_encoder_layers=1, n_decoder_layers=1, ffn_gated=True)
    assert small_interiors_per_item(gated, 3, 2) == (851 + 2 * 48 + 2 * 32) * 4
    # the other way round (2 source, 3 target tokens): decoder attentions over 3 queries
    enc_self = 4 * 2 * 2 * 2 + 3 * 16 + 2 * 16 + 48 + 4  # 164
    enc_ffn = 2 * 16 + 2 * 2 * 8  # 64
    dec_self = 4 * 2 * 3 * 3 + 3 * 24 + 2 * 24 + 72 + 9  # 273
    dec_cross = 4 * 2 * 3 * 2 + 3 * 24 + 2 * 16 + 72 + 6  # 230
    dec_ffn, dec_extra, logits = 3 * 16 + 2 * 3 * 8, 3 * 8, 2 * 3 * 10  # 96, 24, 60
    assert small_interiors_per_item(config, 2, 3) == (164 + 64 + 273 + 230 + 96 + 24 + 60) * 4 == 911 * 4


def test_an_interior_of_exactly_keep_bytes_is_kept_and_a_larger_one_is_not():
    config = tiny(n_encoder_layers=1, n_decoder_layers=1)
    # the largest interior of the case above is the encoder's q, k, v projection: 3 × 24 = 72 floats (288 bytes)
    assert small_interiors_per_item(config, 3, 2, keep_bytes=288) == 851 * 4
    assert small_interiors_per_item(config, 3, 2, keep_bytes=287) == (851 - 72) * 4
    # the default line is 256 KiB = 65,536 floats: a 4 × 16,384 FFN hidden tensor is kept, a 4 × 16,385 one is not
    attention = 4 * 2 * 4 * 4 + 3 * 32 + 2 * 32 + 96 + 16  # 400 floats for 4 tokens
    at_line = tiny(n_encoder_layers=1, n_decoder_layers=0, d_ff=16_384)
    assert small_interiors_per_item(at_line, 4, 0) == (attention + 65_536 + 2 * 32) * 4 == 264_000
    over = tiny(n_encoder_layers=1, n_decoder_layers=0, d_ff=16_385)
    assert small_interiors_per_item(over, 4, 0) == (attention + 2 * 32) * 4


def test_an_encoder_only_estimate_counts_no_logits_by_hand():
    config = tiny(n_encoder_layers=1, n_decoder_layers=0, tgt_vocab_size=1000, src_vocab_size=1000)
    estimate = estimate_run(config, 3, 5, 5, model_bytes=123, cache_bytes=456, keep_output=True)
    # per item: 11 steps (4 + 6 + 1) of 5 × 8 floats, and the interiors of 5 tokens:
    # attention 4·2·25 + 3·40 + 2·40 + 5·24 + 25 = 545, FFN 5·16 + 2·5·8 = 160
    assert estimate.held == 3 * (11 * 5 * 8 * 4 + (545 + 160) * 4) == 13_740
    # working: 5 maps of 2 × 5 × 5 (1,000 B) beat the FFN's 3 × 5 × 16 (960 B); an encoder makes no logits
    # (3 × 5 × 1,000 floats would be 60,000 B) and hands none back even when asked to keep the output
    assert estimate.working == 5 * 2 * 5 * 5 * 4 == 1000
    assert estimate.output == 0
    assert (estimate.cache, estimate.model) == (456, 123)
    # a target length means nothing to an encoder: the stream is 2 source tokens long, not 9
    assert estimate_run(config, 1, 2, 9, 0).held == 11 * 2 * 8 * 4 + (4 * 2 * 4 + 5 * 16 + 48 + 4 + 32 + 32) * 4
    # no tokens at all still counts one position: 11 steps of 1 × 8 floats; with d_ff 1 the working memory is
    # the 5 attention maps of 2 heads × 1 × 1 (40 B), more than the FFN's 3 × 1 × 1 floats (12 B)
    empty = estimate_run(tiny(n_encoder_layers=1, n_decoder_layers=0, d_ff=1), 1, 0, 0, 0)
    assert empty.held == 11 * 1 * 8 * 4
    assert empty.working == 5 * 2 * 1 * 1 * 4 == 40


def test_a_decoder_only_estimate_ignores_the_source_length_by_hand():
    config = tiny(n_encoder_layers=0, n_decoder_layers=1)
    # per item: 11 steps of 4 × 8 floats (the source length 9 plays no part); interiors of 4 tokens:
    # attention 4·2·16 + 3·32 + 2·32 + 4·24 + 16 = 400, FFN 4·16 + 2·4·8 = 128, third residual 32, logits 2·40
    assert estimate_run(config, 2, 9, 4, 0).held == 2 * (11 * 4 * 8 * 4 + (400 + 128 + 32 + 80) * 4) == 7936
    estimate = estimate_run(config, 2, 0, 4, 0, keep_output=True)
    # working: the FFN's 3 × 4 × 16 floats (768 B) beat 5 maps of 2 × 4 × 4 (640 B) and 3 × 4 × 10 logits (480 B)
    assert estimate.working == 768
    assert estimate.output == 2 * 4 * 10 * 4  # the (2, 4, 10) logits
    assert estimate_run(config, 2, 0, 4, 0).output == 0


def test_an_encoder_decoder_counts_the_longer_side_for_every_step():
    config = tiny(n_encoder_layers=1, n_decoder_layers=1)
    steps = 4 + 6 + 2 * 6 + 1  # 23 per item
    assert estimate_run(config, 1, 3, 2, 0).held == steps * 3 * 8 * 4 + 851 * 4  # source longer
    assert estimate_run(config, 1, 2, 3, 0).held == steps * 3 * 8 * 4 + 911 * 4  # target longer
    # working: the 5 attention maps span the longer side — 2 heads × 6 × 6 floats (1,440 B) — more than the FFN's
    # 3 × 6 × 16 (1,152 B) or the logits' 3 × T × 10; whichever side is the longer one
    assert estimate_run(config, 1, 6, 2, 0).working == 5 * 2 * 6 * 6 * 4 == 1440
    assert estimate_run(config, 1, 2, 6, 0).working == 1440


def test_the_total_adds_400_mib_for_python_torch_and_qt():
    assert MemoryEstimate(1, 2, 3, 4, 5).total == 15 + 400 * MiB


def test_a_run_exactly_at_the_budget_runs_and_one_byte_over_is_refused():
    estimate = MemoryEstimate(1, 2, 3, 4, 5)  # 400 MiB + 15 B
    check_budget(estimate, estimate.total, 1, 7)
    check_budget(estimate, None, 1, 7)  # no budget: no limit
    with pytest.raises(UserError) as one_text:
        check_budget(estimate, estimate.total - 1, 1, 7)
    assert str(one_text.value) == ("This run would need about 400 MB of memory, more than the 400 MB budget: use a "
                                   "shorter text (this one has 7 tokens), or raise the memory budget.")
    with pytest.raises(UserError, match=r"budget: use fewer windows \(this run has 2\), or raise"):
        check_budget(estimate, 10 * MiB, 2, 7)


@pytest.mark.parametrize(("n_bytes", "text"), [
    (84 * 2**10, "84 KB"), (2**20 - 1, "1024 KB"), (2**20, "1.0 MB"), (3.25 * 2**20, "3.2 MB"),
    (10 * 2**20 - 1, "10.0 MB"), (10 * 2**20, "10 MB"), (812 * 2**20, "812 MB"), (2**30 - 1, "1024 MB"),
    (2**30, "1.0 GB"), (2.4 * 2**30, "2.4 GB"),
])
def test_sizes_read_as_a_system_monitor_shows_them(n_bytes, text):
    assert size_text(n_bytes) == text


def test_the_default_budget_is_half_the_machines_memory(monkeypatch):
    sizes = {"SC_PHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(memory.os, "sysconf", lambda name: sizes[name])
    assert physical_memory() == 4_096_000
    assert default_budget() == 2_048_000 and isinstance(default_budget(), int)


@pytest.mark.parametrize("error", [ValueError, OSError, AttributeError])
def test_where_the_os_does_not_say_the_budget_is_4_gib(monkeypatch, error):
    def sysconf(name):
        raise error(name)

    monkeypatch.setattr(memory.os, "sysconf", sysconf)
    assert physical_memory() is None
    assert default_budget() == 4 * 2**30 == 4_294_967_296
