"""MarianMT import: every hidden state, attention map and logit equals transformers' eager implementation.

The reference is a small MarianMTModel built from a config with random weights (no download), saved with
safetensors next to a word-level tokenizer.json, then opened through scratchformer's own loader.
"""

import json

import pytest
import torch
from tokenizers import processors

transformers = pytest.importorskip("transformers")
from transformers import MarianConfig, MarianMTModel  # noqa: E402

from scratchformer.errors import UserError  # noqa: E402
from scratchformer.loading.bundle import load_model  # noqa: E402
from scratchformer.loading.importers import load_hf_directory  # noqa: E402
from scratchformer.loading.tokenizers import word_level_tokenizer  # noqa: E402
from tests.scratchformer.hf_fixtures import attention_pairs, max_diffs, padded_batch  # noqa: E402

SENTENCES = ["the cat sat on the mat", "a dog ran in the park today", "the dog sat", "cat"]
TARGETS = ["a cat sat", "the dog ran in the park", "dog", "the mat on the cat today"]
ATOL = 1e-4


def _save_marian(directory, seed=0, **overrides):
    tok = word_level_tokenizer(SENTENCES + TARGETS, name="words")  # <pad>=0, <s>=1, </s>=2, <unk>=3
    values = dict(vocab_size=tok.vocab_size, d_model=32, encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                  max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=0, eos_token_id=2,
                  forced_eos_token_id=2, activation_function="swish", scale_embedding=True)  # fmt: skip
    values.update(overrides)
    torch.manual_seed(seed)
    ref = MarianMTModel(MarianConfig(**values))
    with torch.no_grad():
        ref.final_logits_bias.normal_()  # zero at init: make it count
    ref.save_pretrained(str(directory), safe_serialization=True)
    tok.hf.backend_tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>",
                                                                          special_tokens=[("</s>", 2)])  # as opus-mt's
    tok.hf.save_pretrained(str(directory))
    return MarianMTModel.from_pretrained(str(directory), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("opus-mt-tiny")
    ref = _save_marian(directory)
    return directory, ref


def _max_diffs(bundle, ref, sources, targets):
    src, tgt, src_mask, tgt_mask = padded_batch(bundle, sources, targets)
    with torch.no_grad():
        expected = ref(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask,
                       output_hidden_states=True, output_attentions=True)  # fmt: skip
    inputs = bundle.prepare(sources[0], targets[0])
    inputs.src, inputs.tgt, inputs.src_pad, inputs.tgt_pad = src, tgt, None, None  # padding masks from pad_id
    logits, trace = bundle.run(inputs)
    n_enc, n_dec = bundle.config.n_encoder_layers, bundle.config.n_decoder_layers
    pairs = {"encoder hidden 0": (trace["src_embed.sum"].tensor, expected.encoder_hidden_states[0]),
             "decoder hidden 0": (trace["tgt_embed.sum"].tensor, expected.decoder_hidden_states[0]),
             "logits": (logits, expected.logits)}  # fmt: skip
    for i in range(n_enc):
        pairs[f"encoder hidden {i + 1}"] = (trace[f"encoder.{i}.add_norm2.out"].tensor,
                                            expected.encoder_hidden_states[i + 1])
    for i in range(n_dec):
        pairs[f"decoder hidden {i + 1}"] = (trace[f"decoder.{i}.add_norm3.out"].tensor,
                                            expected.decoder_hidden_states[i + 1])
    # Every row, padded ones included: padding only removes keys (no row is fully masked, since the start
    # token and the first source token are never padding), so HF's large-negative mask and our −∞ agree.
    pairs.update(attention_pairs(bundle.config, trace, expected))
    return max_diffs(pairs)


def test_marian_single_sentences_match_transformers(marian_dir):
    directory, ref = marian_dir
    bundle = load_hf_directory(directory)
    for source, target in zip(SENTENCES[:3], TARGETS[:3]):
        diffs = _max_diffs(bundle, ref, [source], [target])
        assert max(diffs.values()) < ATOL, diffs


def test_marian_padded_batch_matches_transformers(marian_dir):
    directory, ref = marian_dir
    bundle = load_hf_directory(directory)
    src, tgt, _, _ = padded_batch(bundle, SENTENCES, TARGETS)
    assert (src == 0).any() and (tgt[:, 1:] == 0).any(), "the batch must contain padding on both sides"
    diffs = _max_diffs(bundle, ref, SENTENCES, TARGETS)
    assert max(diffs.values()) < ATOL, diffs


def test_marian_variants_match_transformers(tmp_path):
    """Unscaled embeddings, GELU, unshared embeddings, an untied output layer, 3 heads: all still equal."""
    ref = _save_marian(tmp_path, seed=3, scale_embedding=False, activation_function="gelu",
                       share_encoder_decoder_embeddings=False, tie_word_embeddings=False, d_model=24,
                       encoder_attention_heads=3, decoder_attention_heads=3, encoder_layers=1,
                       decoder_layers=3)  # fmt: skip
    bundle = load_hf_directory(tmp_path)
    assert not bundle.config.share_embeddings and not bundle.config.tie_output
    diffs = _max_diffs(bundle, ref, SENTENCES, TARGETS)
    assert max(diffs.values()) < ATOL, diffs


def test_marian_bundle_facts_and_trace(marian_dir):
    directory, _ = marian_dir
    bundle = load_model(str(directory))  # the path every command and "Open model…" take
    c = bundle.config
    options = (c.positional, c.activation, c.scale_embedding, c.final_logits_bias)
    assert options == ("sinusoidal_halves", "silu", True, True)
    assert c.bos_id == c.pad_id == 0 and bundle.start_id() == 0
    inputs = bundle.prepare("the cat sat", "a cat")
    assert inputs.source_tokens == [["the", "cat", "sat", "</s>"]]
    assert inputs.target_tokens == [["<pad>", "a", "cat"]]
    _, trace = bundle.run(inputs)
    names = [s.name for s in trace]
    assert names[0] == "src_embed.tokens" and names[-1] == "generator.probs"
    assert "decoder.1.cross_attn.weights" in names and "src_embed.scaled" in names
    # The start token is Marian's pad token, but it is the decoder's first position, not padding.
    first_row = trace["decoder.0.self_attn.weights"].tensor[0, :, 0, 0]
    assert torch.allclose(first_row, torch.ones_like(first_row))


def test_marian_mismatched_weight_is_one_sentence(tmp_path):
    _save_marian(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["encoder_ffn_dim"] = config["decoder_ffn_dim"] = 48
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"weight model\.encoder\.layers\.0\.fc1\.weight has shape \(64, 32\) "
                                        r"but config\.json says \(48, 32\)"):  # fmt: skip
        load_model(str(tmp_path))


def test_marian_without_a_tokenizer_says_so(tmp_path):
    _save_marian(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(UserError, match="has no tokenizer"):
        load_model(str(tmp_path))
