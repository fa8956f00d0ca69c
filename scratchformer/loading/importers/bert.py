"""BERT-family encoders (e.g. all-MiniLM-L6-v2) from a local Hugging Face folder → an encoder-only scratchformer.

How BERT departs from the 2017 paper, and the option that covers each (all off for the paper model):
learned position embeddings (positional="learned"), segment embeddings (type_vocab_size), LayerNorm on the
embedding sum (embed_layer_norm), no √d_model scaling (scale_embedding=False), GELU in the FFN, LayerNorm ε
1e-12. The layers themselves are the paper's post-norm ones: LayerNorm(x + Sublayer(x)). The pooler (a tanh
layer over [CLS] used for next-sentence prediction) and task heads are not part of the walkthrough, with one
exception: a masked-language-model head (BertForMaskedLM's `cls.predictions`), when the folder has one, becomes the
model's mlm_head (model.MaskedLMHead), through which the logit lens reads the encoder. Folders without it (a
sentence-embedding model such as all-MiniLM) open as the encoder alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from ..tokenizers import TextTokenizer
from .hf import (
    check_vocab_size,
    fast_tokenizer,
    hf_config,
    model_name,
    read_hf_config,
    token_kind,
    tokenizer_label,
    wrap_as_tokenizer_does,
)
from .weights import Weights, build_model, put

# transformers' ACT2FN names → our activations ("gelu" in BERT is the exact erf form)
HF_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                  "silu": "silu", "swish": "silu"}  # fmt: skip


def activation_for(name, origin: str) -> str:
    if name not in HF_ACTIVATIONS:
        raise UserError(
            f"{origin} uses the activation {name!r}; scratchformer supports {', '.join(sorted(HF_ACTIVATIONS))}."
        )
    return HF_ACTIVATIONS[name]


def encoder_only_config(hf, directory: Path, name: str, cls_token: str, sep_token: str, architecture: str,
                        **fields) -> TransformerConfig:  # fmt: skip
    """TransformerConfig of an encoder-only model with what the BERT family shares: one vocabulary, no tied
    embeddings, a LayerNorm on the embedding sum and no √d_model scaling, text wrapped in cls … sep. `fields`
    give the rest (sizes, dropout, activation, positions, LayerNorm ε), read from the family's own config names."""
    return TransformerConfig(
        n_decoder_layers=0,
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size,
        max_len=hf.max_position_embeddings,
        share_embeddings=False,
        tie_output=False,
        pad_id=hf.pad_token_id,
        name=name,
        scale_embedding=False,
        embed_layer_norm=True,
        extra={"architecture": architecture, "source": str(directory), "hf_name": str(hf.name_or_path or ""),
               "src_prefix": [cls_token], "src_suffix": [sep_token]},
        **fields,
    )  # fmt: skip


def config_from_bert(hf, directory: Path, name: str, cls_token: str, sep_token: str,
                     family: str = "BERT") -> TransformerConfig:  # fmt: skip
    """transformers.BertConfig (or RobertaConfig) → TransformerConfig of an encoder-only model with BERT's
    departures turned on."""
    origin = str(directory / "config.json")
    position_type = getattr(hf, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise UserError(f"{origin} uses {position_type!r} position embeddings; scratchformer supports 'absolute' only.")
    if getattr(hf, "is_decoder", False) or getattr(hf, "add_cross_attention", False):
        raise UserError(f"{origin} describes a {family} decoder; scratchformer opens {family} encoders only.")
    return encoder_only_config(
        hf, directory, name, cls_token, sep_token, "bert",
        d_model=hf.hidden_size,
        n_heads=hf.num_attention_heads,
        d_ff=hf.intermediate_size,
        n_encoder_layers=hf.num_hidden_layers,
        dropout=float(hf.hidden_dropout_prob),
        activation=activation_for(hf.hidden_act, origin),
        positional="learned",
        type_vocab_size=hf.type_vocab_size,
        layer_norm_eps=float(hf.layer_norm_eps),
    )  # fmt: skip


class EncoderLayerNames(NamedTuple):
    """Where a post-LN encoder layer's tensors are stored, each relative to the layer's own prefix."""

    layer: str  # the layer's prefix, with {i} for its index
    qkv: tuple[str, str, str]  # the query, key and value projections, stacked into our fused qkv
    out_proj: str  # the attention's output projection
    norm1: str  # the LayerNorm after self-attention
    ffn_in: str  # the feed-forward network's first linear layer (d → d_ff) …
    ffn_out: str  # … and its second (d_ff → d)
    norm2: str  # the LayerNorm after the feed-forward network


BERT_LAYER = EncoderLayerNames(
    layer="encoder.layer.{i}",
    qkv=("attention.self.query", "attention.self.key", "attention.self.value"),
    out_proj="attention.output.dense",
    norm1="attention.output.LayerNorm",
    ffn_in="intermediate.dense",
    ffn_out="output.dense",
    norm2="output.LayerNorm",
)


def put_encoder_layers(w: Weights, c: TransformerConfig, state: dict[str, torch.Tensor],
                       names: EncoderLayerNames) -> None:  # fmt: skip
    """Every encoder layer's weights into `state` under our names, read from where `names` says they are."""
    d = c.d_model
    for i in range(c.n_encoder_layers):
        theirs, ours = names.layer.format(i=i), f"encoder.{i}"
        qkv = w.fused_linear(d, d, [f"{theirs}.{p}" for p in names.qkv])  # (3d, d): [W^Q; W^K; W^V]
        put(state, f"{ours}.self_attn.qkv", qkv)
        put(state, f"{ours}.self_attn.out_proj", w.linear(d, d, f"{theirs}.{names.out_proj}"))
        put(state, f"{ours}.add_norm1.norm", w.layer_norm(d, f"{theirs}.{names.norm1}"))
        put(state, f"{ours}.ffn.w_1", w.linear(c.d_ff, d, f"{theirs}.{names.ffn_in}"))
        put(state, f"{ours}.ffn.w_2", w.linear(d, c.d_ff, f"{theirs}.{names.ffn_out}"))
        put(state, f"{ours}.add_norm2.norm", w.layer_norm(d, f"{theirs}.{names.norm2}"))


class MaskedLMNames(NamedTuple):
    """Where a family stores its masked-language-model head (see model.MaskedLMHead), from the checkpoint's root."""

    dense: str  # the transform's d_model → d_model linear layer, W_t
    norm: str  # the LayerNorm after its activation
    proj: str  # the vocabulary projection W_vocab (often not stored: tied to the word embeddings)
    bias: tuple[str, ...]  # its bias b_vocab, under the first of these names found (the projection's own bias is
    # what transformers applies; the head's `bias` is the same tensor, saved alone, unless the folder unties them)


BERT_MLM = MaskedLMNames("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                         "cls.predictions.decoder", ("cls.predictions.decoder.bias", "cls.predictions.bias"))
ROBERTA_MLM = MaskedLMNames("lm_head.dense", "lm_head.layer_norm", "lm_head.decoder",
                            ("lm_head.decoder.bias", "lm_head.bias"))
DISTILBERT_MLM = MaskedLMNames("vocab_transform", "vocab_layer_norm", "vocab_projector", ("vocab_projector.bias",))


def mlm_head_config(names: MaskedLMNames, family: str, activation: str | None = None
                    ) -> Callable[[Weights, TransformerConfig], TransformerConfig]:  # fmt: skip
    """build_model's `configure`: the config with mlm_head on when the weights hold a masked-LM head (tied to the
    word embeddings unless the folder stores a different vocabulary matrix), else the config unchanged.
    `activation`: the one the family's head always applies (RoBERTa's is GELU whatever hidden_act says)."""

    def configure(w: Weights, c: TransformerConfig) -> TransformerConfig:
        if not w.has(f"{names.dense}.weight"):
            return c
        if activation is not None and c.activation != activation:
            raise UserError(f"{w.origin} has a {family} masked-language-model head, which applies {activation}, "
                            f"but its layers use {c.activation}; scratchformer reads one activation for both.")
        own = w.find(f"{names.proj}.weight")
        tokens = w.take((c.src_vocab_size, c.d_model), "embeddings.word_embeddings.weight")
        tied = own is None or torch.equal(w.tensors[own], tokens)
        return dataclasses.replace(c, mlm_head=True, tie_output=tied)

    return configure


def put_mlm_head(w: Weights, c: TransformerConfig, state: dict[str, torch.Tensor], names: MaskedLMNames) -> None:
    """The masked-LM head's weights into `state` under our names (mlm_head.dense, .norm, .proj)."""
    d, vocab = c.d_model, c.src_vocab_size
    put(state, "mlm_head.dense", w.linear(d, d, names.dense))
    put(state, "mlm_head.norm", w.layer_norm(d, names.norm))
    tied = state["src_embed.tokens.weight"] if c.tie_output else None
    state["mlm_head.proj.weight"] = tied if tied is not None else w.take((vocab, d), f"{names.proj}.weight")
    state["mlm_head.proj.bias"] = w.take((vocab,), *names.bias)


def bert_state(w: Weights, c: TransformerConfig, head: MaskedLMNames = BERT_MLM) -> dict[str, torch.Tensor]:
    """Our state_dict from BERT's tensor names; query/key/value are stacked into our fused qkv. With
    c.mlm_head, the masked-LM head too, from where `head` says it is."""
    d, state = c.d_model, {}
    state["src_embed.tokens.weight"] = w.take((c.src_vocab_size, d), "embeddings.word_embeddings.weight")
    n_positions = c.max_len + c.position_offset  # RoBERTa's table also holds the rows below its offset
    state["src_embed.positions.weight"] = w.take((n_positions, d), "embeddings.position_embeddings.weight")
    if c.type_vocab_size:
        types = w.take((c.type_vocab_size, d), "embeddings.token_type_embeddings.weight")
        state["src_embed.token_types.weight"] = types
    put(state, "src_embed.layer_norm", w.layer_norm(d, "embeddings.LayerNorm"))
    put_encoder_layers(w, c, state, BERT_LAYER)
    if c.mlm_head:
        put_mlm_head(w, c, state, head)
    return state


def bert_tokenizer(directory: Path) -> TextTokenizer:
    """The folder's WordPiece tokenizer: tokenizer.json if present, else vocab.txt."""
    if (directory / "tokenizer.json").is_file():
        hf = fast_tokenizer(directory)
    elif (directory / "vocab.txt").is_file():
        from transformers import BertTokenizerFast

        try:
            hf = BertTokenizerFast.from_pretrained(str(directory), local_files_only=True)
        except Exception as exc:  # a damaged vocab.txt: one sentence
            raise UserError(f"The tokenizer in {directory} (vocab.txt) cannot be read: {exc}.") from exc
    else:
        raise UserError(f"{directory} has no tokenizer (tokenizer.json or vocab.txt).")
    return TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "wordpiece"))


def load_bert(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A BERT-family encoder folder → ModelBundle of an encoder-only scratchformer model in eval mode (with its
    masked-LM head when the folder has one)."""
    from transformers import BertConfig

    data = read_hf_config(directory)
    hf = hf_config(BertConfig, directory)
    tokenizer = bert_tokenizer(directory)
    name = model_name(directory, data)
    config = config_from_bert(hf, directory, name, str(tokenizer.hf.cls_token), str(tokenizer.hf.sep_token))
    wrap_as_tokenizer_does(config, tokenizer.hf)  # [CLS] … [SEP] when the tokenizer adds them, as it does for BERT
    check_vocab_size(tokenizer, config.src_vocab_size, directory)
    model = build_model(directory, config, bert_state, prefixes=("", "bert."),
                        configure=mlm_head_config(BERT_MLM, "BERT"))
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, name, str(directory))
