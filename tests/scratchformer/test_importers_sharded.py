"""Sharded safetensors (model.safetensors.index.json and its shards, as save_pretrained writes a model larger than
max_shard_size): the model opened from the shards has every parameter of the one opened from a single file and
equals transformers on every hidden state and attention map; a shard the index names but the folder lacks, a
damaged shard and a damaged index are each one sentence."""

import json
import shutil

import pytest
import torch
from transformers import BertConfig, BertModel

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]
INDEX = "model.safetensors.index.json"
ATOL = 1e-5


def _save(directory, ref, **kwargs):
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    ref.save_pretrained(str(directory), safe_serialization=True, **kwargs)
    return directory


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(single-file folder, sharded folder, transformers' model): the same random BERT saved both ways."""
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=16, attn_implementation="eager")  # fmt: skip
    torch.manual_seed(0)
    ref = BertModel(config).eval()
    with torch.no_grad():  # sharpen attention so that a wrong tensor shows in the maps
        for layer in ref.encoder.layer:
            layer.attention.self.query.weight.mul_(8.0)
    single = _save(tmp_path_factory.mktemp("bert-single"), ref)
    sharded = _save(tmp_path_factory.mktemp("bert-sharded"), ref, max_shard_size="8KB")
    return single, sharded, ref


@pytest.fixture
def sharded_copy(folders, tmp_path):
    directory = tmp_path / "sharded"
    shutil.copytree(folders[1], directory)
    return directory


def _shards(directory) -> list[str]:
    return sorted(set(json.loads((directory / INDEX).read_text())["weight_map"].values()))


def _one_sentence(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and message.endswith("."), message
    return message


def test_a_sharded_folder_has_every_parameter_of_the_single_file(folders):
    single, sharded, _ = folders
    assert not (sharded / "model.safetensors").exists() and len(_shards(sharded)) >= 3
    ours_single, ours_sharded = load_model(str(single)).model, load_model(str(sharded)).model
    a, b = ours_single.state_dict(), ours_sharded.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    # every layer came from some shard: the last layer's weights are not the fresh model's initial ones
    last = f"encoder.{ours_sharded.config.n_encoder_layers - 1}"
    assert any(last in name for name in b)


def test_a_sharded_folder_equals_transformers(folders):
    _, sharded, ref = folders
    bundle = load_model(str(sharded))
    ids = torch.tensor([[2, 5, 6, 7, 8, 5, 9, 3], [2, 6, 7, 3, 0, 0, 0, 0]])  # (B, S): [CLS] … [SEP] [PAD]…
    mask = (ids != 0).long()  # (B, S)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    _, trace = bundle.model.run_with_trace(ids, src_pad=mask == 0)
    real = mask.bool()  # hidden states compared on real tokens
    diffs = {"embeddings": (trace["src_embed.layer_norm"].tensor - expected.hidden_states[0]).abs()[real].max()}
    for i in range(bundle.config.n_encoder_layers):
        hidden = trace[f"encoder.{i}.add_norm2.out"].tensor
        diffs[f"hidden {i + 1}"] = (hidden - expected.hidden_states[i + 1]).abs()[real].max()
        weights = trace[f"encoder.{i}.self_attn.weights"].tensor
        diffs[f"attention {i}"] = (weights - expected.attentions[i]).abs().max()
    assert max(d.item() for d in diffs.values()) < ATOL, diffs


def test_a_shard_named_in_the_index_but_missing_is_one_sentence(sharded_copy):
    shard = _shards(sharded_copy)[-1]
    (sharded_copy / shard).unlink()
    with pytest.raises(UserError) as exc:
        load_model(str(sharded_copy))
    assert f"{sharded_copy} lacks the weight file {shard} named in {INDEX}." == _one_sentence(exc)


def test_a_damaged_shard_is_one_sentence(sharded_copy):
    shard = sharded_copy / _shards(sharded_copy)[1]
    shard.write_bytes(shard.read_bytes()[:40])
    with pytest.raises(UserError) as exc:
        load_model(str(sharded_copy))
    assert f"{shard} cannot be read as safetensors" in _one_sentence(exc)


@pytest.mark.parametrize("text", [
    "{not json",
    json.dumps({"metadata": {}}),  # no weight_map
    json.dumps({"weight_map": ["model-00001-of-00005.safetensors"]}),
    json.dumps({"weight_map": {"embeddings.word_embeddings.weight": 1}}),  # a shard that is not a file name
    json.dumps([1, 2]),
])  # fmt: skip
def test_a_damaged_index_is_one_sentence(sharded_copy, text):
    (sharded_copy / INDEX).write_text(text)
    with pytest.raises(UserError) as exc:
        load_model(str(sharded_copy))
    assert f"{sharded_copy / INDEX} is not a valid safetensors index" in _one_sentence(exc)


def test_a_shard_outside_the_folder_is_not_read(sharded_copy, tmp_path):
    """The index names files in its own folder only: a path that climbs out of it is refused, not followed."""
    index = json.loads((sharded_copy / INDEX).read_text())
    first = _shards(sharded_copy)[0]
    shutil.copy(sharded_copy / first, tmp_path / "elsewhere.safetensors")
    index["weight_map"] = {k: ("../elsewhere.safetensors" if v == first else v) for k, v in index["weight_map"].items()}
    (sharded_copy / INDEX).write_text(json.dumps(index))
    with pytest.raises(UserError) as exc:
        load_model(str(sharded_copy))
    assert "lacks the weight file ../elsewhere.safetensors" in _one_sentence(exc)
