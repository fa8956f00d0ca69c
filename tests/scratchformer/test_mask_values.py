"""Every mask builder against masks written out by hand, cell by cell (True = may attend), including the cases a
mutation pass found unchecked: pad_from_ids (the decoder's start column, no padding at all, no pad id), a cache
offset with more keys than queries, a padded target inside the causal mask, and the additive form's dtype."""

from __future__ import annotations

import torch

from scratchformer.transformer import masks

T, F = True, False


def test_causal_mask_by_hand_with_and_without_a_cache_offset():
    assert masks.causal_mask(3).tolist() == [[T, F, F], [T, T, F], [T, T, T]]
    # two new queries at absolute positions 2 and 3 over four keys
    assert masks.causal_mask(2, offset=2).tolist() == [[T, T, T, F], [T, T, T, T]]
    assert masks.causal_mask(2, 5, offset=1).tolist() == [[T, T, F, F, F], [T, T, T, F, F]]


def test_padding_encoder_decoder_and_cross_masks_by_hand():
    src_pad = torch.tensor([[F, F, T], [F, F, F]])
    tgt_pad = torch.tensor([[F, T, T], [F, F, F]])
    assert masks.padding_mask(src_pad).tolist() == [[[T, T, F]], [[T, T, T]]]
    enc = masks.encoder_self_mask(src_pad, 2, 3)
    assert enc.tolist() == [[[T, T, F]] * 3, [[T, T, T]] * 3]
    dec = masks.decoder_self_mask(tgt_pad, 2, 3)
    assert dec.tolist() == [[[T, F, F], [T, F, F], [T, F, F]], [[T, F, F], [T, T, F], [T, T, T]]]
    assert masks.decoder_self_mask(None, 2, 2).tolist() == [[[T, F], [T, T]]] * 2
    assert masks.decoder_self_mask(None, 1, 1, offset=2).tolist() == [[[T, T, T]]]
    cross = masks.cross_mask(src_pad, 2, 2, 3)
    assert cross.tolist() == [[[T, T, F]] * 2, [[T, T, T]] * 2]
    assert masks.encoder_self_mask(None, 2, 3) is None and masks.cross_mask(None, 2, 2, 3) is None


def test_additive_is_zero_where_allowed_and_minus_infinity_where_masked():
    add = masks.additive(torch.tensor([[T, F], [F, T]]))
    assert add.dtype == torch.float32
    assert add.tolist() == [[0.0, float("-inf")], [float("-inf"), 0.0]]
    assert masks.additive(None, (2, 3)).tolist() == [[0.0] * 3] * 2
    assert masks.additive(None).shape == ()


def test_pad_from_ids_marks_the_pad_id_and_never_the_start_column():
    ids = torch.tensor([[0, 5, 6, 0], [7, 8, 0, 0]])
    assert masks.pad_from_ids(ids, 0).tolist() == [[T, F, F, T], [F, F, T, T]]
    # the decoder's start token may be the pad token (MarianMT): column 0 is never padding
    assert masks.pad_from_ids(ids, 0, start=True).tolist() == [[F, F, F, T], [F, F, T, T]]
    assert masks.pad_from_ids(torch.tensor([[0, 5]]), 0, start=True) is None  # only the start column: no padding
    assert masks.pad_from_ids(torch.tensor([[4, 5]]), 0) is None
    assert masks.pad_from_ids(ids, None) is None and masks.pad_from_ids(None, 0) is None


def test_masks_are_built_on_the_device_asked_for():
    # "meta" stands in for a GPU here: a mask built on the CPU would meet the scores on another device
    assert masks.causal_mask(3, device="meta").device.type == "meta"
    assert masks.decoder_self_mask(None, 2, 3, device="meta").device.type == "meta"
    assert masks.additive(torch.ones(2, 2, dtype=torch.bool, device="meta")).device.type == "meta"


def test_no_mask_gives_zeros_on_the_device_asked_for():
    """The zeros of "no mask" are made where the model is ("meta" stands in for a GPU here), not on torch's
    default device: the attention's written-out path adds them to scores on that device."""
    assert masks.additive(None, (2, 3), "meta").device.type == "meta"
    assert masks.additive(None, (2, 3)).device.type == "cpu"


def test_an_unmasked_attention_s_mask_step_is_made_on_the_model_s_device():
    from scratchformer.transformer.attention import MultiHeadAttention

    att = MultiHeadAttention(8, 2, False, "src_pos", "src_pos", "encoder.0.self_attn").to("meta")
    named = att.interior(torch.zeros(1, 3, 8, device="meta"), None, None, None)
    assert named["mask"].device.type == "meta" and named["mask"].shape == (1, 3, 3)
