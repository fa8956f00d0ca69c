"""OLMo 2 (model_type "olmo2", AllenAI's fully open decoders) from a local Hugging Face folder → a decoder-only
scratchformer.

OLMo 2 keeps most of Llama's recipe (importers/llama.py: decoder-only, RMSNorm, rotary positions, a SwiGLU
feed-forward, no biases unless attention_bias, a final RMSNorm, an output layer of its own) and moves the norms:

- each layer normalises what its sublayers hand back, not what they read: x + RMSNorm(Attention(x)), then
  x + RMSNorm(FFN(x)). That is Gemma 2's sandwich without its first norm (post_norm with post_norm_only); the
  residual sum itself is never normalised inside the layers, unlike the paper's RMSNorm(x + Sublayer(x)).
- RMSNorm on the queries and keys over the whole projection, all heads at once, before the rotation
  (qk_norm="full"): q_norm is h·d_head wide and k_norm h_kv·d_head wide.

Their post_attention_layernorm and post_feedforward_layernorm are our add_norm1.post_norm and add_norm3.post_norm;
W^Q, W^K, W^V are stacked into our fused [W^Q W^K W^V]; gate_proj is our W_1, up_proj our V, down_proj our W_2.
Nothing is run from the folder.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from .llama import config_from_llama, open_decoder
from .weights import Weights, put, put_token_ends


def config_from_olmo2(hf, directory: Path, name: str) -> TransformerConfig:
    """transformers.Olmo2Config → TransformerConfig: Llama's options, with the norms after the sublayers only and
    QK-norm over the whole projections."""
    config = config_from_llama(hf, "olmo2", directory, name)
    return dataclasses.replace(config, qk_norm="full", post_norm=True, post_norm_only=True,
                               extra={**config.extra, "architecture": "olmo2"})  # fmt: skip


def olmo2_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from OLMo 2's tensor names (the base model's, or the causal LM's under "model.")."""
    d, state = c.d_model, {}
    q_width, kv_width = c.n_heads * c.d_head, c.kv_heads * c.d_head
    put_token_ends(state, w, c, "embed_tokens.weight", "lm_head.weight")
    for i in range(c.n_decoder_layers):
        theirs, ours = f"layers.{i}", f"decoder.{i}"
        attn = f"{theirs}.self_attn"
        parts = [w.linear(width, d, f"{attn}.{p}_proj", c.linear_bias)
                 for p, width in (("q", q_width), ("k", kv_width), ("v", kv_width))]  # fmt: skip
        put(state, f"{ours}.self_attn.qkv", {key: torch.cat([p[key] for p in parts]) for key in parts[0]})
        put(state, f"{ours}.self_attn.out_proj", w.linear(d, q_width, f"{attn}.o_proj", c.linear_bias))
        state[f"{ours}.self_attn.q_norm.weight"] = w.take((q_width,), f"{attn}.q_norm.weight")
        state[f"{ours}.self_attn.k_norm.weight"] = w.take((kv_width,), f"{attn}.k_norm.weight")
        state[f"{ours}.add_norm1.post_norm.weight"] = w.take((d,), f"{theirs}.post_attention_layernorm.weight")
        put(state, f"{ours}.ffn.w_1", w.linear(c.d_ff, d, f"{theirs}.mlp.gate_proj", False))
        put(state, f"{ours}.ffn.w_v", w.linear(c.d_ff, d, f"{theirs}.mlp.up_proj", False))
        put(state, f"{ours}.ffn.w_2", w.linear(d, c.d_ff, f"{theirs}.mlp.down_proj", False))
        state[f"{ours}.add_norm3.post_norm.weight"] = w.take((d,), f"{theirs}.post_feedforward_layernorm.weight")
    state["decoder_norm.weight"] = w.take((d,), "norm.weight")
    return state


def load_olmo2(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """An OLMo 2 folder → ModelBundle of a decoder-only scratchformer model in eval mode."""
    from transformers import Olmo2Config

    return open_decoder(directory, device, Olmo2Config, lambda hf, name: config_from_olmo2(hf, directory, name),
                        olmo2_state)
