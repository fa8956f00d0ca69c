"""GPT-2 from a local Hugging Face folder → a decoder-only scratchformer.

How GPT-2 departs from the 2017 paper, and the option that covers each (all off for the paper model):
decoder-only (n_encoder_layers=0: no encoder, no cross-attention, the causal mask over the text itself); pre-LN
residual connections x + Sublayer(LayerNorm(x)) (norm_first) and a LayerNorm after the last layer, ln_f
(final_layer_norm); learned absolute positions (positional="learned"); no √d_model scaling of the embeddings
(scale_embedding=False); GELU in its tanh form, "gelu_new" (activation="gelu_tanh"). The output layer is tied to
the token embeddings, as in the paper. GPT-2 stores its projections as Conv1D, whose weight is (in, out): each is
transposed into our nn.Linear's (out, in). c_attn is [W^Q W^K W^V] side by side, so its transpose is exactly our
fused qkv. The decoder reads <|endoftext|> first, as the walkthrough does (GPT-2's tokenizer adds no start token).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from ..tokenizers import TextTokenizer
from .bert import activation_for
from .hf import byte_level_bpe, check_vocab_size, hf_config, model_name, read_hf_config, token_kind, tokenizer_label
from .weights import Weights, build_model, put, put_token_ends


def config_from_gpt2(hf, directory: Path, name: str) -> TransformerConfig:
    """transformers.GPT2Config → TransformerConfig of a decoder-only model with GPT-2's departures turned on."""
    origin = str(directory / "config.json")
    if getattr(hf, "add_cross_attention", False):
        raise UserError(f"{origin} adds cross-attention to GPT-2; scratchformer opens the decoder-only GPT-2 only.")
    if not getattr(hf, "scale_attn_weights", True) or getattr(hf, "scale_attn_by_inverse_layer_idx", False):
        raise UserError(f"{origin} changes GPT-2's 1/√d_k attention scaling; scratchformer supports the standard one.")
    return TransformerConfig(
        d_model=hf.n_embd,
        n_heads=hf.n_head,
        d_ff=hf.n_inner or 4 * hf.n_embd,
        n_encoder_layers=0,
        n_decoder_layers=hf.n_layer,
        dropout=float(hf.resid_pdrop),
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size,
        max_len=hf.n_positions,
        share_embeddings=False,
        tie_output=bool(getattr(hf, "tie_word_embeddings", True)),
        pad_id=None,  # GPT-2 has no padding token; padded batches give the padding explicitly
        bos_id=hf.bos_token_id,
        eos_id=hf.eos_token_id,
        name=name,
        activation=activation_for(hf.activation_function, origin),
        positional="learned",
        scale_embedding=False,
        final_layer_norm=True,
        norm_first=True,
        layer_norm_eps=float(hf.layer_norm_epsilon),
        extra={"architecture": "gpt2", "source": str(directory), "hf_name": str(hf.name_or_path or "")},
    )  # fmt: skip


def _conv1d(w: Weights, d_in: int, d_out: int, name: str) -> dict[str, torch.Tensor]:
    """GPT-2's Conv1D (weight (in, out), y = x W + b) as our nn.Linear (weight (out, in), y = x Wᵀ + b)."""
    return {"weight": w.take((d_in, d_out), f"{name}.weight").t().contiguous(),  # (out, in)
            "bias": w.take((d_out,), f"{name}.bias")}  # fmt: skip


def gpt2_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from GPT-2's tensor names (GPT2Model's, or GPT2LMHeadModel's under "transformer.")."""
    d, state = c.d_model, {}
    put_token_ends(state, w, c, "wte.weight", "lm_head.weight")
    state["tgt_embed.positions.weight"] = w.take((c.max_len, d), "wpe.weight")
    for i in range(c.n_decoder_layers):
        theirs, ours = f"h.{i}", f"decoder.{i}"
        put(state, f"{ours}.add_norm1.norm", w.layer_norm(d, f"{theirs}.ln_1"))  # before self-attention
        put(state, f"{ours}.self_attn.qkv", _conv1d(w, d, 3 * d, f"{theirs}.attn.c_attn"))  # (3d, d)
        put(state, f"{ours}.self_attn.out_proj", _conv1d(w, d, d, f"{theirs}.attn.c_proj"))
        put(state, f"{ours}.add_norm3.norm", w.layer_norm(d, f"{theirs}.ln_2"))  # before the feed-forward
        put(state, f"{ours}.ffn.w_1", _conv1d(w, d, c.d_ff, f"{theirs}.mlp.c_fc"))
        put(state, f"{ours}.ffn.w_2", _conv1d(w, c.d_ff, d, f"{theirs}.mlp.c_proj"))
    put(state, "decoder_norm", w.layer_norm(d, "ln_f"))
    return state


def gpt2_tokenizer_from(directory: Path) -> TextTokenizer:
    """The folder's byte-level BPE: tokenizer.json, or vocab.json + merges.txt (transformers' GPT-2 class, offline)."""
    from transformers import GPT2TokenizerFast

    hf = byte_level_bpe(GPT2TokenizerFast, directory)
    kind = token_kind(hf, "gpt2-bpe")
    if kind == "gpt2-bpe":
        hf.unk_token = None  # byte-level BPE reads every byte; <|endoftext|> is the start/end token, not "unknown"
    return TextTokenizer(hf, tokenizer_label(hf), kind)


def load_gpt2(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A GPT-2 folder → ModelBundle of a decoder-only scratchformer model in eval mode."""
    from transformers import GPT2Config

    data = read_hf_config(directory)
    hf = hf_config(GPT2Config, directory)
    tokenizer = gpt2_tokenizer_from(directory)
    config = config_from_gpt2(hf, directory, model_name(directory, data))
    check_vocab_size(tokenizer, config.tgt_vocab_size, directory)
    if config.bos_id is None:  # the decoder needs a start token; GPT-2's is <|endoftext|>
        config.bos_id = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.eos_id
    model = build_model(directory, config, gpt2_state, prefixes=("transformer.", ""))
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, config.name, str(directory))
