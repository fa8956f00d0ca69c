"""DistilBERT encoders from a local Hugging Face folder → an encoder-only scratchformer.

DistilBERT is BERT with half the layers, no token types and its own tensor names (q_lin, k_lin, v_lin, out_lin,
sa_layer_norm, ffn.lin1, ffn.lin2, output_layer_norm). Its departures from the 2017 paper are BERT's without the
segment embeddings: learned positions, LayerNorm on the embeddings (ε 1e-12, fixed in its code), no √d_model
scaling, GELU. With sinusoidal_pos_embds its position table is the paper's own interleaved sinusoids: then the
model uses ours (positional="sinusoidal") after checking that the stored table is that one. A masked-LM head
(DistilBertForMaskedLM's vocab_transform, vocab_layer_norm, vocab_projector) is imported as in bert.py.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ...transformer.embeddings import sinusoidal_encoding
from ..model_bundle import ModelBundle
from .bert import (
    DISTILBERT_MLM,
    EncoderLayerNames,
    activation_for,
    bert_tokenizer,
    encoder_only_config,
    mlm_head_config,
    put_encoder_layers,
    put_mlm_head,
)
from .hf import check_vocab_size, hf_config, model_name, read_hf_config, wrap_as_tokenizer_does
from .weights import Weights, build_model, put

LAYER_NORM_EPS = 1e-12  # DistilBERT's nn.LayerNorm(dim, eps=1e-12), not a config.json field


def config_from_distilbert(hf, directory: Path, name: str, cls_token: str, sep_token: str) -> TransformerConfig:
    """transformers.DistilBertConfig → TransformerConfig of an encoder-only model."""
    origin = str(directory / "config.json")
    return encoder_only_config(
        hf, directory, name, cls_token, sep_token, "distilbert",
        d_model=hf.dim,
        n_heads=hf.n_heads,
        d_ff=hf.hidden_dim,
        n_encoder_layers=hf.n_layers,
        dropout=float(hf.dropout),
        activation=activation_for(hf.activation, origin),
        positional="sinusoidal" if hf.sinusoidal_pos_embds else "learned",
        layer_norm_eps=LAYER_NORM_EPS,
    )  # fmt: skip


DISTILBERT_LAYER = EncoderLayerNames(
    layer="transformer.layer.{i}",
    qkv=("attention.q_lin", "attention.k_lin", "attention.v_lin"),
    out_proj="attention.out_lin",
    norm1="sa_layer_norm",
    ffn_in="ffn.lin1",
    ffn_out="ffn.lin2",
    norm2="output_layer_norm",
)


def distilbert_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from DistilBERT's tensor names (DistilBertModel's, or under "distilbert." in a task model)."""
    d, state = c.d_model, {}
    state["src_embed.tokens.weight"] = w.take((c.src_vocab_size, d), "embeddings.word_embeddings.weight")
    positions = w.take((c.max_len, d), "embeddings.position_embeddings.weight")
    if c.positional == "learned":
        state["src_embed.positions.weight"] = positions
    elif not torch.allclose(positions.float(), sinusoidal_encoding(c.max_len, d), atol=1e-4):
        raise UserError(f"In {w.origin}, the position embeddings are not the sinusoids that config.json promises "
                        "(sinusoidal_pos_embds).")  # fmt: skip
    put(state, "src_embed.layer_norm", w.layer_norm(d, "embeddings.LayerNorm"))
    put_encoder_layers(w, c, state, DISTILBERT_LAYER)
    if c.mlm_head:
        put_mlm_head(w, c, state, DISTILBERT_MLM)
    return state


def load_distilbert(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A DistilBERT folder → ModelBundle of an encoder-only scratchformer model in eval mode."""
    from transformers import DistilBertConfig

    data = read_hf_config(directory)
    hf = hf_config(DistilBertConfig, directory)
    tokenizer = bert_tokenizer(directory)  # the same WordPiece as BERT's: tokenizer.json or vocab.txt
    name = model_name(directory, data)
    config = config_from_distilbert(hf, directory, name, str(tokenizer.hf.cls_token), str(tokenizer.hf.sep_token))
    wrap_as_tokenizer_does(config, tokenizer.hf)  # [CLS] … [SEP] when the tokenizer adds them
    check_vocab_size(tokenizer, config.src_vocab_size, directory)
    model = build_model(directory, config, distilbert_state, prefixes=("", "distilbert."),
                        configure=mlm_head_config(DISTILBERT_MLM, "DistilBERT"))
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, name, str(directory))
