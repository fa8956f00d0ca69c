"""Hugging Face ids from the local cache, with no network: a cache laid out as huggingface_hub lays it out
(models--org--name/refs/main → snapshots/<revision>/) in a temporary HF_HOME."""

import json
import shutil

import pytest
import torch
from transformers import BertConfig, BertModel

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.hf_cache import cached_models, hub_cache, looks_like_id, resolve

OLD, NEW = "a" * 40, "b" * 40  # two revisions of one model: refs/main names the newer


def tiny_bert(directory, seed: int) -> None:
    words = "the cat sat on mat a dog ran".split()
    (directory / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    config = BertConfig(vocab_size=13, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=20)  # fmt: skip
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(str(directory), safe_serialization=True)


def step_revision_cache(tmp_path, monkeypatch, refs):
    """A Hugging Face cache (HF_HOME under tmp_path) holding someone/tiny-bert at the given refs, each
    (ref, revision): one folder per revision, refs naming them (Pythia-style "stepN" and "main"). Returns the
    model's cache folder."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    repo = home / "hub" / "models--someone--tiny-bert"
    (repo / "refs").mkdir(parents=True)
    for seed, (ref, revision) in enumerate(refs):
        folder = repo / "snapshots" / revision
        if not folder.exists():
            folder.mkdir(parents=True)
            tiny_bert(folder, seed)
        (repo / "refs" / ref).write_text(revision)
    return repo


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    repo = home / "hub" / "models--someone--tiny-bert"
    for revision, seed in ((OLD, 1), (NEW, 2)):
        folder = repo / "snapshots" / revision
        folder.mkdir(parents=True)
        tiny_bert(folder, seed)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(NEW)
    other = home / "hub" / "models--someone--mamba-thing" / "snapshots" / OLD  # a family scratchformer cannot open
    other.mkdir(parents=True)
    (other / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    return home


def test_an_id_opens_the_revision_refs_main_names(hf_home):
    assert hub_cache() == hf_home / "hub"
    assert resolve("someone/tiny-bert") == hf_home / "hub" / "models--someone--tiny-bert" / "snapshots" / NEW
    bundle = load_model("someone/tiny-bert")
    assert bundle.name == "someone/tiny-bert"
    newer = BertModel.from_pretrained(str(resolve("someone/tiny-bert")))
    older = BertModel.from_pretrained(str(hf_home / "hub" / "models--someone--tiny-bert" / "snapshots" / OLD))
    ours = bundle.model.state_dict()["src_embed.tokens.weight"]
    assert torch.equal(ours, newer.embeddings.word_embeddings.weight.detach())
    assert not torch.equal(ours, older.embeddings.word_embeddings.weight.detach())


def test_the_cache_lists_only_families_that_open(hf_home):
    listed = cached_models()
    assert [(m.repo_id, m.model_type) for m in listed] == [("someone/tiny-bert", "bert")]


def test_an_uncached_id_is_one_sentence_that_says_how_to_get_it(hf_home, capsys):
    with pytest.raises(UserError) as exc:
        load_model("someone/not-here")
    text = str(exc.value)
    assert "not in the local Hugging Face cache" in text and "hf download someone/not-here" in text
    assert "\n" not in text
    assert main(["trace", "--model", "someone/not-here", "--source", "the cat"]) == 2
    err = capsys.readouterr().err
    assert "never downloads" in err and "Traceback" not in err


def test_the_command_line_traces_a_cached_id(hf_home, capsys):
    assert main(["trace", "--model", "someone/tiny-bert", "--source", "the cat sat", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source_tokens"][0] == ["[CLS]", "the", "cat", "sat", "[SEP]"]


def test_a_folder_named_like_an_id_stays_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "en").mkdir(parents=True)
    assert looks_like_id("org/name") and not looks_like_id("models/en")


def test_a_repo_without_refs_main_uses_its_only_snapshot_and_a_broken_one_says_so(hf_home):
    repo = hf_home / "hub" / "models--someone--tiny-bert"
    (repo / "refs" / "main").unlink()
    shutil.rmtree(repo / "snapshots" / OLD)
    assert resolve("someone/tiny-bert").name == NEW
    shutil.rmtree(repo / "snapshots" / NEW)
    with pytest.raises(UserError, match="without a complete snapshot"):
        resolve("someone/tiny-bert")
