"""The encoder and decoder layers of fairseq-style seq2seq models (MarianMT, BART, mBART), which transformers
stores under the same names: q/k/v/out projections, self_attn_layer_norm, encoder_attn(_layer_norm), fc1, fc2 and
final_layer_norm. Their embeddings and positions differ and stay in each family's importer."""

from __future__ import annotations

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from .weights import Weights, put


def check_equal_stacks(hf, origin: str) -> None:
    """Our layers share one head count and FFN width between the stacks; these configs could differ."""
    if hf.encoder_attention_heads != hf.decoder_attention_heads or hf.encoder_ffn_dim != hf.decoder_ffn_dim:
        raise UserError(
            f"{origin} gives the encoder and decoder different sizes (heads {hf.encoder_attention_heads}/"
            f"{hf.decoder_attention_heads}, FFN {hf.encoder_ffn_dim}/{hf.decoder_ffn_dim}); scratchformer needs "
            "them equal."
        )


def stack_sizes(hf, origin: str) -> dict:
    """The sizes and dropout of a BartConfig / MarianConfig as TransformerConfig fields, after checking that the
    encoder and decoder agree on what our layers share."""
    check_equal_stacks(hf, origin)
    return dict(
        d_model=hf.d_model,
        n_heads=hf.encoder_attention_heads,
        d_ff=hf.encoder_ffn_dim,
        n_encoder_layers=hf.encoder_layers,
        n_decoder_layers=hf.decoder_layers,
        dropout=float(hf.dropout),
    )


def attention_parts(w: Weights, d: int, theirs: str) -> dict[str, dict[str, torch.Tensor]]:
    """One attention's projections in our layouts: fused self-attention [W_q; W_k; W_v], or cross-attention's
    q_proj plus fused [W_k; W_v]."""
    return {
        "qkv": w.fused_linear(d, d, [f"{theirs}.{p}_proj" for p in ("q", "k", "v")]),  # (3d, d)
        "q_proj": w.linear(d, d, f"{theirs}.q_proj"),
        "kv_proj": w.fused_linear(d, d, [f"{theirs}.{p}_proj" for p in ("k", "v")]),  # (2d, d)
        "out_proj": w.linear(d, d, f"{theirs}.out_proj"),
    }


def put_layers(w: Weights, c: TransformerConfig, state: dict[str, torch.Tensor]) -> None:
    """Every encoder and decoder layer's weights into `state` under our names. Pre-LN or post-LN does not change
    the names: each LayerNorm belongs to the Add & Norm of the sublayer it wraps."""
    d = c.d_model
    for stack, n_layers in (("encoder", c.n_encoder_layers), ("decoder", c.n_decoder_layers)):
        for i in range(n_layers):
            theirs, ours = f"{stack}.layers.{i}", f"{stack}.{i}"
            self_att = attention_parts(w, d, f"{theirs}.self_attn")
            put(state, f"{ours}.self_attn.qkv", self_att["qkv"])
            put(state, f"{ours}.self_attn.out_proj", self_att["out_proj"])
            put(state, f"{ours}.add_norm1.norm", w.layer_norm(d, f"{theirs}.self_attn_layer_norm"))
            ffn_norm = "add_norm2"  # the encoder's second sublayer is the feed-forward network
            if stack == "decoder":
                # queries from the decoder, K and V from the encoder
                cross = attention_parts(w, d, f"{theirs}.encoder_attn")
                put(state, f"{ours}.cross_attn.q_proj", cross["q_proj"])
                put(state, f"{ours}.cross_attn.kv_proj", cross["kv_proj"])
                put(state, f"{ours}.cross_attn.out_proj", cross["out_proj"])
                put(state, f"{ours}.add_norm2.norm", w.layer_norm(d, f"{theirs}.encoder_attn_layer_norm"))
                ffn_norm = "add_norm3"  # the decoder's second is cross-attention
            put(state, f"{ours}.ffn.w_1", w.linear(c.d_ff, d, f"{theirs}.fc1"))
            put(state, f"{ours}.ffn.w_2", w.linear(d, c.d_ff, f"{theirs}.fc2"))
            put(state, f"{ours}.{ffn_norm}.norm", w.layer_norm(d, f"{theirs}.final_layer_norm"))
