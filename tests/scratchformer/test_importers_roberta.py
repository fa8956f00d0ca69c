"""RoBERTa import: a small random RobertaModel saved with a tiny byte-level BPE tokenizer, opened through
load_model(path), equals transformers' eager implementation on every hidden state and attention map of a padded
batch (position ids counted from padding_idx + 1)."""

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

from scratchformer.loading.bundle import load_model
from scratchformer.transformer.departures import departures

SENTENCES = ["the cat sat on the mat", "a dog ran in the park today while the cat slept", "the dog sat"]
ATOL = 1e-4
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's ids 0 … 4


def _save_tokenizer(directory):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(SENTENCES * 3, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))  # <s> … </s>, as roberta-base's
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                 sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    hf.save_pretrained(str(directory))
    return len(hf)


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("roberta-tiny")
    vocab = _save_tokenizer(directory)
    config = RobertaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=48, max_position_embeddings=40, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2, type_vocab_size=1)  # fmt: skip
    torch.manual_seed(0)
    ref = RobertaModel(config)
    with torch.no_grad():  # sharpen attention: default init gives near-flat maps that hide mistakes
        for layer in ref.encoder.layer:
            layer.attention.self.query.weight.mul_(15.0)
            layer.attention.self.key.weight.mul_(15.0)
        ref.embeddings.position_embeddings.weight.mul_(20.0)  # positions that matter (a wrong offset shows)
    ref.save_pretrained(str(directory), safe_serialization=True)
    return directory, RobertaModel.from_pretrained(str(directory), attn_implementation="eager").eval()


def test_roberta_padded_batch_matches_transformers(roberta_dir):
    directory, ref = roberta_dir
    bundle = load_model(str(directory))
    rows = [bundle.encode_source(s) for s in SENTENCES]
    n = max(map(len, rows))
    pad_id = bundle.config.pad_id
    ids = torch.tensor([r + [pad_id] * (n - len(r)) for r in rows])  # (B, S)
    real = ids != pad_id  # (B, S)
    assert not real.all()
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=real.long(), output_hidden_states=True, output_attentions=True)
    _, trace = bundle.model.run_with_trace(ids, src_pad=~real)
    # Real tokens only: transformers gives padded positions the position id padding_idx, scratchformer
    # padding_idx + 1 + j; those rows differ, and no real token attends to them (padded keys are masked).
    diffs = {"embeddings": (trace["src_embed.layer_norm"].tensor - expected.hidden_states[0]).abs()[real].max()}
    for i in range(bundle.config.n_encoder_layers):
        ours = trace[f"encoder.{i}.add_norm2.out"].tensor
        diffs[f"hidden {i + 1}"] = (ours - expected.hidden_states[i + 1]).abs()[real].max()
        weights = trace[f"encoder.{i}.self_attn.weights"].tensor  # (B, h, S, S)
        diffs[f"attention {i}"] = (weights - expected.attentions[i]).abs().transpose(1, 2)[real].max()
        peak = weights.transpose(1, 2)[real].max(-1).values.mean()
        assert peak > 0.5, f"layer {i}: attention too flat to tell implementations apart ({peak:.2f})"
    assert max(float(v) for v in diffs.values()) < ATOL, diffs


def test_roberta_positions_start_after_the_padding_index(roberta_dir):
    directory, _ = roberta_dir
    bundle = load_model(str(directory))
    c = bundle.config
    assert (c.position_offset, c.max_len, c.type_vocab_size) == (2, 38, 1)
    assert bundle.model.src_embed.positions.num_embeddings == 40
    inputs = bundle.prepare("the cat sat")
    assert inputs.source_tokens[0][0] == "<s>" and inputs.source_tokens[0][-1] == "</s>"
    assert inputs.source_tokens[0][1:3] == ["the", " cat"]
    _, trace = bundle.run(inputs)
    table = bundle.model.src_embed.positions.weight
    assert torch.equal(trace["src_embed.positional_encoding"].tensor, table[2 : 2 + len(inputs.source_tokens[0])])
    assert "P[pos + 2]" in trace["src_embed.positional_encoding"].formula
    assert any("learned position embeddings" in d and "counted from 2" in d for d in departures(c))
