"""Llama-style decoders from a local Hugging Face folder → a decoder-only scratchformer: Llama 2/3 (and SmolLM,
TinyLlama), Mistral, Qwen2 (Qwen2.5), Qwen3 and Phi-3.

How they depart from the 2017 paper, and the option that covers each (all off for the paper model):
decoder-only (n_encoder_layers=0); pre-norm residual connections x + Sublayer(RMSNorm(x)) (norm_first,
norm="rmsnorm") and a final RMSNorm (final_layer_norm); no positional encoding added to the embeddings, which
are not scaled by √d_model — instead rotary positions turn each head's queries and keys by position
(positional="rotary", rope_theta, rope_scaling); grouped-query attention, fewer key/value heads than query heads
(n_kv_heads); a SwiGLU feed-forward (SiLU(x W_gate) ⊙ x W_up) W_down (ffn_gated, activation="silu"); no biases
(linear_bias=False), except on W^Q, W^K, W^V in Qwen2 (qkv_bias); RMSNorm on each head's queries and keys in
Qwen3 (qk_norm="head"); a sliding window in Mistral and in the upper layers of a Qwen model that asks for one
(sliding_window, sliding_layers); an output layer of its own unless tie_word_embeddings. Their W^Q, W^K, W^V are
stored apart and are stacked here into our fused [W^Q W^K W^V] (Phi-3 stores them fused, and its gate and up
matrices as one gate_up_proj); gate_proj is our W_1, up_proj our V, down_proj our W_2. Nothing is run from the
folder, and weights are read from safetensors (or a weights-only pickle).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from ..tokenizers import TextTokenizer
from .bert import HF_ACTIVATIONS
from .hf import (
    check_vocab_size,
    fast_tokenizer,
    first_eos,
    hf_config,
    model_name,
    read_hf_config,
    token_kind,
    tokenizer_label,
)
from .weights import Weights, build_model, put, put_token_ends

# model_type → (transformers config class, what the family adds to Llama's recipe)
FAMILIES = {
    "llama": "LlamaConfig",
    "mistral": "MistralConfig",
    "qwen2": "Qwen2Config",
    "qwen3": "Qwen3Config",
    "phi3": "Phi3Config",
}
# the families (and those built on them: Qwen3-MoE on qwen3, OLMo 2) whose W^Q, W^K, W^V, W^O have biases when
# attention_bias says so
ATTENTION_BIAS = ("llama", "qwen3", "olmo2")


def rope_options(hf, origin: str, partial: bool = False) -> dict:
    """Our rotary options from config.json's rope_parameters (transformers ≥ 5; rope_theta and rope_scaling before);
    one sentence for a scaling scratchformer does not implement, rather than numbers that would be wrong.

    partial: whether the family turns only a fraction of each head's dimensions (partial_rotary_factor: GPT-NeoX,
    Phi-3). The others' attention turns every dimension whatever the config says, so a factor below 1 there is
    refused rather than guessed at."""
    params = dict(getattr(hf, "rope_parameters", None) or {})
    if not params:  # an older config object
        params = dict(getattr(hf, "rope_scaling", None) or {})
        params.setdefault("rope_theta", getattr(hf, "rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    options = {"rope_theta": float(params.get("rope_theta", 10000.0)),
               "rotary_fraction": float(params.get("partial_rotary_factor",
                                                   getattr(hf, "partial_rotary_factor", 1.0) or 1.0))}  # fmt: skip
    if not partial and options["rotary_fraction"] != 1.0:
        raise UserError(f"{origin} sets partial_rotary_factor {options['rotary_fraction']:g}, but this family's "
                        "attention turns every dimension of each head, so scratchformer cannot tell which numbers "
                        "are meant and does not open it.")  # fmt: skip
    if kind == "default":
        return options
    if kind == "linear":
        return {**options, "rope_scaling": "linear", "rope_factor": float(params["factor"])}
    if kind == "llama3":
        return {**options, "rope_scaling": "llama3", "rope_factor": float(params["factor"]),
                "rope_low_freq_factor": float(params["low_freq_factor"]),
                "rope_high_freq_factor": float(params["high_freq_factor"]),
                "rope_original_max_len": int(params["original_max_position_embeddings"])}  # fmt: skip
    raise UserError(f"{origin} stretches its rotary positions with rope_type {kind!r}, which scratchformer does not "
                    "implement (it does default, linear and llama3), so it would give wrong numbers.")  # fmt: skip


def sliding_options(hf, model_type: str) -> dict:
    """sliding_window and the layers that use it: every layer of a Mistral with a window; the layers a Qwen config
    marks "sliding_attention" (use_sliding_window), none otherwise."""
    window = getattr(hf, "sliding_window", None)
    if not window:
        return {}
    if model_type in ("mistral", "phi3"):
        return {"sliding_window": int(window)}
    if model_type in ("qwen2", "qwen3") and getattr(hf, "use_sliding_window", False):
        types = list(getattr(hf, "layer_types", None) or [])
        local = [i for i, kind in enumerate(types) if kind == "sliding_attention"]
        return {"sliding_window": int(window), "sliding_layers": local} if local else {}
    return {}


def decoder_sizes(hf, name: str, tie_default: bool) -> dict:
    """The TransformerConfig fields every decoder family reads alike from its transformers config: sizes, heads
    (with grouped-query attention and a head width of their own), the vocabulary, the special ids, no dropout
    (trained without it), and a tied output matrix when `tie_word_embeddings` (default `tie_default`) says so."""
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    return dict(
        d_model=hf.hidden_size,
        n_heads=hf.num_attention_heads,
        n_kv_heads=getattr(hf, "num_key_value_heads", None) or hf.num_attention_heads,
        d_kv=head_dim if head_dim * hf.num_attention_heads != hf.hidden_size else None,
        d_ff=hf.intermediate_size,
        n_encoder_layers=0,
        n_decoder_layers=hf.num_hidden_layers,
        dropout=0.0,
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size,
        max_len=int(hf.max_position_embeddings),
        share_embeddings=False,
        tie_output=bool(getattr(hf, "tie_word_embeddings", tie_default)),
        pad_id=None,  # padded batches give their padding explicitly
        bos_id=hf.bos_token_id,
        eos_id=first_eos(hf),
        name=name,
    )


def config_from_llama(hf, model_type: str, directory: Path, name: str) -> TransformerConfig:
    """A transformers Llama/Mistral/Qwen2/Qwen3 config → TransformerConfig of a decoder-only model."""
    origin = str(directory / "config.json")
    act = str(getattr(hf, "hidden_act", "silu"))
    if act not in HF_ACTIVATIONS:
        raise UserError(f"{origin} uses the activation {act!r}; scratchformer supports "
                        f"{', '.join(sorted(HF_ACTIVATIONS))}.")  # fmt: skip
    # only these families' attention reads attention_bias (Mistral, Qwen2, Phi-3 ignore it), only Llama's MLP mlp_bias
    attention_bias = model_type in ATTENTION_BIAS and bool(getattr(hf, "attention_bias", False))
    mlp_bias = model_type == "llama" and bool(getattr(hf, "mlp_bias", False))
    return TransformerConfig(
        **decoder_sizes(hf, name, tie_default=False),
        activation=HF_ACTIVATIONS[act],
        positional="rotary",
        scale_embedding=False,
        final_layer_norm=True,
        norm_first=True,
        norm="rmsnorm",
        layer_norm_eps=float(hf.rms_norm_eps),
        linear_bias=attention_bias,  # W^O (and W^Q, W^K, W^V unless qkv_bias says otherwise)
        qkv_bias=True if model_type == "qwen2" else None,
        ffn_bias=mlp_bias,
        ffn_gated=True,
        qk_norm="head" if model_type == "qwen3" else "none",
        **rope_options(hf, origin, partial=model_type == "phi3"),
        **sliding_options(hf, model_type),
        extra={"architecture": model_type, "source": str(directory), "hf_name": str(hf.name_or_path or "")},
    )  # fmt: skip


def llama_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from the family's tensor names (the base model's, or the causal LM's under "model.")."""
    d, dh, state = c.d_model, c.d_head, {}
    q_width, kv_width = c.n_heads * dh, c.kv_heads * dh
    qkv_bias = c.linear_bias if c.qkv_bias is None else c.qkv_bias
    ffn_bias = c.linear_bias if c.ffn_bias is None else c.ffn_bias
    put_token_ends(state, w, c, "embed_tokens.weight", "lm_head.weight")
    for i in range(c.n_decoder_layers):
        theirs, ours = f"layers.{i}", f"decoder.{i}"
        attn = f"{theirs}.self_attn"
        put(state, f"{ours}.add_norm1.norm", {"weight": w.take((d,), f"{theirs}.input_layernorm.weight")})
        if w.has(f"{attn}.qkv_proj.weight"):  # Phi-3 stores [W^Q W^K W^V] fused already, in our order
            put(state, f"{ours}.self_attn.qkv", w.linear(q_width + 2 * kv_width, d, f"{attn}.qkv_proj", qkv_bias))
        else:
            parts = [w.linear(width, d, f"{attn}.{p}_proj", qkv_bias)
                     for p, width in (("q", q_width), ("k", kv_width), ("v", kv_width))]  # fmt: skip
            put(state, f"{ours}.self_attn.qkv", {key: torch.cat([p[key] for p in parts]) for key in parts[0]})
        put(state, f"{ours}.self_attn.out_proj", w.linear(d, q_width, f"{attn}.o_proj", c.linear_bias))
        if c.qk_norm == "head":
            state[f"{ours}.self_attn.q_norm.weight"] = w.take((dh,), f"{attn}.q_norm.weight")
            state[f"{ours}.self_attn.k_norm.weight"] = w.take((dh,), f"{attn}.k_norm.weight")
        put(state, f"{ours}.add_norm3.norm", {"weight": w.take((d,), f"{theirs}.post_attention_layernorm.weight")})
        if c.has_experts(i):  # a mixture of experts: importers/moe.py reads it
            continue
        if w.has(f"{theirs}.mlp.gate_up_proj.weight"):  # Phi-3: [W_gate W_up] in one matrix, gate first
            fused = w.linear(2 * c.d_ff, d, f"{theirs}.mlp.gate_up_proj", ffn_bias)
            put(state, f"{ours}.ffn.w_1", {k: v[: c.d_ff] for k, v in fused.items()})
            put(state, f"{ours}.ffn.w_v", {k: v[c.d_ff :] for k, v in fused.items()})
        else:
            put(state, f"{ours}.ffn.w_1", w.linear(c.d_ff, d, f"{theirs}.mlp.gate_proj", ffn_bias))
            put(state, f"{ours}.ffn.w_v", w.linear(c.d_ff, d, f"{theirs}.mlp.up_proj", ffn_bias))
        put(state, f"{ours}.ffn.w_2", w.linear(d, c.d_ff, f"{theirs}.mlp.down_proj", ffn_bias))
    state["decoder_norm.weight"] = w.take((d,), "norm.weight")
    return state


def llama_tokenizer_from(directory: Path) -> TextTokenizer:
    """The folder's tokenizer as AutoTokenizer reads it (tokenizer.json and tokenizer_config.json)."""
    if not (directory / "tokenizer.json").is_file():
        raise UserError(f"{directory} has no tokenizer.json; scratchformer reads these models' tokenizers from it.")
    hf = fast_tokenizer(directory)
    return TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "sentencepiece"))


def open_decoder(directory: Path, device: str | torch.device, config_class,
                 make_config: Callable[[object, str], TransformerConfig],
                 state_for: Callable[[Weights, TransformerConfig], dict[str, torch.Tensor]],
                 prefixes: tuple[str, ...] = ("model.", "")) -> ModelBundle:  # fmt: skip
    """What opening any of today's decoder folders takes: transformers' config class read from config.json,
    the folder's tokenizer, our config from `make_config(hf, name)`, a start token (the config's, else the
    tokenizer's, else its end token: Qwen's and OLMo's tokenizers add none), and the weights mapped by
    `state_for` under the families' name `prefixes`."""
    data = read_hf_config(directory)
    hf = hf_config(config_class, directory)
    tokenizer = llama_tokenizer_from(directory)
    config = make_config(hf, model_name(directory, data))
    check_vocab_size(tokenizer, config.tgt_vocab_size, directory)
    if config.bos_id is None:  # the decoder reads a start token first
        config.bos_id = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.eos_id
    model = build_model(directory, config, state_for, prefixes=prefixes)
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, config.name, str(directory))


def load_llama(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A Llama, Mistral, Qwen2, Qwen3 or Phi-3 folder → ModelBundle of a decoder-only scratchformer model in eval
    mode."""
    import transformers

    model_type = read_hf_config(directory).get("model_type")
    config_class = getattr(transformers, FAMILIES[model_type])
    return open_decoder(directory, device, config_class,
                        lambda hf, name: config_from_llama(hf, model_type, directory, name), llama_state)
