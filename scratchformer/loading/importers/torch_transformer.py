"""torch.nn.Transformer (a module, or its state_dict plus sizes) → scratchformer.Transformer, same numbers out.

torch.nn.Transformer is the paper's post-norm stack when norm_first=False; it adds a LayerNorm after each
stack (final_layer_norm) and has no embeddings or output layer, so ours get fresh ones (vocabulary sizes
from the overrides). Its in_proj_weight is already laid out [W^Q; W^K; W^V], like our fused qkv.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ...transformer.model import Transformer
from .weights import Weights, load_state, put

_ENCODER_KEY = "encoder.layers.0.self_attn.in_proj_weight"
_DECODER_KEY = "decoder.layers.0.self_attn.in_proj_weight"


def _activation_name(layer: nn.Module) -> str:
    act = getattr(layer, "activation", F.relu)
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    if isinstance(act, nn.GELU) and act.approximate == "tanh":
        return "gelu_tanh"
    if act is F.silu or isinstance(act, nn.SiLU):
        return "silu"
    raise UserError(
        f"This torch.nn.Transformer uses the activation {act!r}; scratchformer supports relu, gelu and silu."
    )


def config_for(ref: nn.Transformer, **overrides) -> TransformerConfig:
    """A TransformerConfig with the sizes and switches of a torch.nn.Transformer (vocabularies from overrides)."""
    layers = list(ref.encoder.layers) + list(ref.decoder.layers)
    if not len(ref.encoder.layers) or not len(ref.decoder.layers):
        raise UserError("This torch.nn.Transformer lacks an encoder or a decoder layer; scratchformer needs both.")
    if any(getattr(layer, "norm_first", False) for layer in layers):
        raise UserError(
            "This torch.nn.Transformer is pre-norm (norm_first=True); scratchformer follows the paper's post-norm."
        )
    activations = {_activation_name(layer) for layer in layers}
    if len(activations) > 1:
        raise UserError(f"This torch.nn.Transformer mixes activations ({', '.join(sorted(activations))}).")
    first = layers[0]
    values = dict(
        d_model=first.self_attn.embed_dim,
        n_heads=first.self_attn.num_heads,
        d_ff=first.linear1.out_features,
        n_encoder_layers=len(ref.encoder.layers),
        n_decoder_layers=len(ref.decoder.layers),
        dropout=float(first.dropout.p),
        activation=activations.pop(),
        final_layer_norm=_final_norm(ref.encoder.norm is not None, ref.decoder.norm is not None),
        layer_norm_eps=first.norm1.eps,
        share_embeddings=False,
        tie_output=False,
        name="torch.nn.Transformer",
    )
    values.update(overrides)
    return TransformerConfig(**values)


def _final_norm(encoder: bool, decoder: bool) -> bool:
    if encoder != decoder:
        raise UserError("This torch.nn.Transformer has a final LayerNorm after only one of its stacks; "
                        "scratchformer puts one after both or neither.")  # fmt: skip
    return encoder


def from_torch_transformer(ref: nn.Transformer, **config_overrides) -> Transformer:
    """Build a scratchformer Transformer whose encoder/decoder stacks compute exactly what `ref` computes.

    torch.nn.Transformer has no embeddings or output layer; ours get fresh ones (vocabulary sizes from
    `config_overrides`). Pass embedded inputs through `model.src_embed` to feed both the same vectors.
    """
    config = config_for(ref, **config_overrides)
    return _build(config, ref.state_dict(), "", "the torch.nn.Transformer", "its configuration")


def from_torch_state_dict(
    state_dict: Mapping[str, torch.Tensor],
    n_heads: int,
    d_model: int | None = None,
    d_ff: int | None = None,
    activation: str = "relu",
    layer_norm_eps: float = 1e-5,
    norm_first: bool = False,
    **config_overrides,
) -> Transformer:
    """A torch.nn.Transformer's state_dict (possibly inside a larger model's, e.g. "transformer.encoder…")
    plus what a state_dict cannot tell — heads, activation, LayerNorm ε, norm_first — → scratchformer.

    d_model, d_ff and the layer counts are read from the tensors; when given, they must agree with them.
    Layers built with bias=False (no bias tensors) get zero biases, which compute the same.
    """
    if norm_first:
        raise UserError("This state_dict is of a pre-norm (norm_first=True) model; scratchformer follows the "
                        "paper's post-norm.")  # fmt: skip
    prefix = _prefix(state_dict)
    in_proj = state_dict[prefix + _ENCODER_KEY]
    inferred = dict(
        d_model=int(in_proj.shape[1]),
        d_ff=int(state_dict[prefix + "encoder.layers.0.linear1.weight"].shape[0])
        if prefix + "encoder.layers.0.linear1.weight" in state_dict else None,
        n_encoder_layers=_count(state_dict, prefix + "encoder.layers."),
        n_decoder_layers=_count(state_dict, prefix + "decoder.layers."),
    )
    given = dict(d_model=d_model, d_ff=d_ff, n_encoder_layers=config_overrides.pop("n_encoder_layers", None),
                 n_decoder_layers=config_overrides.pop("n_decoder_layers", None))  # fmt: skip
    for name, value in given.items():
        if value is not None and inferred[name] is not None and value != inferred[name]:
            raise UserError(f"{name}={value} was given, but the state_dict's tensors say {inferred[name]}.")
    if not inferred["n_decoder_layers"]:
        raise UserError("The state_dict has no decoder layers; scratchformer needs a torch.nn.Transformer's encoder "
                        "and decoder.")  # fmt: skip
    values = dict(
        n_heads=n_heads,
        d_ff=inferred["d_ff"] or d_ff or 4 * inferred["d_model"],
        d_model=inferred["d_model"],
        n_encoder_layers=inferred["n_encoder_layers"],
        n_decoder_layers=inferred["n_decoder_layers"],
        dropout=0.0,
        activation=activation,
        final_layer_norm=_final_norm(prefix + "encoder.norm.weight" in state_dict,
                                     prefix + "decoder.norm.weight" in state_dict),
        layer_norm_eps=layer_norm_eps,
        share_embeddings=False,
        tie_output=False,
        name="torch.nn.Transformer",
    )  # fmt: skip
    values.update(config_overrides)
    return _build(TransformerConfig(**values), state_dict, prefix, "the state_dict", "the configuration")


def _prefix(state_dict: Mapping[str, torch.Tensor]) -> str:
    """'' for nn.Transformer's own state_dict, 'transformer.' when it sits inside a larger model."""
    for key in state_dict:
        if key.endswith(_ENCODER_KEY):
            return key[: -len(_ENCODER_KEY)]
    if any(key.endswith(_DECODER_KEY) for key in state_dict):
        raise UserError("The state_dict has no encoder layers; scratchformer needs a torch.nn.Transformer's encoder "
                        "and decoder.")  # fmt: skip
    raise UserError(f"This is not a torch.nn.Transformer state_dict: no tensor is named …{_ENCODER_KEY}.")


def _count(state_dict: Mapping[str, torch.Tensor], stem: str) -> int:
    pattern = re.compile(re.escape(stem) + r"(\d+)\.")
    indices = {int(m.group(1)) for key in state_dict if (m := pattern.match(key))}
    return max(indices) + 1 if indices else 0


def _build(config: TransformerConfig, state_dict: Mapping[str, torch.Tensor], prefix: str, origin: str,
           sizes_from: str) -> Transformer:  # fmt: skip
    w = Weights(state_dict, origin, prefixes=(prefix,), sizes_from=sizes_from)
    d, d_ff = config.d_model, config.d_ff

    def linear(d_out: int, d_in: int, weight: str, bias: str, rows: slice = slice(None)) -> dict:
        full = 3 * d if weight.endswith("in_proj_weight") else d_out
        out = {"weight": w.take((full, d_in), weight)[rows]}
        out["bias"] = w.take((full,), bias)[rows] if w.has(bias) else torch.zeros(d_out)  # bias=False → zeros
        return out

    def norm(name: str) -> dict:
        bias = f"{name}.bias"
        return {"weight": w.take((d,), f"{name}.weight"),
                "bias": w.take((d,), bias) if w.has(bias) else torch.zeros(d)}  # fmt: skip

    def attention(theirs: str, ours: str, cross: bool, state: dict) -> None:
        if cross:  # queries from the decoder, keys and values from the encoder output
            weight, bias = f"{theirs}.in_proj_weight", f"{theirs}.in_proj_bias"
            put(state, f"{ours}.q_proj", linear(d, d, weight, bias, slice(0, d)))  # W^Q: rows 0…d
            put(state, f"{ours}.kv_proj", linear(2 * d, d, weight, bias, slice(d, 3 * d)))  # [W^K; W^V]
        else:
            put(state, f"{ours}.qkv", linear(3 * d, d, f"{theirs}.in_proj_weight", f"{theirs}.in_proj_bias"))
        put(state, f"{ours}.out_proj", linear(d, d, f"{theirs}.out_proj.weight", f"{theirs}.out_proj.bias"))

    model = Transformer(config)
    state = {k: v for k, v in model.state_dict().items() if k.startswith(("src_embed.", "tgt_embed.", "generator."))}
    for stack, n in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        for i in range(n):
            theirs, ours = f"{stack}.layers.{i}", f"{stack}.{i}"
            attention(f"{theirs}.self_attn", f"{ours}.self_attn", False, state)
            norms = ["add_norm1", "add_norm2"]
            if stack == "decoder":
                attention(f"{theirs}.multihead_attn", f"{ours}.cross_attn", True, state)
                norms.append("add_norm3")
            put(state, f"{ours}.ffn.w_1", linear(d_ff, d, f"{theirs}.linear1.weight", f"{theirs}.linear1.bias"))
            put(state, f"{ours}.ffn.w_2", linear(d, d_ff, f"{theirs}.linear2.weight", f"{theirs}.linear2.bias"))
            for j, ours_norm in enumerate(norms, start=1):
                put(state, f"{ours}.{ours_norm}.norm", norm(f"{theirs}.norm{j}"))
    if config.final_layer_norm:
        put(state, "encoder_norm", norm("encoder.norm"))
        put(state, "decoder_norm", norm("decoder.norm"))
    load_state(model, state, origin)
    return model
