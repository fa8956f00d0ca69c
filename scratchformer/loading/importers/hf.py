"""A local Hugging Face model folder → ModelBundle: reads config.json and dispatches on its model_type.

Only files are read: config.json (JSON), the weights (safetensors, or pytorch_model.bin with weights_only=True)
and the tokenizer files. Nothing is downloaded and no code from the folder runs (no trust_remote_code).
"""

from __future__ import annotations

import importlib
import json
import re
from contextlib import contextmanager
from pathlib import Path

import torch

from ...errors import UserError

# model_type → (module, loader): each family's importer is imported only when a folder of that family is opened.
LOADERS = {
    "bart": ("bart", "load_bart"),
    "bert": ("bert", "load_bert"),
    "distilbert": ("distilbert", "load_distilbert"),
    "gemma": ("gemma", "load_gemma"),
    "gemma2": ("gemma", "load_gemma"),
    "gemma3_text": ("gemma", "load_gemma"),
    "gpt2": ("gpt2", "load_gpt2"),
    "gpt_neox": ("neox", "load_neox"),
    "llama": ("llama", "load_llama"),
    "marian": ("marian", "load_marian"),
    "mbart": ("bart", "load_mbart"),
    "mistral": ("llama", "load_llama"),
    "mixtral": ("moe", "load_moe"),
    "olmo2": ("olmo", "load_olmo2"),
    "phi3": ("llama", "load_llama"),
    "qwen2": ("llama", "load_llama"),
    "qwen3": ("llama", "load_llama"),
    "qwen3_moe": ("moe", "load_moe"),
    "roberta": ("roberta", "load_roberta"),
    "t5": ("t5", "load_t5"),
}
SUPPORTED = tuple(LOADERS)


def read_hf_config(directory: Path) -> dict:
    """config.json of a Hugging Face folder as a dict, or one sentence saying why it cannot be read."""
    path = directory / "config.json"
    if not path.is_file():
        raise UserError(f"{directory} has no config.json, so it is not a Hugging Face model folder.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path} cannot be read as JSON: {exc}.") from exc
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object.")
    return data


def load_hf_directory(path: str | Path, device: str | torch.device = "cpu"):
    """A local Hugging Face model folder (BERT, RoBERTa, DistilBERT, GPT-2, MarianMT, BART or mBART) → ModelBundle on
    `device`."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise UserError(f"{directory} is not a folder.")
    model_type = read_hf_config(directory).get("model_type")
    if model_type in LOADERS:
        module, loader = LOADERS[model_type]
        return getattr(importlib.import_module(f"{__package__}.{module}"), loader)(directory, device)
    what = f"a {model_type!r} model" if model_type else "a model without a model_type"
    raise UserError(f"{directory} is {what}; scratchformer can open {', '.join(SUPPORTED)} and scratchformer "
                    "checkpoints.")  # fmt: skip


def hf_config(config_class, directory: Path):
    """The transformers config object (all class defaults filled in) from config.json; no code runs."""
    with quiet_transformers():  # its notes on unused or defaulted config keys are not the user's to act on
        try:
            return config_class.from_pretrained(str(directory), local_files_only=True)
        except Exception as exc:  # transformers raises many types for a bad config: one sentence for the user
            raise UserError(f"{directory / 'config.json'} is not a valid {config_class.__name__}: {exc}.") from exc


@contextmanager
def quiet_transformers():
    """transformers' logging at error level only, for the duration (what it warns of, we say in our words)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def model_name(directory: Path, data: dict) -> str:
    """What people call this model: the model card's title, the Hub id of a cache folder, or the folder name."""
    readme = directory / "README.md"
    if readme.is_file():
        try:
            text = readme.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)  # the card's YAML header
        title = re.search(r"^# +(\S{1,80})\s*$", text, flags=re.M)  # a one-word heading is the model's name
        if title:
            return title.group(1)
    parts = directory.resolve().parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/")  # ~/.cache/huggingface/hub/models--org--name/…
    if directory.resolve().name not in ("model", "models", "checkpoint", "hf", ""):
        return directory.resolve().name
    hub_id = data.get("_name_or_path")
    return str(hub_id) if hub_id else f"{data.get('model_type', 'model')} ({directory.resolve().parent.name})"


def read_tokenizer(tokenizer_class, directory: Path):
    """tokenizer_class (a transformers tokenizer) from the folder's files (offline), or one sentence saying why not."""
    with quiet_transformers():  # its notes on tokenizer classes and special tokens are not the user's to act on
        try:
            return tokenizer_class.from_pretrained(str(directory), local_files_only=True)
        except Exception as exc:  # a damaged tokenizer file: one sentence
            raise UserError(f"The tokenizer in {directory} cannot be read: {exc}.") from exc


def folder_tokenizer(directory: Path, family_class):
    """The folder's tokenizer exactly as transformers.AutoTokenizer reads it — tokenizer.json first, the class
    tokenizer_config.json declares, its special tokens and post-processor — so that a folder of one family that
    carries another tokenizer (a word-level or WordPiece vocabulary of its own) keeps its own. `family_class` reads
    a folder with neither file (GPT-2's vocab.json + merges.txt alone, BERT's vocab.txt alone)."""
    if (directory / "tokenizer.json").is_file() or (directory / "tokenizer_config.json").is_file():
        from transformers import AutoTokenizer

        return read_tokenizer(AutoTokenizer, directory)
    return read_tokenizer(family_class, directory)


def fast_tokenizer(directory: Path):
    """The folder's tokenizer.json as AutoTokenizer reads it (PreTrainedTokenizerFast without a tokenizer_config)."""
    from transformers import PreTrainedTokenizerFast

    return folder_tokenizer(directory, PreTrainedTokenizerFast)


def byte_level_bpe(tokenizer_class, directory: Path):
    """A GPT-2, RoBERTa or BART folder's tokenizer: as AutoTokenizer reads it (its byte-level BPE, or whatever
    tokenizer.json the folder carries), or tokenizer_class from vocab.json + merges.txt."""
    has_json = (directory / "tokenizer.json").is_file()
    if not has_json and not ((directory / "vocab.json").is_file() and (directory / "merges.txt").is_file()):
        raise UserError(f"{directory} has no tokenizer (tokenizer.json, or vocab.json + merges.txt).")
    return folder_tokenizer(directory, tokenizer_class)


def token_kind(hf, usual: str) -> str:
    """What kind of tokenizer it really is (how its pieces are shown): 'gpt2-bpe' for a byte-level BPE, 'wordpiece',
    'word-level', 'sentencepiece' for a unigram; `usual` (the family's) when the backend does not say."""
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        return usual
    model = type(backend.model).__name__
    if model == "BPE":
        return "gpt2-bpe" if "ByteLevel" in repr(backend.pre_tokenizer) else usual
    return {"WordPiece": "wordpiece", "WordLevel": "word-level", "Unigram": "sentencepiece"}.get(model, usual)


PROBE = "scratchformer probe"  # any text: encoded with and without special tokens to find how the tokenizer wraps it


def special_affixes(hf) -> tuple[list[str], list[str]]:
    """The special tokens the tokenizer's post-processor puts before and after a text, as AutoTokenizer adds them
    (BERT: [CLS] … [SEP]; RoBERTa and BART: <s> … </s>; T5 and Marian: … </s>; mBART: … </s> en_XX; a tokenizer
    saved without a post-processor: nothing)."""
    plain = list(hf.encode(PROBE, add_special_tokens=False))
    full = list(hf.encode(PROBE, add_special_tokens=True))
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            prefix, suffix = full[:start], full[start + len(plain) :]
            names = hf.convert_ids_to_tokens(prefix + suffix)
            return [str(t) for t in names[: len(prefix)]], [str(t) for t in names[len(prefix) :]]
    return [], [str(hf.eos_token)] if hf.eos_token is not None else []


def wrap_as_tokenizer_does(config, hf) -> None:
    """The source is wrapped in exactly the special tokens the folder's tokenizer adds (config.extra's src_prefix
    and src_suffix), so the ids the encoder reads are AutoTokenizer's ids for the same text."""
    prefix, suffix = special_affixes(hf)
    config.extra["src_prefix"], config.extra["src_suffix"] = prefix, suffix


def check_vocab_size(tokenizer, size: int, directory: Path, what: str = "tokenizer") -> None:
    """UserError when the tokenizer has more tokens than the model's embedding (config.json's vocabulary) has rows."""
    if tokenizer.vocab_size > size:
        raise UserError(
            f"The {what} in {directory} has {tokenizer.vocab_size} tokens but config.json says the model has {size}."
        )


def tokenizer_label(hf) -> str:
    """'WordPiece, 30522 tokens' — the tokenizer's algorithm and size, for the model description."""
    backend = getattr(hf, "backend_tokenizer", None)
    algorithm = type(backend.model).__name__ if backend is not None else type(hf).__name__
    return f"{algorithm}, {len(hf)} tokens"


def first_eos(hf) -> int | None:
    """A Hugging Face config's eos_token_id, which some configs give as a list."""
    return hf.eos_token_id[0] if isinstance(hf.eos_token_id, list) else hf.eos_token_id
