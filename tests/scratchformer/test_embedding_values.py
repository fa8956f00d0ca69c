"""The embedding paths the paper's comparison does not take, by hand: BERT's token-type rows and embedding
LayerNorm, learned positions shifted by RoBERTa's offset, Marian's sines-then-cosines table, no scaling, and the
position offset of cached decoding."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from scratchformer import TransformerConfig
from scratchformer.transformer.embeddings import Embeddings, sinusoidal_encoding


def _embeddings(**kw) -> Embeddings:
    torch.manual_seed(0)
    config = TransformerConfig(d_model=6, n_heads=2, max_len=10, dropout=0.0, **kw)
    return Embeddings(config, 13, "src_pos", "src_embed").eval()


def test_bert_adds_token_type_rows_then_layer_norm():
    emb = _embeddings(positional="learned", scale_embedding=False, type_vocab_size=2, embed_layer_norm=True,
                      position_offset=2)
    with torch.no_grad():
        emb.layer_norm.weight.normal_(1, 0.5)
        emb.layer_norm.bias.normal_(0, 0.5)
    ids, types = torch.tensor([[3, 7, 1]]), torch.tensor([[0, 1, 1]])
    with torch.no_grad():
        got, no_types = emb(ids, token_type_ids=types), emb(ids)
        rows = emb.tokens.weight[ids] + emb.positions.weight[2:5] + emb.token_types.weight[types]  # shifted by 2
        expected = F.layer_norm(rows, (6,), emb.layer_norm.weight, emb.layer_norm.bias, emb.layer_norm.eps)
        zeros = emb.tokens.weight[ids] + emb.positions.weight[2:5] + emb.token_types.weight[0]  # no types: type 0
        expected_zeros = F.layer_norm(zeros, (6,), emb.layer_norm.weight, emb.layer_norm.bias, emb.layer_norm.eps)
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(no_types, expected_zeros, atol=1e-6)
    assert emb.encoding(3, offset=4).data_ptr() == emb.positions.weight[6:9].data_ptr()


def test_scaling_offsets_and_the_halves_layout():
    emb = _embeddings()  # the paper: E[x]·√d + PE
    ids = torch.tensor([[4, 5]])
    with torch.no_grad():
        at_3 = emb(ids, offset=3)  # cached decoding: these tokens sit at positions 3 and 4
        expected = emb.tokens.weight[ids] * math.sqrt(6) + sinusoidal_encoding(10, 6)[3:5]
    assert torch.allclose(at_3, expected, atol=1e-6)
    plain = _embeddings(scale_embedding=False, positional="none")
    with torch.no_grad():
        assert torch.equal(plain(ids), plain.tokens.weight[ids])  # no ×√d, PE all zeros
    halves = sinusoidal_encoding(4, 6, "halves")
    pos, i = 3, 1
    angle = pos / 10000 ** (2 * i / 6)
    assert math.isclose(halves[pos, i], math.sin(angle), abs_tol=1e-6)  # sines first …
    assert math.isclose(halves[pos, 3 + i], math.cos(angle), abs_tol=1e-6)  # … then the cosines
    assert _embeddings(positional="sinusoidal_halves").pe.equal(sinusoidal_encoding(10, 6, "halves"))
    assert sinusoidal_encoding(3, 5).dtype == torch.float32
