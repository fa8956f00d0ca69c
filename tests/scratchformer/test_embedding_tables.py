"""The embedding tables' sizes and settings: a position table with max_len + position_offset rows, so the longest
input reaches its last row; the embedding LayerNorm's ε from the config; a sinusoidal table that is rebuilt, never
saved; the dropout rate applied to the sums."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scratchformer import TransformerConfig
from scratchformer.transformer.embeddings import Embeddings, sinusoidal_encoding


def _embeddings(**kw) -> Embeddings:
    torch.manual_seed(0)
    config = TransformerConfig(**{"d_model": 6, "n_heads": 2, "max_len": 10, "dropout": 0.0, **kw})
    return Embeddings(config, 13, "src_pos", "src_embed").eval()


def test_the_longest_input_reaches_the_last_position_row():
    learned = _embeddings(positional="learned", scale_embedding=False, position_offset=2)
    assert learned.positions.weight.shape == (12, 6)  # max_len + offset rows: ids start at 2
    ids = torch.arange(10)[None] % 13  # max_len tokens
    with torch.no_grad():
        got = learned(ids)
        expected = learned.tokens.weight[ids] + learned.positions.weight[2:12]
    assert torch.allclose(got, expected, atol=1e-6)
    sinusoidal = _embeddings()  # (an offset is for learned tables only)
    assert torch.equal(sinusoidal.pe, sinusoidal_encoding(10, 6))
    assert torch.equal(sinusoidal.encoding(4, offset=6), sinusoidal_encoding(10, 6)[6:10])
    assert torch.equal(sinusoidal.encoding(3), sinusoidal_encoding(10, 6)[:3])  # from position 0 by default


def test_embeddings_are_scaled_by_the_root_of_d_model_even_when_it_is_two():
    emb = _embeddings(d_model=4)  # √4 = 2
    ids = torch.tensor([[3, 7]])
    with torch.no_grad():
        assert torch.allclose(emb(ids), emb.tokens.weight[ids] * 2 + sinusoidal_encoding(10, 4)[:2], atol=1e-6)


def test_the_embedding_layer_norm_takes_the_configs_epsilon():
    emb = _embeddings(positional="learned", scale_embedding=False, embed_layer_norm=True, layer_norm_eps=0.5)
    ids = torch.tensor([[3, 7, 1]])
    with torch.no_grad():
        rows = emb.tokens.weight[ids] + emb.positions.weight[:3]
        v = rows.double()
        by_hand = (v - v.mean(-1, keepdim=True)) / torch.sqrt(v.var(-1, unbiased=False, keepdim=True) + 0.5)
        assert torch.allclose(emb(ids).double(), by_hand, atol=1e-6)  # γ = 1, β = 0 at birth
        assert not torch.allclose(F.layer_norm(rows, (6,)).double(), by_hand, atol=1e-3)  # the default ε differs


def test_the_sinusoidal_table_is_not_saved():
    """Checkpoints and imported state_dicts hold no positional table: it is rebuilt from its closed form."""
    assert set(_embeddings().state_dict()) == {"tokens.weight"}
    assert set(_embeddings(positional="learned").state_dict()) == {"tokens.weight", "positions.weight"}


def test_dropout_is_applied_to_the_sums_at_the_configs_rate():
    emb = _embeddings(dropout=0.25, scale_embedding=False, positional="none").train()  # not torch's default 0.5
    ids = torch.zeros(64, 10, dtype=torch.long)
    torch.manual_seed(1)
    with torch.no_grad():
        out = emb(ids)
    row = emb.tokens.weight[0].detach()
    kept = out != 0
    assert 0.7 < kept.float().mean() < 0.8
    assert torch.allclose(out, (row / 0.75).expand_as(out) * kept, atol=1e-6)  # kept ones × 1/(1 − p)


def test_a_long_table_is_the_closed_form_rounded_once_to_float32():
    """Computed in float64 and rounded once: at position 2047 an angle worked out in float32 would be off by
    about 1e-4, so the sines would be too."""
    pe = sinusoidal_encoding(2048, 512)
    pos = np.arange(2048, dtype=np.float64)[:, None]
    angle = pos / 10000.0 ** (np.arange(0, 512, 2, dtype=np.float64) / 512)
    assert pe.dtype == torch.float32
    assert np.abs(pe[:, 0::2].double().numpy() - np.sin(angle)).max() <= 2**-25  # half a float32 step below 1
    assert np.abs(pe[:, 1::2].double().numpy() - np.cos(angle)).max() <= 2**-25


def test_an_unknown_layout_is_named():
    with pytest.raises(ValueError, match="^unknown layout 'diagonal'$"):
        sinusoidal_encoding(4, 6, "diagonal")
