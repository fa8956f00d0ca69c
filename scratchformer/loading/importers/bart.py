"""BART and mBART (e.g. facebook/bart-base, facebook/mbart-large-cc25) from a local Hugging Face folder → scratchformer.

Both are encoder-decoders with the paper's layer layout. Where they depart, and the option that covers each:
learned position embeddings whose ids count from 2 (positional="learned", position_offset=2: the table has
max_position_embeddings + 2 rows, the first two never read); a LayerNorm on the embedding sum, layernorm_embedding
(embed_layer_norm); GELU in the feed-forward network; a learned final_logits_bias added to the logits; √d_model
scaling only if config.json says scale_embedding (false for BART, true for mBART-cc25). BART keeps the paper's
post-LN layers, LayerNorm(x + Sublayer(x)). mBART is pre-LN, x + Sublayer(LayerNorm(x)) (norm_first), and ends
each stack with a LayerNorm, encoder.layer_norm / decoder.layer_norm (final_layer_norm).

Embeddings: with tie_word_embeddings (the default) one matrix, `shared`, is the encoder's and the decoder's
embedding and the output layer, as in the paper. Without it each of the three has its own matrix.

Attention: q_proj, k_proj and v_proj are stacked into our fused projections (self-attention's qkv = [W_q; W_k; W_v],
cross-attention's q_proj and kv_proj = [W_k; W_v]); BART multiplies the queries by 1/√d_k, which is our ÷√d_k.

The decoder's start token is config.json's decoder_start_token_id (BART: </s>, id 2). mBART-cc25 names none: its
decoder starts with the target language code, taken from the tokenizer's tgt_lang when it has one, else </s>.
Where generation forces a token right after the start (forced_bos_token_id: <s> for BART, the target language for
mBART-50) it is recorded as extra["tgt_prefix"]. The source is wrapped as the folder's tokenizer wraps it
(BART: <s> … </s>, mBART: … </s> en_XX): extra["src_prefix"] and extra["src_suffix"].
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ..model_bundle import ModelBundle
from ..tokenizers import TextTokenizer
from .bert import activation_for
from .hf import (
    byte_level_bpe,
    check_vocab_size,
    first_eos,
    folder_tokenizer,
    hf_config,
    model_name,
    read_hf_config,
    special_affixes,
    token_kind,
    tokenizer_label,
)
from .seq2seq_layers import put_layers, stack_sizes
from .weights import Weights, build_model, put

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: "offset the embedding ids by 2"


def config_from_bart(hf, directory: Path, name: str, family: str, start_id: int, extra: dict) -> TransformerConfig:
    """transformers.BartConfig / MBartConfig → TransformerConfig with the family's departures turned on."""
    origin = str(directory / "config.json")
    tied = bool(getattr(hf, "tie_word_embeddings", True))
    eos = first_eos(hf)
    pre_ln = family == "mbart"
    return TransformerConfig(
        **stack_sizes(hf, origin),
        src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size,
        max_len=hf.max_position_embeddings,
        share_embeddings=tied,
        tie_output=tied,
        pad_id=hf.pad_token_id,
        bos_id=start_id,
        eos_id=eos,
        name=name,
        activation=activation_for(hf.activation_function, origin),
        positional="learned",
        position_offset=POSITION_OFFSET,
        scale_embedding=bool(hf.scale_embedding),
        embed_layer_norm=True,
        norm_first=pre_ln,
        final_layer_norm=pre_ln,
        final_logits_bias=True,
        layer_norm_eps=1e-5,  # nn.LayerNorm(d_model)'s default, which BART and mBART use
        extra={"architecture": family, "source": str(directory), "hf_name": str(hf.name_or_path or ""), **extra},
    )  # fmt: skip



def bart_state(w: Weights, c: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our state_dict from BART's / mBART's tensor names (with or without the ...ForConditionalGeneration "model."
    prefix). The layer norms keep their roles in both: self_attn_layer_norm, encoder_attn_layer_norm and
    final_layer_norm belong to the self-attention, cross-attention and feed-forward sublayers (after them in BART,
    before them in mBART)."""
    d, v, state = c.d_model, c.src_vocab_size, {}
    if c.share_embeddings:
        src_emb = tgt_emb = w.take((v, d), "shared.weight", "encoder.embed_tokens.weight")
    else:  # untied: each side reads its own matrix (older exports may hold only `shared`)
        src_emb = w.take((v, d), "encoder.embed_tokens.weight", "shared.weight")
        tgt_emb = w.take((c.tgt_vocab_size, d), "decoder.embed_tokens.weight", "shared.weight")
    state["src_embed.tokens.weight"] = src_emb
    state["tgt_embed.tokens.weight"] = tgt_emb
    state["generator.proj.weight"] = tgt_emb if c.tie_output else w.take((c.tgt_vocab_size, d), "lm_head.weight")
    if w.has("final_logits_bias"):
        state["generator.final_logits_bias"] = w.take((1, c.tgt_vocab_size), "final_logits_bias")[0]  # (V,)
    else:  # a bare BartModel has no LM head: the bias is then zero, as transformers initialises it
        state["generator.final_logits_bias"] = torch.zeros(c.tgt_vocab_size)
    n_positions = c.max_len + c.position_offset
    for side, ours in (("encoder", "src_embed"), ("decoder", "tgt_embed")):
        state[f"{ours}.positions.weight"] = w.take((n_positions, d), f"{side}.embed_positions.weight")
        put(state, f"{ours}.layer_norm", w.layer_norm(d, f"{side}.layernorm_embedding"))
    if c.final_layer_norm:  # mBART: a LayerNorm after each stack
        put(state, "encoder_norm", w.layer_norm(d, "encoder.layer_norm"))
        put(state, "decoder_norm", w.layer_norm(d, "decoder.layer_norm"))
    put_layers(w, c, state)
    return state


def _tokenizer_class_name(directory: Path) -> str:
    """tokenizer_config.json's tokenizer_class (read as JSON, never imported from the folder), or ''."""
    path = directory / "tokenizer_config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    return str(data.get("tokenizer_class") or "") if isinstance(data, dict) else ""


def bart_tokenizer(directory: Path) -> TextTokenizer:
    """BART's byte-level BPE (GPT-2's, as RoBERTa uses it): tokenizer.json, or vocab.json + merges.txt."""
    from transformers import BartTokenizerFast

    hf = byte_level_bpe(BartTokenizerFast, directory)
    return TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "gpt2-bpe"))  # byte-level BPE: 'Ġ' shown as ' '


def mbart_tokenizer(directory: Path) -> TextTokenizer:
    """mBART's SentencePiece vocabulary from tokenizer.json (MBartTokenizerFast, or MBart50TokenizerFast when
    tokenizer_config.json names it: mBART-50 puts the language code before the text, not after)."""
    if not (directory / "tokenizer.json").is_file():
        spm = " (it has sentencepiece.bpe.model only)" if (directory / "sentencepiece.bpe.model").is_file() else ""
        raise UserError(f"{directory} has no tokenizer.json{spm}; scratchformer reads mBART's tokenizer from it.")
    from transformers import MBart50TokenizerFast, MBartTokenizerFast

    cls = MBart50TokenizerFast if _tokenizer_class_name(directory).startswith("MBart50") else MBartTokenizerFast
    hf = folder_tokenizer(directory, cls)
    return TextTokenizer(hf, tokenizer_label(hf), token_kind(hf, "sentencepiece"))


def _generation_value(directory: Path, data: dict, key: str):
    """A generation setting from config.json, or else generation_config.json (read as JSON)."""
    if data.get(key) is not None:
        return data[key]
    path = directory / "generation_config.json"
    try:
        generation = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return generation.get(key) if isinstance(generation, dict) else None


def _decoder_start(hf, tok: TextTokenizer, family: str, directory: Path, data: dict) -> tuple[int, str]:
    """(start id, how it was chosen): decoder_start_token_id if given; mBART: the target language; else </s>."""
    start = hf.decoder_start_token_id
    if start is None:
        start = _generation_value(directory, data, "decoder_start_token_id")
    if start is not None:
        return int(start), f"decoder_start_token_id {start} ({tok.hf.convert_ids_to_tokens(int(start))})"
    tgt_lang = getattr(tok.hf, "tgt_lang", None) if family == "mbart" else None
    lang_id = tok.token_id(tgt_lang) if tgt_lang else None
    if lang_id is not None:
        return lang_id, f"the target language code {tgt_lang} (config.json names no decoder_start_token_id)"
    eos = first_eos(hf)
    if eos is None:
        raise UserError(f"{directory / 'config.json'} names neither decoder_start_token_id nor eos_token_id, "
                        "so the decoder has no start token.")  # fmt: skip
    token = tok.hf.convert_ids_to_tokens(int(eos))
    return int(eos), f"eos_token_id {eos} ({token}; config.json names no decoder_start_token_id)"


def _load(directory: Path, device: str | torch.device, family: str) -> ModelBundle:
    from transformers import BartConfig, MBartConfig

    data = read_hf_config(directory)
    hf = hf_config(BartConfig if family == "bart" else MBartConfig, directory)
    tokenizer = bart_tokenizer(directory) if family == "bart" else mbart_tokenizer(directory)
    name = model_name(directory, data)
    start_id, start_note = _decoder_start(hf, tokenizer, family, directory, data)
    prefix, suffix = special_affixes(tokenizer.hf)
    extra = {"src_prefix": prefix, "src_suffix": suffix, "decoder_start": start_note}
    forced = _generation_value(directory, data, "forced_bos_token_id")
    if forced is not None:
        extra["tgt_prefix"] = [str(tokenizer.hf.convert_ids_to_tokens(int(forced)))]
    config = config_from_bart(hf, directory, name, family, start_id, extra)
    check_vocab_size(tokenizer, config.src_vocab_size, directory)
    model = build_model(directory, config, bart_state, prefixes=("model.", ""))
    return ModelBundle(model.to(device).eval(), tokenizer, tokenizer, name, str(directory))


def load_bart(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """A BART folder → ModelBundle of an encoder-decoder scratchformer model (post-LN) in eval mode."""
    return _load(directory, device, "bart")


def load_mbart(directory: Path, device: str | torch.device = "cpu") -> ModelBundle:
    """An mBART folder → ModelBundle of an encoder-decoder scratchformer model (pre-LN) in eval mode."""
    return _load(directory, device, "mbart")
