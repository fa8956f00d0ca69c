"""Checkpoints round-trip through safetensors; damaged ones give one sentence; text → inputs as documented."""

import json

import pytest
import torch

from scratchformer import Transformer, TransformerConfig, UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import load_checkpoint, save_checkpoint
from scratchformer.loading.tokenizers import word_level_tokenizer


@pytest.fixture
def checkpoint(tmp_path):
    src_tok = word_level_tokenizer(["the boy eats an apple", "we are friends"], "en")
    tgt_tok = word_level_tokenizer(["लड़का सेब खाता है", "हम दोस्त हैं"], "hi")
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, max_len=12,
                            src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                            share_embeddings=False, pad_id=0, bos_id=1, eos_id=2, name="tiny",
                            extra={"src_suffix": ["</s>"]})
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    return save_checkpoint(tmp_path / "tiny", model, src_tok, tgt_tok), model, src_tok, tgt_tok


def test_round_trip_gives_the_same_numbers(checkpoint):
    path, model, saved_src, saved_tgt = checkpoint
    loaded, src_tok, tgt_tok = load_checkpoint(path)
    src, tgt = torch.tensor([[4, 5, 6, 2]]), torch.tensor([[1, 4, 5]])
    with torch.no_grad():
        assert torch.equal(loaded(src, tgt), model(src, tgt))
    # the tokenizers come back as they were saved: the same ids for the same text, the same vocabulary
    for text in ("we are friends", "the boy eats an apple", "the mango"):
        assert src_tok.encode(text) == saved_src.encode(text)
    assert tgt_tok.encode("लड़का सेब खाता है") == saved_tgt.encode("लड़का सेब खाता है")
    everything = list(range(saved_tgt.vocab_size))
    assert tgt_tok.vocab_size == saved_tgt.vocab_size and tgt_tok.token_strings(everything) == \
        saved_tgt.token_strings(everything)
    assert loaded.generator.proj.weight.data_ptr() == loaded.tgt_embed.tokens.weight.data_ptr()  # still tied


def test_bundle_prepares_source_with_suffix_and_decoder_input_behind_start(checkpoint):
    path = checkpoint[0]
    bundle = load_model(str(path))
    inputs = bundle.prepare("the boy eats a mango", "लड़का सेब")
    assert inputs.source_tokens[0] == ["the", "boy", "eats", "<unk>", "<unk>", "</s>"]
    assert inputs.target_tokens[0] == ["<s>", "लड़का", "सेब"]
    assert inputs.unknown_words == ["a", "mango"]
    _, trace = bundle.run(inputs)
    assert trace["decoder.0.cross_attn.weights"].shape == (1, 2, 3, 6)


def test_truncation_is_reported_not_silent(checkpoint):
    path = checkpoint[0]
    bundle = load_model(str(path))
    long = " ".join(["boy"] * 30)
    with pytest.raises(UserError, match="reads at most 11"):
        bundle.prepare(long)
    inputs = bundle.prepare(long, truncate=True)
    assert inputs.src.shape == (1, 12) and "cut to the model's maximum" in inputs.notes[0]


@pytest.mark.parametrize("damage, message", [
    ("truncate", "cannot be read"),
    ("config", "do not match its config.json|do not fit its config.json"),
    ("missing", "model.safetensors is missing"),
    ("badjson", "Cannot read the model config"),
])
def test_damaged_checkpoints_give_one_sentence(checkpoint, damage, message):
    path = checkpoint[0]
    weights, config = path / "model.safetensors", path / "config.json"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "config":
        data = json.loads(config.read_text())
        data["d_ff"] = 32
        config.write_text(json.dumps(data))
    elif damage == "missing":
        weights.unlink()
    else:
        config.write_text("{not json")
    with pytest.raises(UserError, match=message):
        load_model(str(path))


def test_a_folder_that_is_no_model(tmp_path):
    with pytest.raises(UserError, match="has no config.json"):
        load_model(str(tmp_path))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UserError, match="is a file"):
        load_model(str(tmp_path / "notes.txt"))


def test_presets_are_reproducible():
    a, b = load_model("blog"), load_model("blog")
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))
