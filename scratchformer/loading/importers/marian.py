"""MarianMT translation models (e.g. Helsinki-NLP/opus-mt-*) from a local Hugging Face folder → scratchformer.

Marian is the paper's post-norm encoder-decoder. Where it departs, and the option that covers each:
sinusoids laid out as all sines then all cosines (positional="sinusoidal_halves"), positions counted from 0;
√d_model scaling only if config.json says scale_embedding (true for the opus-mt models); the FFN's
activation ("swish" = SiLU for opus-mt); a fixed final_logits_bias added to the logits. The decoder starts
from decoder_start_token_id, which is Marian's pad token: that first position is never treated as padding.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ...transformer.embeddings import sinusoidal_encoding
from ..model_bundle import ModelBundle
from ..tokenizers import TextTokenizer
from .bert import activation_for
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
from .seq2seq_layers import put_layers, stack_sizes
from .weights import Weights, build_model


def config_from_marian(hf, directory: Path, name: str, eos_token: str | None) -> TransformerConfig:
    """transformers.MarianConfig → TransformerConfig with Marian's departures turned on."""
    origin = str(directory / "config.json")
    share = bool(hf.share_encoder_decoder_embeddings)
    tgt_vocab = hf.vocab_size if share else (hf.decoder_vocab_size or hf.vocab_size)
    eos = first_eos(hf)
    return TransformerConfig(
        **stack_sizes(hf, origin),
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=tgt_vocab,
        max_len=hf.max_position_embeddings,
        share_embeddings=share,
        tie_output=bool(hf.tie_word_embeddings),
        pad_id=hf.pad_token_id,
        bos_id=hf.decoder_start_token_id,  # = pad_token_id in every opus-mt model
        eos_id=eos,
        name=name,
        activation=activation_for(hf.activation_function, origin),
        positional="sinusoidal_halves",
        scale_embedding=bool(hf.scale_embedding),
        final_logits_bias=True,
        layer_norm_eps=1e-5,  # Marian's nn.LayerNorm(d_model) default
        extra={"architecture": "marian", "source": str(directory), "hf_name": str(hf.name_or_path or ""),
               "src_suffix": [eos_token] if eos_token else []},
    )  # fmt: skip



def marian_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from Marian's tensor names (with or without the MarianMTModel "model." prefix)."""
    d, state = c.d_model, {}
    src_emb = w.take((c.src_vocab_size, d), "shared.weight", "encoder.embed_tokens.weight")
    if c.share_embeddings:
        tgt_emb = src_emb
    else:
        tgt_emb = w.take((c.tgt_vocab_size, d), "decoder.embed_tokens.weight")
    state["src_embed.tokens.weight"] = src_emb
    state["tgt_embed.tokens.weight"] = tgt_emb
    state["generator.proj.weight"] = tgt_emb if c.tie_output else w.take((c.tgt_vocab_size, d), "lm_head.weight")
    if w.has("final_logits_bias"):
        state["generator.final_logits_bias"] = w.take((1, c.tgt_vocab_size), "final_logits_bias")[0]  # (V,)
    else:  # transformers does not require it either; it is then zero
        state["generator.final_logits_bias"] = torch.zeros(c.tgt_vocab_size)
    table = sinusoidal_encoding(c.max_len, d, "halves")
    for side in ("encoder", "decoder"):  # older exports store the (fixed) table: it must be the one we compute
        key = w.find(f"{side}.embed_positions.weight")
        if key is not None:
            stored = w.take((c.max_len, d), key)
            if not torch.allclose(stored.float(), table, atol=1e-4):
                raise UserError(f"In {w.origin}, {key} is not Marian's sinusoidal table; this is not a Marian model.")
    put_layers(w, c, state)
    return state


class SentencePieceSide(TextTokenizer):
    """One side (source or target) of transformers' MarianTokenizer, which keeps two SentencePiece models."""

    def __init__(self, hf, name: str, target: bool) -> None:
        super().__init__(hf, name, "sentencepiece")
        self.target = target

    def encode(self, text: str) -> list[int]:
        key = "text_target" if self.target else "text"
        return list(self.hf(**{key: text}, add_special_tokens=False)["input_ids"])

    def unknown_words(self, text: str) -> list[str]:
        unk = self.unk_id
        return [word for word in text.split() if unk is not None and unk in self.encode(word)]


def marian_tokenizers(directory: Path) -> tuple[TextTokenizer, TextTokenizer]:
    """(source, target) tokenizers: tokenizer.json if the folder has one, else MarianTokenizer's .spm files."""
    if (directory / "tokenizer.json").is_file():
        hf = fast_tokenizer(directory)
        tok = TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "sentencepiece"))
        return tok, tok
    if not (directory / "source.spm").is_file():
        raise UserError(f"{directory} has no tokenizer (tokenizer.json, or source.spm + target.spm + vocab.json).")
    if importlib.util.find_spec("sentencepiece") is None:
        raise UserError(
            f"The tokenizer in {directory} is SentencePiece (source.spm); install it with `pip install sentencepiece`."
        )
    from transformers import MarianTokenizer

    try:
        hf = MarianTokenizer.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:  # missing target.spm / vocab.json or damaged files: one sentence
        raise UserError(f"The Marian tokenizer in {directory} cannot be read: {exc}.") from exc
    label = f"SentencePiece, {len(hf)} tokens"
    return SentencePieceSide(hf, label, target=False), SentencePieceSide(hf, label, target=True)


def load_marian(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A MarianMT folder → ModelBundle of an encoder-decoder scratchformer model in eval mode."""
    from transformers import MarianConfig

    data = read_hf_config(directory)
    hf = hf_config(MarianConfig, directory)
    src_tok, tgt_tok = marian_tokenizers(directory)
    name = model_name(directory, data)
    eos_id = first_eos(hf)
    eos_token = src_tok.hf.convert_ids_to_tokens(eos_id) if eos_id is not None else None
    config = config_from_marian(hf, directory, name, eos_token)
    wrap_as_tokenizer_does(config, src_tok.hf)  # … </s>, as Marian's tokenizer ends every source
    for side, tok, size in (("source", src_tok, config.src_vocab_size), ("target", tgt_tok, config.tgt_vocab_size)):
        check_vocab_size(tok, size, directory, f"{side} tokenizer")
    model = build_model(directory, config, marian_state, prefixes=("model.", ""))
    return ModelBundle(model.to(device).eval(), src_tok, tgt_tok, name, str(directory))
