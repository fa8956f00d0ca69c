"""Gemma decoders from a local Hugging Face folder → a decoder-only scratchformer: Gemma (model_type "gemma"),
Gemma 2 ("gemma2") and the text model of Gemma 3 ("gemma3_text").

Gemma starts from Llama's recipe (decoder-only, pre-norm RMSNorm, rotary positions, no biases, a gated
feed-forward; see llama.py) and departs from it, and from the 2017 paper, in these ways, each a TransformerConfig
option that is off for the paper's model:

- every model: the embeddings are scaled by √d_model again, as in the paper, but with √d_model first rounded to
  the weights' precision (round_embed_scale); RMSNorm multiplies by (1 + γ), its stored γ being an offset from 1,
  and takes that product in float32 (rmsnorm_plus_one); the gated feed-forward is GeGLU,
  (GELU_tanh(x W_gate) ⊙ x W_up) W_down (ffn_gated, activation="gelu_tanh"); heads of head_dim numbers whatever
  d_model / h is (d_kv); the output layer is the embedding table (tie_output).
- Gemma 2 and 3: a second RMSNorm after each sublayer, x + PostNorm(Sublayer(PreNorm(x))) (post_norm); the scores
  divided by √query_pre_attn_scalar instead of √d_k (attn_scale_dim); the logits soft-capped,
  c·tanh(logits / c) (final_softcap); local layers with a sliding window and global layers without, as layer_types
  says (sliding_window, sliding_layers).
- Gemma 2: the attention scores soft-capped before the mask, c·tanh(s / c) (attn_softcap).
- Gemma 3: RMSNorm (with its (1 + γ)) on each head's queries and keys (qk_norm="head"); the local layers' rotary
  base of their own, 10 000 against the global layers' 1 000 000 (rope_local_theta), and any rope scaling on the
  global layers only. transformers' Gemma 3 reads no attn_logit_softcapping, so neither do we.

Their W^Q, W^K, W^V are stacked into our fused [W^Q W^K W^V]; gate_proj is our W_1, up_proj our V, down_proj our
W_2. Gemma's input_layernorm and pre_feedforward_layernorm are our add_norm1.norm and add_norm3.norm, and its
post_attention_layernorm and post_feedforward_layernorm our add_norm1.post_norm and add_norm3.post_norm (Gemma 1,
like Llama, calls the norm before its feed-forward post_attention_layernorm). Nothing is run from the folder.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from .bert import HF_ACTIVATIONS
from .hf import read_hf_config
from .llama import decoder_sizes, llama_state, open_decoder, rope_options
from .weights import Weights

# model_type → the transformers config class that reads its config.json
FAMILIES = {"gemma": "GemmaConfig", "gemma2": "Gemma2Config", "gemma3_text": "Gemma3TextConfig"}


def _activation(hf, origin: str) -> str:
    """Our name of the feed-forward's activation (Gemma 1 calls the field hidden_act, Gemma 2 and 3
    hidden_activation)."""
    act = str(getattr(hf, "hidden_activation", None) or getattr(hf, "hidden_act", "gelu_pytorch_tanh"))
    if act not in HF_ACTIVATIONS:
        raise UserError(f"{origin} uses the activation {act!r}; scratchformer supports "
                        f"{', '.join(sorted(HF_ACTIVATIONS))}.")  # fmt: skip
    return HF_ACTIVATIONS[act]


def _local_layers(hf, model_type: str) -> dict:
    """sliding_window and the layers layer_types marks "sliding_attention" (Gemma 2 and 3), none for Gemma 1."""
    window = getattr(hf, "sliding_window", None)
    if model_type == "gemma" or not window:
        return {}
    local = [i for i, kind in enumerate(getattr(hf, "layer_types", None) or []) if kind == "sliding_attention"]
    return {"sliding_window": int(window), "sliding_layers": local} if local else {}


def _gemma3_rope(hf, origin: str, local_layers: bool) -> dict:
    """Gemma 3's rotary options: the global layers' base (and scaling) from rope_parameters["full_attention"],
    the local layers' from ["sliding_attention"], which scratchformer turns by an unscaled table only."""
    params = dict(getattr(hf, "rope_parameters", None) or {})
    full, local = params.get("full_attention") or {}, params.get("sliding_attention") or {}
    options = rope_options(SimpleNamespace(rope_parameters=full, partial_rotary_factor=1.0), origin)
    if not local_layers:
        return options
    kind = local.get("rope_type", "default")
    if kind != "default":
        raise UserError(f"{origin} stretches the rotary positions of its sliding-window layers with rope_type "
                        f"{kind!r}, which scratchformer does not implement for them (it turns them by an unscaled "
                        "table), so it would give wrong numbers.")  # fmt: skip
    theta = float(local.get("rope_theta", 10000.0))
    differs = theta != options["rope_theta"] or "rope_scaling" in options
    return {**options, "rope_local_theta": theta} if differs else options


def config_from_gemma(hf, model_type: str, directory: Path, name: str) -> TransformerConfig:
    """A transformers Gemma, Gemma 2 or Gemma 3 text config → TransformerConfig of a decoder-only model."""
    origin = str(directory / "config.json")
    if getattr(hf, "use_bidirectional_attention", False):
        raise UserError(f"{origin} sets use_bidirectional_attention (an encoder-style Gemma that reads the text both "
                        "ways), which scratchformer does not implement: it opens Gemma as a causal decoder.")
    later = model_type != "gemma"  # Gemma 2 and 3
    local = _local_layers(hf, model_type)
    if model_type == "gemma3_text":
        rope = _gemma3_rope(hf, origin, bool(local))
    else:
        rope = rope_options(hf, origin)
    attn_cap = getattr(hf, "attn_logit_softcapping", None) if model_type == "gemma2" else None
    final_cap = getattr(hf, "final_logit_softcapping", None) if later else None
    scalar = getattr(hf, "query_pre_attn_scalar", None) if later else None
    return TransformerConfig(
        **decoder_sizes(hf, name, tie_default=True),
        activation=_activation(hf, origin),
        positional="rotary",
        scale_embedding=True,
        round_embed_scale=True,
        final_layer_norm=True,
        norm_first=True,
        post_norm=later,
        norm="rmsnorm",
        rmsnorm_plus_one=True,
        layer_norm_eps=float(hf.rms_norm_eps),
        linear_bias=bool(getattr(hf, "attention_bias", False)),  # W^Q, W^K, W^V and W^O
        ffn_bias=False,
        ffn_gated=True,
        qk_norm="head" if model_type == "gemma3_text" else "none",
        attn_scale_dim=float(scalar) if scalar is not None else None,
        attn_softcap=float(attn_cap or 0.0),
        final_softcap=float(final_cap or 0.0),
        **rope,
        **local,
        extra={"architecture": model_type, "source": str(directory), "hf_name": str(hf.name_or_path or "")},
    )  # fmt: skip


def gemma_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from Gemma's tensor names: Llama's, plus the norms after each sublayer of Gemma 2 and 3."""
    state = llama_state(w, c)
    if not c.post_norm:
        return state
    d = c.d_model
    for i in range(c.n_decoder_layers):
        theirs, ours = f"layers.{i}", f"decoder.{i}"
        state[f"{ours}.add_norm1.post_norm.weight"] = w.take((d,), f"{theirs}.post_attention_layernorm.weight")
        state[f"{ours}.add_norm3.norm.weight"] = w.take((d,), f"{theirs}.pre_feedforward_layernorm.weight")
        state[f"{ours}.add_norm3.post_norm.weight"] = w.take((d,), f"{theirs}.post_feedforward_layernorm.weight")
    return state


def load_gemma(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A Gemma, Gemma 2 or Gemma 3 (text) folder → ModelBundle of a decoder-only scratchformer model in eval mode."""
    import transformers

    model_type = read_hf_config(directory).get("model_type")
    config_class = getattr(transformers, FAMILIES[model_type])
    return open_decoder(directory, device, config_class,
                        lambda hf, name: config_from_gemma(hf, model_type, directory, name), gemma_state)
