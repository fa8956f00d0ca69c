"""torch.nn.Transformer → scratchformer.Transformer, weight for weight (same numbers out)."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..config import TransformerConfig
from ..errors import UserError
from ..model import Transformer


def config_for(ref: nn.Transformer, **overrides) -> TransformerConfig:
    """A TransformerConfig with the sizes of a torch.nn.Transformer (vocabularies come from overrides)."""
    enc = ref.encoder.layers[0]
    first = enc if len(ref.encoder.layers) else ref.decoder.layers[0]
    if getattr(first, "norm_first", False):
        raise UserError("This torch.nn.Transformer is pre-norm (norm_first=True); scratchformer follows the paper's post-norm.")
    activation = getattr(first, "activation", None)
    act = "gelu" if activation in (torch.nn.functional.gelu,) or isinstance(activation, nn.GELU) else "relu"
    values = dict(
        d_model=first.self_attn.embed_dim,
        n_heads=first.self_attn.num_heads,
        d_ff=first.linear1.out_features,
        n_encoder_layers=len(ref.encoder.layers),
        n_decoder_layers=len(ref.decoder.layers),
        dropout=float(first.dropout.p),
        activation=act,
        final_layer_norm=ref.encoder.norm is not None,
        layer_norm_eps=first.norm1.eps,
        share_embeddings=False,
        tie_output=False,
        name="torch.nn.Transformer",
    )
    values.update(overrides)
    return TransformerConfig(**values)


def _copy(dst: torch.Tensor, src: torch.Tensor, what: str) -> None:
    if dst.shape != src.shape:
        raise UserError(f"{what} has shape {tuple(src.shape)} but the model expects {tuple(dst.shape)}.")
    dst.copy_(src)


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor, what: str) -> None:
    _copy(dst.weight, weight, f"{what}.weight")
    _copy(dst.bias, bias, f"{what}.bias")


def _copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm, what: str) -> None:
    _copy(dst.weight, src.weight, f"{what}.weight")
    _copy(dst.bias, src.bias, f"{what}.bias")


def from_torch_transformer(ref: nn.Transformer, **config_overrides) -> Transformer:
    """Build a scratchformer Transformer whose encoder/decoder stacks compute exactly what `ref` computes.

    torch.nn.Transformer has no embeddings or output layer; ours get fresh ones (vocabulary sizes from
    `config_overrides`). Pass embedded inputs through `model.src_embed` to feed both the same vectors.
    """
    config = config_for(ref, **config_overrides)
    model = Transformer(config)
    d = config.d_model
    with torch.no_grad():
        for i, (ours, theirs) in enumerate(zip(model.encoder, ref.encoder.layers)):
            w = f"encoder.layers.{i}"
            _copy_linear(ours.self_attn.qkv, theirs.self_attn.in_proj_weight, theirs.self_attn.in_proj_bias, w)
            _copy_linear(ours.self_attn.out_proj, theirs.self_attn.out_proj.weight, theirs.self_attn.out_proj.bias, w)
            _copy_linear(ours.ffn.w_1, theirs.linear1.weight, theirs.linear1.bias, f"{w}.linear1")
            _copy_linear(ours.ffn.w_2, theirs.linear2.weight, theirs.linear2.bias, f"{w}.linear2")
            _copy_norm(ours.add_norm1.norm, theirs.norm1, f"{w}.norm1")
            _copy_norm(ours.add_norm2.norm, theirs.norm2, f"{w}.norm2")
        for i, (ours, theirs) in enumerate(zip(model.decoder, ref.decoder.layers)):
            w = f"decoder.layers.{i}"
            sa, ca = theirs.self_attn, theirs.multihead_attn
            _copy_linear(ours.self_attn.qkv, sa.in_proj_weight, sa.in_proj_bias, f"{w}.self_attn")
            _copy_linear(ours.self_attn.out_proj, sa.out_proj.weight, sa.out_proj.bias, f"{w}.self_attn")
            _copy_linear(ours.cross_attn.q_proj, ca.in_proj_weight[:d], ca.in_proj_bias[:d], f"{w}.multihead_attn")
            _copy_linear(ours.cross_attn.kv_proj, ca.in_proj_weight[d:], ca.in_proj_bias[d:], f"{w}.multihead_attn")
            _copy_linear(ours.cross_attn.out_proj, ca.out_proj.weight, ca.out_proj.bias, f"{w}.multihead_attn")
            _copy_linear(ours.ffn.w_1, theirs.linear1.weight, theirs.linear1.bias, f"{w}.linear1")
            _copy_linear(ours.ffn.w_2, theirs.linear2.weight, theirs.linear2.bias, f"{w}.linear2")
            _copy_norm(ours.add_norm1.norm, theirs.norm1, f"{w}.norm1")
            _copy_norm(ours.add_norm2.norm, theirs.norm2, f"{w}.norm2")
            _copy_norm(ours.add_norm3.norm, theirs.norm3, f"{w}.norm3")
        if config.final_layer_norm:
            _copy_norm(model.encoder_norm, ref.encoder.norm, "encoder.norm")
            _copy_norm(model.decoder_norm, ref.decoder.norm, "decoder.norm")
    return model


def config_replace(config: TransformerConfig, **changes) -> TransformerConfig:
    return dataclasses.replace(config, **changes)
