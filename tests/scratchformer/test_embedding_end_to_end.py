"""The paper's whole path, token ids to logits, equals one built from torch's own modules with the same weights:
nn.Embedding × √d_model + the sinusoids of §3.5 (written out here from the formula), torch.nn.Transformer, and a
Linear to the vocabulary. The other comparisons feed both models our own embeddings; this one does not."""

from __future__ import annotations

import math

import torch
from torch import nn

from scratchformer.loading.importers import from_torch_transformer

D, HEADS, VOCAB_SRC, VOCAB_TGT = 16, 4, 29, 31


def paper_sinusoids(n: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), one cell at a time."""
    pe = torch.zeros(n, d)
    for pos in range(n):
        for j in range(d):
            angle = pos / 10000 ** ((j - j % 2) / d)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def test_ids_to_logits_equal_nn_embedding_sqrt_d_model_and_nn_transformer():
    torch.manual_seed(5)
    ref = nn.Transformer(d_model=D, nhead=HEADS, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
                         dropout=0.0, batch_first=True).eval()
    ref.encoder.norm = ref.decoder.norm = None  # the paper has no LayerNorm after the stacks
    src_embedding, tgt_embedding = nn.Embedding(VOCAB_SRC, D), nn.Embedding(VOCAB_TGT, D)
    to_vocab = nn.Linear(D, VOCAB_TGT, bias=False)
    with torch.no_grad():  # unit-variance embeddings, as trained ones are: the ×4 then outweighs the PE
        src_embedding.weight.normal_(0, 1)
        tgt_embedding.weight.normal_(0, 1)

    ours = from_torch_transformer(ref, src_vocab_size=VOCAB_SRC, tgt_vocab_size=VOCAB_TGT, max_len=32).eval()
    with torch.no_grad():
        ours.src_embed.tokens.weight.copy_(src_embedding.weight)
        ours.tgt_embed.tokens.weight.copy_(tgt_embedding.weight)
        ours.generator.proj.weight.copy_(to_vocab.weight)

    src, tgt = torch.randint(0, VOCAB_SRC, (2, 9)), torch.randint(0, VOCAB_TGT, (2, 7))
    pe = paper_sinusoids(9, D)
    with torch.no_grad():
        x_src = src_embedding(src) * math.sqrt(D) + pe[:9]  # (B, S, d)
        x_tgt = tgt_embedding(tgt) * math.sqrt(D) + pe[:7]  # (B, T, d)
        causal = nn.Transformer.generate_square_subsequent_mask(7, dtype=torch.bool)
        expected = to_vocab(ref(x_src, x_tgt, tgt_mask=causal))  # (B, T, vocab)
        got = ours(src, tgt)
        _, trace = ours.run_with_trace(src, tgt)
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()
    assert torch.allclose(trace["generator.logits"].tensor, expected, atol=1e-5)
    # the traced embedding steps are the paper's: E[x], E[x]·√d_model, PE, and their sum
    assert torch.equal(trace["src_embed.lookup"].tensor, src_embedding(src))
    assert torch.allclose(trace["src_embed.scaled"].tensor, src_embedding(src) * 4.0, atol=1e-6)  # √16 = 4
    assert torch.allclose(trace["tgt_embed.positional_encoding"].tensor, pe[:7], atol=1e-6)
    assert torch.allclose(trace["tgt_embed.sum"].tensor, x_tgt, atol=1e-5)
