"""The masked-language-model head of BERT, RoBERTa and DistilBERT folders, and the logit lens over the encoder it
allows: tiny random *ForMaskedLM models saved to a temp folder, opened through load_model(path), give
transformers' masked-LM logits, and every point of the encoder's residual stream read through the head equals
transformers' head applied to the matching hidden state — the last point being the head's own output. Folders
without a head open as before (the encoder alone) and get the lens's one-sentence refusal."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertModel,
    DistilBertConfig,
    DistilBertForMaskedLM,
    RobertaConfig,
    RobertaForMaskedLM,
)

from scratchformer.analyses import lens
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.transformer.departures import departures
from scratchformer.transformer.parameters import parameter_counts
from tests.scratchformer.test_importers_roberta import _save_tokenizer

WORDS = "the cat sat on mat a dog ran in park today".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + ["##s", "##ing"]
SOURCE = "the cats sat on the mat"
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=40)  # fmt: skip


def _sharpen(ref, bias) -> None:
    """Random init gives near-uniform guesses; a spread output bias makes the head's choices and ranks differ."""
    with torch.no_grad():
        bias.normal_(0.0, 0.3)
        for p in ref.parameters():
            if p.dim() == 2:
                p.mul_(10.0)


def save_bert_mlm(directory, tie: bool = True):
    """A random 2-layer BertForMaskedLM with a WordPiece vocab.txt in `directory`; returns transformers' model."""
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    torch.manual_seed(0)
    ref = BertForMaskedLM(BertConfig(vocab_size=len(VOCAB), tie_word_embeddings=tie, **SIZES)).eval()
    _sharpen(ref, ref.cls.predictions.bias)
    ref.save_pretrained(str(directory), safe_serialization=True)
    return BertForMaskedLM.from_pretrained(str(directory), attn_implementation="eager").eval()


def save_roberta_mlm(directory):
    vocab = _save_tokenizer(directory)
    torch.manual_seed(0)
    ref = RobertaForMaskedLM(RobertaConfig(vocab_size=vocab, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                           type_vocab_size=1, **SIZES)).eval()  # fmt: skip
    _sharpen(ref, ref.lm_head.bias)
    ref.save_pretrained(str(directory), safe_serialization=True)
    return RobertaForMaskedLM.from_pretrained(str(directory), attn_implementation="eager").eval()


def save_distilbert_mlm(directory):
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    torch.manual_seed(0)
    ref = DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(VOCAB), dim=32, n_layers=2, n_heads=4,
                                                 hidden_dim=48, max_position_embeddings=40, pad_token_id=0)).eval()
    _sharpen(ref, ref.vocab_projector.bias)
    ref.save_pretrained(str(directory), safe_serialization=True)
    return DistilBertForMaskedLM.from_pretrained(str(directory), attn_implementation="eager").eval()


def their_head(ref):
    """transformers' own masked-LM head of `ref`, as a function of hidden states (…, d) → logits (…, vocab)."""
    if isinstance(ref, BertForMaskedLM):
        return ref.cls
    if isinstance(ref, RobertaForMaskedLM):
        return ref.lm_head
    return lambda h: ref.vocab_projector(ref.vocab_layer_norm(ref.activation(ref.vocab_transform(h))))


SAVERS = {"bert": save_bert_mlm, "roberta": save_roberta_mlm, "distilbert": save_distilbert_mlm}


@pytest.fixture(scope="module", params=sorted(SAVERS))
def mlm_folder(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(f"{request.param}-mlm")
    ref = SAVERS[request.param](directory)
    return directory, ref


def _traced(bundle, source=SOURCE):
    inputs = bundle.prepare_run(source, "")
    _, trace = bundle.run(inputs)
    return inputs, trace


def test_the_head_is_imported_and_gives_transformers_masked_lm_logits(mlm_folder):
    directory, ref = mlm_folder
    bundle = load_model(str(directory))
    c, m = bundle.config, bundle.model
    assert c.mlm_head and c.tie_output and not c.has_decoder and m.generator is None  # still an encoder alone
    assert m.mlm_head.proj.weight is m.src_embed.tokens.weight  # tied, as the folder stores it
    assert "masked-language-model head" in departures(c)[0]
    ids = torch.tensor([bundle.encode_source(SOURCE)])
    with torch.no_grad():
        hidden = m(ids)  # forward still ends with the encoder's hidden states
        assert hidden.shape == (1, ids.shape[1], c.d_model)
        torch.testing.assert_close(m.mlm_head(hidden), ref(input_ids=ids).logits, rtol=1e-4, atol=1e-4)
    counts = parameter_counts(m)
    assert counts["total"].count == sum(p.numel() for p in m.parameters())
    assert "elsewhere" not in counts["total"].formula  # the head is a block of its own
    assert counts["mlm_head"].shared == c.src_vocab_size * c.d_model  # the tied matrix is counted once


def test_the_lens_reads_every_encoder_point_through_the_head(mlm_folder):
    directory, ref = mlm_folder
    bundle = load_model(str(directory))
    inputs, trace = _traced(bundle)
    result = lens.compute(bundle, trace, k=3)
    layers = bundle.config.n_encoder_layers
    assert result.stack == "encoder" and len(result.steps) == 1 + 2 * layers
    assert result.labels[0] == "embeddings" and result.labels[-1] == f"layer {layers} feed-forward"
    assert result.positions == trace.source_tokens[0] and result.positions[0] in ("[CLS]", "<s>")
    with torch.no_grad():
        out = ref(input_ids=inputs.src, output_hidden_states=True)
        want = out.logits[0].softmax(-1)  # (S, vocab): transformers' masked-LM output
        head = their_head(ref)
        # after the embeddings, then after each layer's feed-forward sublayer: transformers' hidden states
        per_point = {0: head(out.hidden_states[0][0]).softmax(-1)}
        per_point.update({2 * (i + 1): head(out.hidden_states[i + 1][0]).softmax(-1) for i in range(layers)})
    assert result.emitted_ids == want.argmax(-1).tolist()
    assert len(set(result.emitted_ids)) > 1  # the head's guesses differ from position to position
    torch.testing.assert_close(result.top_probs[-1], want.topk(3, dim=-1).values, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(result.final_probs[-1], want.max(-1).values, rtol=1e-4, atol=1e-5)
    assert result.final_ranks[-1].tolist() == [1] * want.shape[0]
    emitted = torch.tensor(result.emitted_ids)[:, None]
    for i, p in per_point.items():
        torch.testing.assert_close(result.final_probs[i], p.gather(-1, emitted)[:, 0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(result.top_probs[i], p.topk(3, dim=-1).values, rtol=1e-4, atol=1e-5)


def test_an_untied_vocabulary_matrix_is_read_from_the_folder(tmp_path):
    """tie_word_embeddings false: the folder stores cls.predictions.decoder.weight and .bias; the bias transformers
    applies is the decoder's own (zero here), not cls.predictions.bias (made random by _sharpen)."""
    ref = save_bert_mlm(tmp_path, tie=False)
    bundle = load_model(str(tmp_path))
    m = bundle.model
    assert bundle.config.mlm_head and not bundle.config.tie_output
    assert m.mlm_head.proj.weight is not m.src_embed.tokens.weight
    inputs, trace = _traced(bundle)
    with torch.no_grad():
        want = ref(input_ids=inputs.src).logits[0].softmax(-1)
    torch.testing.assert_close(lens.compute(bundle, trace).final_probs[-1], want.max(-1).values, rtol=1e-4,
                               atol=1e-5)  # fmt: skip


def test_a_folder_without_a_head_opens_as_before_and_has_no_lens(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    torch.manual_seed(1)
    BertModel(BertConfig(vocab_size=len(VOCAB), **SIZES)).save_pretrained(str(tmp_path), safe_serialization=True)
    bundle = load_model(str(tmp_path))
    assert not bundle.config.mlm_head and bundle.model.mlm_head is None
    assert departures(bundle.config)[0] == "encoder-only: no decoder and no output layer"
    assert "mlm_head" not in parameter_counts(bundle.model)
    _, trace = _traced(bundle)
    with pytest.raises(UserError, match="^This model is an encoder alone without an output layer") as err:
        lens.compute(bundle, trace)
    assert "no masked-language-model head" in str(err.value) and "\n" not in str(err.value)


def test_an_mlm_head_needs_an_encoder_only_model():
    from scratchformer.transformer.config import TransformerConfig

    with pytest.raises(UserError, match="encoder-only"):
        TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, mlm_head=True)


def test_the_lens_command_reads_an_encoder_through_its_head(tmp_path, capsys):
    ref = save_bert_mlm(tmp_path)
    assert main(["lens", "--model", str(tmp_path), "--source", SOURCE, "--json", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stack"] == "encoder" and out["positions"][:4] == ["[CLS]", "the", "cat", "##s"]
    assert [p["label"] for p in out["points"]] == ["embeddings", "layer 1 self-attention", "layer 1 feed-forward",
                                                   "layer 2 self-attention", "layer 2 feed-forward"]  # fmt: skip
    bundle = load_model(str(tmp_path))
    ids = torch.tensor([bundle.encode_source(SOURCE)])
    with torch.no_grad():
        want = ref(input_ids=ids).logits[0].softmax(-1)  # (S, vocab)
    last = out["points"][-1]
    assert [e["id"] for e in out["emitted"]] == want.argmax(-1).tolist()
    assert [f["p"] for f in last["final"]] == pytest.approx(want.max(-1).values.tolist(), abs=1e-5)
    assert all(f["rank"] == 1 for f in last["final"]) and len(last["top"][0]) == 2
    assert main(["lens", "--model", str(tmp_path), "--source", SOURCE]) == 0
    assert "the masked-LM head predicts" in capsys.readouterr().out
