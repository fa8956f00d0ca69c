"""Helpers shared by the encoder-decoder importer tests (BART/mBART, MarianMT): a padded batch built as scratchformer
builds it, and the comparison of our trace with transformers' outputs."""

import torch


def padded_batch(bundle, sources, targets):
    """Right-padded (B, S) source and (B, T) decoder input [start, target…] as scratchformer builds them."""
    pad = bundle.config.pad_id
    srcs = [bundle.encode_source(s) for s in sources]
    tgts = [[bundle.start_id()] + bundle.tgt_tokenizer.encode(t) for t in targets]
    s_len, t_len = max(map(len, srcs)), max(map(len, tgts))
    src = torch.tensor([r + [pad] * (s_len - len(r)) for r in srcs])
    tgt = torch.tensor([r + [pad] * (t_len - len(r)) for r in tgts])
    src_mask = torch.tensor([[1] * len(r) + [0] * (s_len - len(r)) for r in srcs])
    tgt_mask = torch.tensor([[1] * len(r) + [0] * (t_len - len(r)) for r in tgts])
    return src, tgt, src_mask, tgt_mask


def attention_pairs(config, trace, expected) -> dict:
    """(ours, theirs) for every attention map: each encoder layer's self-attention, each decoder layer's self- and
    cross-attention."""
    pairs = {}
    for i in range(config.n_encoder_layers):
        pairs[f"encoder {i} self-attention"] = (trace[f"encoder.{i}.self_attn.weights"].tensor,
                                                expected.encoder_attentions[i])  # fmt: skip
    for i in range(config.n_decoder_layers):
        pairs[f"decoder {i} self-attention"] = (trace[f"decoder.{i}.self_attn.weights"].tensor,
                                                expected.decoder_attentions[i])  # fmt: skip
        pairs[f"decoder {i} cross-attention"] = (trace[f"decoder.{i}.cross_attn.weights"].tensor,
                                                 expected.cross_attentions[i])  # fmt: skip
    return pairs


def max_diffs(pairs: dict) -> dict:
    """max |ours − theirs| for each (ours, theirs) pair, after checking that their shapes agree."""
    diffs = {}
    for what, (ours, theirs) in pairs.items():
        assert ours.shape == theirs.shape, what
        diffs[what] = (ours - theirs).abs().max().item()
    return diffs
