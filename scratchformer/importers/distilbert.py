"""DistilBERT encoders from a local Hugging Face folder → an encoder-only scratchformer.

DistilBERT is BERT with half the layers, no token types and its own tensor names (q_lin, k_lin, v_lin, out_lin,
sa_layer_norm, ffn.lin1, ffn.lin2, output_layer_norm). Its departures from the 2017 paper are BERT's without the
segment embeddings: learned positions, LayerNorm on the embeddings (ε 1e-12, fixed in its code), no √d_model
scaling, GELU. With sinusoidal_pos_embds its position table is the paper's own interleaved sinusoids: then the
model uses ours (positional="sinusoidal") after checking that the stored table is that one.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..bundle import ModelBundle
from ..config import TransformerConfig
from ..embeddings import sinusoidal_encoding
from ..errors import UserError
from .bert import activation_for, bert_tokenizer
from .hf import hf_config, model_name, read_hf_config
from .weights import Weights, build_model, put

LAYER_NORM_EPS = 1e-12  # DistilBERT's nn.LayerNorm(dim, eps=1e-12), not a config.json field


def config_from_distilbert(hf, directory: Path, name: str, cls_token: str, sep_token: str) -> TransformerConfig:
    """transformers.DistilBertConfig → TransformerConfig of an encoder-only model."""
    origin = str(directory / "config.json")
    return TransformerConfig(
        d_model=hf.dim,
        n_heads=hf.n_heads,
        d_ff=hf.hidden_dim,
        n_encoder_layers=hf.n_layers,
        n_decoder_layers=0,
        dropout=float(hf.dropout),
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size,
        max_len=hf.max_position_embeddings,
        share_embeddings=False,
        tie_output=False,
        pad_id=hf.pad_token_id,
        name=name,
        activation=activation_for(hf.activation, origin),
        positional="sinusoidal" if hf.sinusoidal_pos_embds else "learned",
        scale_embedding=False,
        embed_layer_norm=True,
        layer_norm_eps=LAYER_NORM_EPS,
        extra={"architecture": "distilbert", "source": str(directory), "hf_name": str(hf.name_or_path or ""),
               "src_prefix": [cls_token], "src_suffix": [sep_token]},
    )  # fmt: skip


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
    for i in range(c.n_encoder_layers):
        theirs, ours = f"transformer.layer.{i}", f"encoder.{i}"
        names = [f"{theirs}.attention.{p}_lin" for p in ("q", "k", "v")]
        put(state, f"{ours}.self_attn.qkv", w.fused_linear(d, d, names))  # (3d, d): [W^Q; W^K; W^V]
        put(state, f"{ours}.self_attn.out_proj", w.linear(d, d, f"{theirs}.attention.out_lin"))
        put(state, f"{ours}.add_norm1.norm", w.layer_norm(d, f"{theirs}.sa_layer_norm"))
        put(state, f"{ours}.ffn.w_1", w.linear(c.d_ff, d, f"{theirs}.ffn.lin1"))
        put(state, f"{ours}.ffn.w_2", w.linear(d, c.d_ff, f"{theirs}.ffn.lin2"))
        put(state, f"{ours}.add_norm2.norm", w.layer_norm(d, f"{theirs}.output_layer_norm"))
    return state


def load_distilbert(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A DistilBERT folder → ModelBundle of an encoder-only scratchformer model in eval mode."""
    from transformers import DistilBertConfig

    data = read_hf_config(directory)
    hf = hf_config(DistilBertConfig, directory)
    tokenizer = bert_tokenizer(directory)  # the same WordPiece as BERT's: tokenizer.json or vocab.txt
    name = model_name(directory, data)
    config = config_from_distilbert(hf, directory, name, str(tokenizer.hf.cls_token), str(tokenizer.hf.sep_token))
    if tokenizer.vocab_size > config.src_vocab_size:
        raise UserError(
            f"The tokenizer in {directory} has {tokenizer.vocab_size} tokens but config.json says the model "
            f"has {config.src_vocab_size}."
        )
    model = build_model(directory, config, distilbert_state, prefixes=("", "distilbert."))
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, name, str(directory))
