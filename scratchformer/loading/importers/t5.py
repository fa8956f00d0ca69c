"""T5 (v1.0) and T5 v1.1 / Flan-T5 from a local Hugging Face folder → an encoder-decoder scratchformer.

How T5 departs from the 2017 paper, and the option that covers each (all off for the paper model):
pre-LN residual connections with a final norm after each stack (norm_first, final_layer_norm); RMSNorm instead of
LayerNorm: γ·x/√(mean(x²) + ε), no mean subtracted and no β (norm="rmsnorm"); no positional encoding added to the
inputs (positional="none") and no √d_model scaling of the embeddings (scale_embedding=False); instead a relative
position bias added to the attention scores: the distance key − query falls into one of relative_buckets buckets
(bidirectional in the encoder, causal in the decoder), each with a learned number per head, stored in the first
layer's self-attention and shared by every layer of the stack (relative_buckets, relative_max_distance); no
1/√d_k scaling of the scores, folded into the initialisation (scale_attention=False); heads of d_kv numbers with
n_heads · d_kv free to differ from d_model (d_kv); no biases in any linear layer (linear_bias=False); a ReLU
feed-forward (v1.0) or the gated GELU of v1.1 / Flan-T5, (GELU_tanh(x W_1) ⊙ x V) W_2 (ffn_gated,
activation="gelu_tanh"). The output layer is tied to the shared embedding with the decoder output first scaled
by d_model^-0.5 (v1.0: scale_decoder_output), or has a matrix of its own and no rescaling (v1.1: tie_output off).
The decoder starts from decoder_start_token_id, T5's pad token, which is never treated as padding there.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ...transformer.model import Transformer
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
    wrap_as_tokenizer_does,
)
from .weights import Weights, load_state, put, read_weights

MAX_LEN = 512  # T5 has no position table; its pre-training inputs were 512 tokens long
# T5 reads its task from a text prefix (Raffel et al. 2020, appendix D); Flan-T5 follows plain instructions too.
EXAMPLES = ("translate English to German: The house is wonderful.",
            "summarize: studies have shown that owning a dog is good for you",
            "translate English to French: Attention is all you need.")  # fmt: skip


def _activation(hf, origin: str) -> tuple[str, bool]:
    """(our activation, gated) from feed_forward_proj: "relu", "gated-gelu" (= gelu_new, tanh form), "gated-silu"…"""
    proj = str(getattr(hf, "feed_forward_proj", "relu"))
    parts = proj.split("-")
    gated = parts[0] == "gated"
    name = "gelu_new" if proj == "gated-gelu" else parts[-1]  # transformers' own reading of "gated-gelu"
    if len(parts) > 2 or (len(parts) == 2 and not gated) or name not in HF_ACTIVATIONS:
        raise UserError(f"{origin} uses the feed-forward {proj!r}; scratchformer supports relu, gelu, gated-gelu, "
                        "gated-relu and gated-silu.")  # fmt: skip
    return HF_ACTIVATIONS[name], gated


def config_from_t5(hf, data: dict, directory: Path, name: str, untied: bool) -> TransformerConfig:
    """transformers.T5Config (plus the raw config.json, for what transformers rewrites) → TransformerConfig."""
    origin = str(directory / "config.json")
    activation, gated = _activation(hf, origin)
    # transformers 5 always ties T5's lm_head (unless the weights differ) and keeps whether to rescale in
    # scale_decoder_outputs; older config.json files say tie_word_embeddings: false for v1.1 instead.
    scale = data.get("scale_decoder_outputs")
    if scale is None:
        scale = data.get("tie_word_embeddings", True) is not False
    decoder_start = getattr(hf, "decoder_start_token_id", None)
    eos = first_eos(hf)
    return TransformerConfig(
        d_model=hf.d_model,
        n_heads=hf.num_heads,
        d_ff=hf.d_ff,
        n_encoder_layers=hf.num_layers,
        n_decoder_layers=hf.num_decoder_layers if hf.num_decoder_layers is not None else hf.num_layers,
        dropout=float(hf.dropout_rate),
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size,
        max_len=int(data.get("n_positions") or MAX_LEN),
        share_embeddings=True,
        tie_output=not untied,
        pad_id=hf.pad_token_id,
        bos_id=decoder_start if decoder_start is not None else hf.pad_token_id,  # T5 starts from <pad>
        eos_id=eos,
        name=name,
        activation=activation,
        positional="none",
        scale_embedding=False,
        final_layer_norm=True,
        norm_first=True,
        layer_norm_eps=float(hf.layer_norm_epsilon),
        norm="rmsnorm",
        d_kv=hf.d_kv,
        linear_bias=False,
        scale_attention=False,
        relative_buckets=hf.relative_attention_num_buckets,
        relative_max_distance=hf.relative_attention_max_distance,
        ffn_gated=gated,
        scale_decoder_output=bool(scale),
        extra={"architecture": "t5", "source": str(directory), "hf_name": str(hf.name_or_path or ""),
               "src_suffix": [], "examples": list(EXAMPLES)},
    )  # fmt: skip


def _attention(w: Weights, d: int, inner: int, theirs: str, cross: bool) -> dict[str, dict[str, torch.Tensor]]:
    """T5's separate q, k, v, o (no biases) as our fused projections."""
    q, k, v = (w.take((inner, d), f"{theirs}.{p}.weight") for p in ("q", "k", "v"))
    out = {"out_proj": {"weight": w.take((d, inner), f"{theirs}.o.weight")}}
    if cross:
        out["q_proj"] = {"weight": q}
        out["kv_proj"] = {"weight": torch.cat([k, v], dim=0)}  # (2·inner, d)
    else:
        out["qkv"] = {"weight": torch.cat([q, k, v], dim=0)}  # (3·inner, d)
    return out


def _ffn(w: Weights, c: TransformerConfig, theirs: str) -> dict[str, dict[str, torch.Tensor]]:
    d, f = c.d_model, c.d_ff
    if c.ffn_gated:  # wi_0 goes through the activation, wi_1 is the linear branch V
        return {"w_1": {"weight": w.take((f, d), f"{theirs}.wi_0.weight")},
                "w_v": {"weight": w.take((f, d), f"{theirs}.wi_1.weight")},
                "w_2": {"weight": w.take((d, f), f"{theirs}.wo.weight")}}  # fmt: skip
    return {"w_1": {"weight": w.take((f, d), f"{theirs}.wi.weight")},
            "w_2": {"weight": w.take((d, f), f"{theirs}.wo.weight")}}  # fmt: skip


def _put_all(state: dict, ours: str, parts: dict[str, dict[str, torch.Tensor]]) -> None:
    for module, tensors in parts.items():
        put(state, f"{ours}.{module}", tensors)


def t5_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from T5's tensor names (T5ForConditionalGeneration's or T5Model's)."""
    d, inner, state = c.d_model, c.d_attn, {}
    shared = w.take((c.src_vocab_size, d), "shared.weight", "encoder.embed_tokens.weight")
    state["src_embed.tokens.weight"] = shared
    state["tgt_embed.tokens.weight"] = shared
    state["generator.proj.weight"] = shared if c.tie_output else w.take((c.tgt_vocab_size, d), "lm_head.weight")
    for stack, n_layers in (("encoder", c.n_encoder_layers), ("decoder", c.n_decoder_layers)):
        ffn_index = 1 if stack == "encoder" else 2  # the decoder's layer 1 is cross-attention
        for i in range(n_layers):
            theirs, ours = f"{stack}.block.{i}.layer", f"{stack}.{i}"
            _put_all(state, f"{ours}.self_attn", _attention(w, d, inner, f"{theirs}.0.SelfAttention", False))
            state[f"{ours}.add_norm1.norm.weight"] = w.take((d,), f"{theirs}.0.layer_norm.weight")
            if i == 0:  # the relative position bias table: (buckets, heads), shared by the whole stack
                state[f"{ours}.self_attn.relative_bias.weight"] = w.take(
                    (c.relative_buckets, c.n_heads), f"{theirs}.0.SelfAttention.relative_attention_bias.weight")
            if stack == "decoder":
                _put_all(state, f"{ours}.cross_attn", _attention(w, d, inner, f"{theirs}.1.EncDecAttention", True))
                state[f"{ours}.add_norm2.norm.weight"] = w.take((d,), f"{theirs}.1.layer_norm.weight")
            last = "add_norm2" if stack == "encoder" else "add_norm3"
            _put_all(state, f"{ours}.ffn", _ffn(w, c, f"{theirs}.{ffn_index}.DenseReluDense"))
            state[f"{ours}.{last}.norm.weight"] = w.take((d,), f"{theirs}.{ffn_index}.layer_norm.weight")
        state[f"{stack}_norm.weight"] = w.take((d,), f"{stack}.final_layer_norm.weight")
    return state


def _untied(w: Weights) -> bool:
    """True when the folder holds an lm_head of its own (T5 v1.1, Flan-T5), not a copy of the shared embedding."""
    head, shared = w.find("lm_head.weight"), w.find("shared.weight", "encoder.embed_tokens.weight")
    if head is None or shared is None:
        return False
    a, b = w.tensors[head], w.tensors[shared]
    return a.shape != b.shape or not torch.equal(a, b)


def t5_tokenizer_from(directory: Path) -> TextTokenizer:
    """The folder's tokenizer.json (T5's SentencePiece unigram as a fast tokenizer)."""
    if not (directory / "tokenizer.json").is_file():
        what = " (it has spiece.model: convert it to tokenizer.json)" if (directory / "spiece.model").is_file() else ""
        raise UserError(f"{directory} has no tokenizer.json{what}.")
    hf = fast_tokenizer(directory)
    return TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "sentencepiece"))


def load_t5(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A T5 / T5 v1.1 / Flan-T5 folder → ModelBundle of an encoder-decoder scratchformer model in eval mode."""
    from transformers import T5Config

    data = read_hf_config(directory)
    hf = hf_config(T5Config, directory)
    tokenizer = t5_tokenizer_from(directory)
    tensors, filename = read_weights(directory)
    weights = Weights(tensors, str(directory / filename), prefixes=("", "transformer."))
    config = config_from_t5(hf, data, directory, model_name(directory, data), _untied(weights))
    check_vocab_size(tokenizer, config.src_vocab_size, directory)
    wrap_as_tokenizer_does(config, tokenizer.hf)  # T5's tokenizer ends every input with </s>
    model = Transformer(config)  # the weights were read once, to see whether the output layer is tied
    load_state(model, t5_state(weights, config), weights.origin)
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, config.name, str(directory))
