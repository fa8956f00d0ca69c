"""GPT-NeoX (Pythia, the model family of much interpretability work, whose training checkpoints are public) from a
local Hugging Face folder → a decoder-only scratchformer.

How it departs from the 2017 paper, and the option that covers each (all off for the paper model):
decoder-only (n_encoder_layers=0); pre-norm LayerNorms and a final LayerNorm (norm_first, final_layer_norm);
attention and feed-forward side by side, x + Attention(LN₁(x)) + FFN(LN₂(x)) (parallel_residual), unless the
config turns use_parallel_residual off; rotary positions on a fraction of each head's dimensions (positional=
"rotary", rotary_fraction = rotary_pct, 0.25 in Pythia); nothing added to the embeddings, which are not scaled
(scale_embedding=False); GELU (activation="gelu"); an output layer of its own (embed_out). Its fused
query_key_value matrix is laid out head by head — [q₁ k₁ v₁ q₂ k₂ v₂ …], d_head rows each — and is reordered
here into our [W^Q W^K W^V].
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from .bert import activation_for
from .llama import decoder_sizes, open_decoder, rope_options
from .weights import Weights, put, put_token_ends


def config_from_neox(hf, directory: Path, name: str) -> TransformerConfig:
    """transformers.GPTNeoXConfig → TransformerConfig of a decoder-only model with GPT-NeoX's departures."""
    origin = str(directory / "config.json")
    if not getattr(hf, "attention_bias", True):
        raise UserError(f"{origin} turns off the attention biases; scratchformer opens GPT-NeoX models with them.")
    return TransformerConfig(
        # GPT-NeoX's attention has one key/value head per query head, whatever else config.json carries
        **{**decoder_sizes(hf, name, tie_default=False), "n_kv_heads": None, "d_kv": None},
        activation=activation_for(hf.hidden_act, origin),
        positional="rotary",
        scale_embedding=False,
        final_layer_norm=True,
        norm_first=True,
        layer_norm_eps=float(hf.layer_norm_eps),
        parallel_residual=bool(getattr(hf, "use_parallel_residual", True)),
        **rope_options(hf, origin, partial=True),
        extra={"architecture": "gpt_neox", "source": str(directory), "hf_name": str(hf.name_or_path or "")},
    )  # fmt: skip


def _head_by_head(t: torch.Tensor, h: int, d_head: int) -> torch.Tensor:
    """GPT-NeoX's fused rows [q₁ k₁ v₁ q₂ …] (3·h·d_head, …) → ours [q₁ … q_h k₁ … k_h v₁ … v_h]."""
    rest = t.shape[1:]
    return t.reshape(h, 3, d_head, *rest).transpose(0, 1).reshape(3 * h * d_head, *rest)


def neox_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from GPT-NeoX's tensor names (GPTNeoXModel's, or the causal LM's under "gpt_neox.")."""
    d, state = c.d_model, {}
    put_token_ends(state, w, c, "embed_in.weight", "embed_out.weight")
    for i in range(c.n_decoder_layers):
        theirs, ours = f"layers.{i}", f"decoder.{i}"
        put(state, f"{ours}.add_norm1.norm", w.layer_norm(d, f"{theirs}.input_layernorm"))
        fused = w.linear(3 * d, d, f"{theirs}.attention.query_key_value")
        put(state, f"{ours}.self_attn.qkv", {k: _head_by_head(v, c.n_heads, c.d_head) for k, v in fused.items()})
        put(state, f"{ours}.self_attn.out_proj", w.linear(d, d, f"{theirs}.attention.dense"))
        put(state, f"{ours}.add_norm3.norm", w.layer_norm(d, f"{theirs}.post_attention_layernorm"))
        put(state, f"{ours}.ffn.w_1", w.linear(c.d_ff, d, f"{theirs}.mlp.dense_h_to_4h"))
        put(state, f"{ours}.ffn.w_2", w.linear(d, c.d_ff, f"{theirs}.mlp.dense_4h_to_h"))
    put(state, "decoder_norm", w.layer_norm(d, "final_layer_norm"))
    return state


def load_neox(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A GPT-NeoX / Pythia folder → ModelBundle of a decoder-only scratchformer model in eval mode."""
    from transformers import GPTNeoXConfig

    return open_decoder(directory, device, GPTNeoXConfig, lambda hf, name: config_from_neox(hf, directory, name),
                        neox_state, prefixes=("gpt_neox.", ""))
