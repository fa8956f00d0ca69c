"""Positional encoding equals the closed form; GPT-2 ids equal GPT-2's; config validation explains itself."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchformer import TransformerConfig, UserError, preset
from scratchformer.loading.tokenizers import gpt2_tokenizer
from scratchformer.transformer.embeddings import sinusoidal_encoding


@settings(max_examples=20, deadline=None)
@given(d_model=st.integers(1, 33), max_len=st.integers(1, 40))
def test_positional_encoding_is_the_closed_form(d_model, max_len):
    pe = sinusoidal_encoding(max_len, d_model)
    for pos in range(0, max_len, max(1, max_len // 5)):
        for j in range(d_model):
            i2 = j - (j % 2)  # 2i for both members of the pair
            angle = pos / 10000 ** (i2 / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(float(pe[pos, j]) - expected) < 1e-6, (pos, j)


def test_halves_layout_puts_all_sines_first():
    pe = sinusoidal_encoding(5, 6, "halves")
    inter = sinusoidal_encoding(5, 6)
    assert torch.allclose(pe[:, :3], inter[:, 0::2]) and torch.allclose(pe[:, 3:], inter[:, 1::2])


def test_gpt2_ids_match_gpt2():
    tok = gpt2_tokenizer()
    assert tok.encode("<|endoftext|> machine learning using PyTorch") == [50256, 4572, 4673, 1262, 9485, 15884, 354]
    assert tok.vocab_size == 50257 and tok.bos_id == 50256
    assert tok.decode(tok.encode("héllo wörld 🤖 नमस्ते")) == "héllo wörld 🤖 नमस्ते"


def test_presets_have_the_documented_sizes():
    p, b = preset("paper"), preset("blog")
    sizes = (p.d_model, p.n_heads, p.d_ff, p.n_encoder_layers, p.n_decoder_layers, p.dropout)
    assert sizes == (512, 8, 2048, 6, 6, 0.1)
    assert (b.d_model, b.n_heads, b.d_ff, b.n_encoder_layers, b.n_decoder_layers) == (6, 2, 12, 1, 1)
    assert b.src_vocab_size == 50257 and b.max_len == 10 and b.d_head == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=10, n_heads=3), "d_model 10 is not divisible by n_heads 3"),
        (dict(n_encoder_layers=0, n_decoder_layers=0), "at least one encoder layer or one decoder layer"),
        (dict(dropout=1.5), "dropout must be in"),
        (dict(d_model=0), "d_model must be a positive whole number"),
        (dict(activation="tanh"), "activation 'tanh' is not one of"),
        (dict(src_vocab_size=10, tgt_vocab_size=12), "share_embeddings needs equal vocabularies"),
    ],
)
def test_config_validation_explains_itself(kwargs, message):
    with pytest.raises(UserError, match=message):
        TransformerConfig(**kwargs)


def test_unknown_preset_lists_the_choices():
    with pytest.raises(UserError, match="paper, blog"):
        preset("gpt5")


def test_word_level_reading_ignores_case_and_punctuation_but_keeps_devanagari_marks():
    from scratchformer.loading.tokenizers import word_level_tokenizer

    tok = word_level_tokenizer(["the boy eats an apple", "लड़का सेब खाता है"], "t")
    assert tok.encode("The boy eats an Apple.") == tok.encode("the boy eats an apple")
    assert tok.unknown_words("The boy eats a pizza!") == ["a", "pizza"]
    assert tok.token_strings(tok.encode("लड़का सेब खाता है।")) == ["लड़का", "सेब", "खाता", "है"]
