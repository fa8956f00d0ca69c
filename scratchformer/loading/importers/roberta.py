"""RoBERTa encoders from a local Hugging Face folder → an encoder-only scratchformer.

RoBERTa is BERT's architecture (see bert.py for those departures: learned positions, token-type embeddings,
LayerNorm on the embeddings, no √d_model scaling, GELU) with one more: position ids start at padding_idx + 1
(position_offset), so its table of max_position_embeddings rows holds max_position_embeddings − padding_idx − 1
usable positions (512 for roberta-base). transformers gives padded positions the id padding_idx instead; only those
padded rows differ, and no real token ever attends to them. Its single token type adds one learned vector to
every token. The tokenizer is GPT-2's byte-level BPE with <s> … </s> around the text. A masked-LM head
(RobertaForMaskedLM's `lm_head`) is imported as in bert.py; it always applies GELU.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...errors import UserError
from ..model_bundle import ModelBundle
from ..tokenizers import TextTokenizer
from .bert import ROBERTA_MLM, bert_state, config_from_bert, mlm_head_config
from .hf import (
    byte_level_bpe,
    check_vocab_size,
    hf_config,
    model_name,
    read_hf_config,
    token_kind,
    tokenizer_label,
    wrap_as_tokenizer_does,
)
from .weights import build_model


def roberta_tokenizer(directory: Path) -> TextTokenizer:
    """The folder's byte-level BPE: tokenizer.json, or vocab.json + merges.txt (transformers' RoBERTa class)."""
    from transformers import RobertaTokenizerFast

    hf = byte_level_bpe(RobertaTokenizerFast, directory)
    return TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "gpt2-bpe"))  # byte-level BPE: 'Ġ' shown as ' '


def load_roberta(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A RoBERTa folder → ModelBundle of an encoder-only scratchformer model in eval mode."""
    from transformers import RobertaConfig

    data = read_hf_config(directory)
    hf = hf_config(RobertaConfig, directory)
    tokenizer = roberta_tokenizer(directory)
    name = model_name(directory, data)
    config = config_from_bert(hf, directory, name, str(tokenizer.hf.cls_token), str(tokenizer.hf.sep_token),
                              family="RoBERTa")  # fmt: skip
    offset = (hf.pad_token_id if hf.pad_token_id is not None else 0) + 1  # positions count from padding_idx + 1
    if hf.max_position_embeddings <= offset:
        raise UserError(
            f"{directory / 'config.json'} has {hf.max_position_embeddings} position embeddings, which leaves none "
            f"after RoBERTa's offset of {offset}."
        )
    config = dataclasses.replace(config, max_len=hf.max_position_embeddings - offset, position_offset=offset,
                                 extra={**config.extra, "architecture": "roberta"})  # fmt: skip
    wrap_as_tokenizer_does(config, tokenizer.hf)  # <s> … </s>, as RoBERTa's tokenizer adds them
    check_vocab_size(tokenizer, config.src_vocab_size, directory)
    model = build_model(directory, config, lambda w, c: bert_state(w, c, ROBERTA_MLM), prefixes=("", "roberta."),
                        configure=mlm_head_config(ROBERTA_MLM, "RoBERTa", activation="gelu"))
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, name, str(directory))
