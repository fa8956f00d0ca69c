"""Mixtures of experts from a local Hugging Face folder → a decoder-only scratchformer: Mixtral and Qwen3-MoE.

Around the feed-forward they are the decoders of importers/llama.py — Mixtral's attention is Mistral's (a
sliding window when its config sets one), Qwen3-MoE's is Qwen3's (QK-norm) — and config_from_llama reads those
parts. What they add is the mixture of experts (scratchformer.transformer.moe, config.n_experts): in each of its
layers a router (`gate`, d_model → n_experts, no bias) and n_experts gated SiLU feed-forwards, of which each token uses
the num_experts_per_tok with the highest router probability. Mixtral renormalises the chosen probabilities to add
up to 1; Qwen3-MoE does when its config says norm_topk_prob. Qwen3-MoE's experts are moe_intermediate_size wide,
and the layers that decoder_sparse_step skips or mlp_only_layers lists keep one dense feed-forward,
intermediate_size wide. Mixtral's router_jitter_noise multiplies the router's input by noise while training
only, so a model opened here (in eval mode) has none.

How the experts are stored: checkpoints on the Hub (and what transformers' save_pretrained writes) keep one set of
matrices per expert — Mixtral `block_sparse_moe.experts.E.w1` (gate, our W_1), `w3` (up, our V), `w2` (down, our
W_2); Qwen3-MoE `mlp.experts.E.gate_proj`, `up_proj`, `down_proj` — while transformers holds them in memory
stacked over the experts, `mlp.experts.gate_up_proj` (E, 2·d_expert, d_model: the gate rows, then the up rows)
and `mlp.experts.down_proj` (E, d_model, d_expert); a folder with the stacked names opens too.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from .hf import read_hf_config
from .llama import config_from_llama, llama_state, open_decoder
from .weights import Weights

# model_type → (transformers config class, the dense family whose attention it has)
FAMILIES = {
    "mixtral": ("MixtralConfig", "mistral"),
    "qwen3_moe": ("Qwen3MoeConfig", "qwen3"),
}


def moe_options(hf, model_type: str) -> dict:
    """Our mixture-of-experts options from the family's config."""
    n_layers = hf.num_hidden_layers
    if model_type == "mixtral":
        return {"n_experts": int(hf.num_local_experts), "experts_per_token": int(hf.num_experts_per_tok),
                "moe_renormalize": True}  # fmt: skip
    n_experts = int(hf.num_experts)
    if not n_experts:  # a Qwen3-MoE config without experts is a dense Qwen3
        return {}
    step, dense = int(hf.decoder_sparse_step), set(hf.mlp_only_layers or [])
    layers = [i for i in range(n_layers) if i not in dense and (i + 1) % step == 0]
    return {"n_experts": n_experts, "experts_per_token": int(hf.num_experts_per_tok),
            "moe_renormalize": bool(hf.norm_topk_prob), "d_expert": int(hf.moe_intermediate_size),
            "moe_layers": None if len(layers) == n_layers else layers}  # fmt: skip


def config_from_moe(hf, model_type: str, directory: Path, name: str) -> TransformerConfig:
    """A transformers Mixtral / Qwen3-MoE config → TransformerConfig of a decoder-only model with experts."""
    dense = FAMILIES[model_type][1]
    config = config_from_llama(hf, dense, directory, name)
    window = {}
    if model_type == "qwen3_moe" and getattr(hf, "sliding_window", None):  # set only with use_sliding_window
        window = {"sliding_window": int(hf.sliding_window), "sliding_layers": None}  # every layer, as theirs
    return dataclasses.replace(config, **moe_options(hf, model_type), **window,
                               extra={**config.extra, "architecture": model_type})  # fmt: skip


def expert_weights(w: Weights, c: TransformerConfig, layer: int) -> dict[str, torch.Tensor]:
    """Our `decoder.<layer>.moe.…` tensors: the router and each expert's W_1, V, W_2, from either storage."""
    d, f, n_experts = c.d_model, c.d_expert or c.d_ff, c.n_experts
    theirs, ours = f"layers.{layer}", f"decoder.{layer}.moe"
    blocks = (f"{theirs}.block_sparse_moe", f"{theirs}.mlp")  # Mixtral's name on the Hub, and everyone else's
    state = {f"{ours}.router.weight": w.take((n_experts, d), *(f"{b}.gate.weight" for b in blocks))}
    stacked = next((b for b in blocks if w.has(f"{b}.experts.gate_up_proj")), None)
    if stacked is not None:  # (E, 2f, d) and (E, d, f): transformers' layout in memory
        gate_up = w.take((n_experts, 2 * f, d), f"{stacked}.experts.gate_up_proj")
        down = w.take((n_experts, d, f), f"{stacked}.experts.down_proj")
        for e in range(n_experts):
            state[f"{ours}.experts.{e}.w_1.weight"] = gate_up[e, :f]  # the gate rows come first
            state[f"{ours}.experts.{e}.w_v.weight"] = gate_up[e, f:]
            state[f"{ours}.experts.{e}.w_2.weight"] = down[e]
        return state
    names = {"w_1": ("w1", "gate_proj"), "w_v": ("w3", "up_proj"), "w_2": ("w2", "down_proj")}
    for e in range(n_experts):
        for mine, (mixtral, qwen) in names.items():
            shape = (d, f) if mine == "w_2" else (f, d)
            state[f"{ours}.experts.{e}.{mine}.weight"] = w.take(
                shape, *(f"{b}.experts.{e}.{n}.weight" for b in blocks for n in (mixtral, qwen)))
    return state


def moe_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict: attention, norms and dense feed-forwards as a Llama-style decoder's, then the experts."""
    state = llama_state(w, c)
    for i in range(c.n_decoder_layers):
        if c.has_experts(i):
            state.update(expert_weights(w, c, i))
    return state


def load_moe(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A Mixtral or Qwen3-MoE folder → ModelBundle of a decoder-only scratchformer model in eval mode."""
    import transformers

    model_type = read_hf_config(directory).get("model_type")
    config_class = getattr(transformers, FAMILIES[model_type][0])
    return open_decoder(directory, device, config_class,
                        lambda hf, name: config_from_moe(hf, model_type, directory, name), moe_state)
