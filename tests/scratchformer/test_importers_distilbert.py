"""DistilBERT import: a small random DistilBertModel saved with a WordPiece vocab.txt, opened through
load_model(path), equals transformers' eager implementation on every hidden state and attention map of a padded
batch; with sinusoidal_pos_embds it uses the paper's own sinusoids."""

import pytest
import torch
from transformers import DistilBertConfig, DistilBertModel

from scratchformer.loading.bundle import load_model
from scratchformer.transformer.departures import departures

WORDS = "the cat sat on mat a dog ran in park today".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + ["##s", "##ing"]
SENTENCES = ["the cats sat on the mat", "a dog", "the dog ran in the park today"]
ATOL = 1e-4


def _save_distilbert(directory, seed=0, **overrides):
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    values = dict(vocab_size=len(VOCAB), dim=32, n_layers=2, n_heads=4, hidden_dim=48, max_position_embeddings=40,
                  pad_token_id=0)  # fmt: skip
    values.update(overrides)
    torch.manual_seed(seed)
    ref = DistilBertModel(DistilBertConfig(**values))
    with torch.no_grad():  # sharpen attention: default init gives near-flat maps that hide mistakes
        for layer in ref.transformer.layer:
            layer.attention.q_lin.weight.mul_(25.0)
            layer.attention.k_lin.weight.mul_(25.0)
        if not values.get("sinusoidal_pos_embds"):
            ref.embeddings.position_embeddings.weight.mul_(20.0)
    ref.save_pretrained(str(directory), safe_serialization=True)
    return DistilBertModel.from_pretrained(str(directory), attn_implementation="eager").eval()


def _max_diffs(bundle, ref):
    rows = [bundle.encode_source(s) for s in SENTENCES]
    n = max(map(len, rows))
    ids = torch.tensor([r + [0] * (n - len(r)) for r in rows])  # (B, S)
    real = ids != 0
    assert not real.all()
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=real.long(), output_hidden_states=True, output_attentions=True)
    _, trace = bundle.model.run_with_trace(ids, src_pad=~real)
    # Every row, padded ones included: positions count from 0 for every token, and padding only removes keys.
    diffs = {"embeddings": (trace["src_embed.layer_norm"].tensor - expected.hidden_states[0]).abs().max().item()}
    for i in range(bundle.config.n_encoder_layers):
        ours = trace[f"encoder.{i}.add_norm2.out"].tensor
        diffs[f"hidden {i + 1}"] = (ours - expected.hidden_states[i + 1]).abs().max().item()
        weights = trace[f"encoder.{i}.self_attn.weights"].tensor
        diffs[f"attention {i}"] = (weights - expected.attentions[i]).abs().max().item()
        peak = weights.transpose(1, 2)[real].max(-1).values.mean()
        assert peak > 0.5, f"layer {i}: attention too flat to tell implementations apart ({peak:.2f})"
    return diffs


@pytest.fixture(scope="module")
def distilbert_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("distilbert-tiny")
    return directory, _save_distilbert(directory)


def test_distilbert_padded_batch_matches_transformers(distilbert_dir):
    directory, ref = distilbert_dir
    bundle = load_model(str(directory))
    diffs = _max_diffs(bundle, ref)
    assert max(diffs.values()) < ATOL, diffs


def test_distilbert_config_and_tokens(distilbert_dir):
    directory, _ = distilbert_dir
    bundle = load_model(str(directory))
    c = bundle.config
    assert (c.type_vocab_size, c.positional, c.embed_layer_norm, c.layer_norm_eps, c.n_decoder_layers) == (
        0, "learned", True, 1e-12, 0)
    assert bundle.prepare("the cats").source_tokens == [["[CLS]", "the", "cat", "##s", "[SEP]"]]
    listed = departures(c)
    assert any("encoder-only" in d for d in listed) and any("LayerNorm on the embeddings" in d for d in listed)
    assert not any("token-type" in d or "pre-LN" in d for d in listed)


def test_distilbert_sinusoidal_positions_are_the_papers(tmp_path):
    ref = _save_distilbert(tmp_path, seed=1, sinusoidal_pos_embds=True, n_layers=1, activation="relu")
    bundle = load_model(str(tmp_path))
    assert (bundle.config.positional, bundle.config.activation) == ("sinusoidal", "relu")
    diffs = _max_diffs(bundle, ref)
    assert max(diffs.values()) < ATOL, diffs
    assert not any("position" in d for d in departures(bundle.config))
