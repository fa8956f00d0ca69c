"""Hugging Face folders that cannot be opened: each gives one sentence naming what is wrong, and no file's
code ever runs (safetensors, or torch.load with weights_only=True)."""

import json
import pickle
import shutil
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertModel

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]


@pytest.fixture(scope="module")
def bert_template(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bert-template")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=16)  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(directory), safe_serialization=True)
    return directory


@pytest.fixture
def bert_dir(bert_template, tmp_path):
    directory = tmp_path / "bert"
    shutil.copytree(bert_template, directory)
    return directory


def _one_sentence(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and message.endswith("."), message
    return message


def test_the_template_opens(bert_dir):
    assert load_model(str(bert_dir)).config.n_encoder_layers == 4


def test_unsupported_model_type(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlnet", "d_model": 8}))
    with pytest.raises(UserError) as exc:
        load_model(str(tmp_path))
    supported = ("bart, bert, distilbert, gemma, gemma2, gemma3_text, gpt2, gpt_neox, llama, marian, mbart, mistral, "
                 "mixtral, olmo2, phi3, qwen2, qwen3, qwen3_moe, roberta, t5 and scratchformer checkpoints")
    assert f"is a 'xlnet' model; scratchformer can open {supported}" in _one_sentence(exc)


def test_missing_weights(bert_dir):
    (bert_dir / "model.safetensors").unlink()
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "has no model.safetensors" in _one_sentence(exc)


def test_mismatched_weight_names_the_tensor_and_both_shapes(bert_dir):
    tensors = load_file(str(bert_dir / "model.safetensors"))
    key = "encoder.layer.3.attention.self.query.weight"
    tensors[key] = torch.zeros(8, 16)
    save_file(tensors, str(bert_dir / "model.safetensors"))
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert f"weight {key} has shape (8, 16) but config.json says (16, 16)" in _one_sentence(exc)


def test_config_that_disagrees_with_the_weights(bert_dir):
    config = json.loads((bert_dir / "config.json").read_text())
    config["intermediate_size"] = 32
    (bert_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "intermediate.dense.weight has shape (24, 16) but config.json says (32, 16)" in _one_sentence(exc)


def test_missing_tensor(bert_dir):
    tensors = load_file(str(bert_dir / "model.safetensors"))
    del tensors["encoder.layer.2.output.dense.weight"]
    save_file(tensors, str(bert_dir / "model.safetensors"))
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "has no weight encoder.layer.2.output.dense.weight" in _one_sentence(exc)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_safetensors(bert_dir, damage):
    path = bert_dir / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(b"\x00not a safetensors file" * 10 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "cannot be read as safetensors" in _one_sentence(exc)


def test_pytorch_model_bin_is_read_with_weights_only(bert_dir):
    expected = load_model(str(bert_dir))
    tensors = load_file(str(bert_dir / "model.safetensors"))
    (bert_dir / "model.safetensors").unlink()
    torch.save(tensors, str(bert_dir / "pytorch_model.bin"))
    got = load_model(str(bert_dir))
    for (name, a), (_, b) in zip(expected.model.state_dict().items(), got.model.state_dict().items()):
        assert torch.equal(a, b), name


class _Exploit:
    """A pickle that would create a file when unpickled by a trusting loader."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickle_with_code_is_refused_and_never_runs(bert_dir, tmp_path):
    marker = tmp_path / "pwned"
    (bert_dir / "model.safetensors").unlink()
    with open(bert_dir / "pytorch_model.bin", "wb") as f:
        pickle.dump({"x": _Exploit(marker)}, f)
    with pytest.raises(UserError) as exc, warnings.catch_warnings(record=True) as chatter:
        warnings.simplefilter("always")
        load_model(str(bert_dir))
    assert [str(w.message) for w in chatter] == []  # nor PyTorch's note on the pickle protocol before it
    text = _one_sentence(exc)
    assert "cannot be read safely" in text and "save the model as model.safetensors" in text
    assert "trust" not in text and "weights_only" not in text and len(text) < 250  # not PyTorch's paragraph
    assert not marker.exists()


def test_a_damaged_pytorch_weights_file_is_one_sentence(bert_dir):
    (bert_dir / "model.safetensors").unlink()
    (bert_dir / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not a real archive")
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "is damaged or not a PyTorch weights file" in _one_sentence(exc)


def test_missing_tokenizer(bert_dir):
    (bert_dir / "vocab.txt").unlink()
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "has no tokenizer" in _one_sentence(exc)


def test_unsupported_bert_variant(bert_dir):
    config = json.loads((bert_dir / "config.json").read_text())
    config["position_embedding_type"] = "relative_key"
    (bert_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as exc:
        load_model(str(bert_dir))
    assert "'relative_key' position embeddings" in _one_sentence(exc)


def test_cli_prints_one_sentence(bert_dir, capsys):
    from scratchformer.cli import main

    (bert_dir / "model.safetensors").unlink()
    assert main(["trace", "--model", str(bert_dir), "--source", "the cat"]) == 2
    err = capsys.readouterr().err
    assert "has no model.safetensors" in err and "Traceback" not in err
