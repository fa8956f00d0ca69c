"""The live page's model: weights, tokenizers and the few config numbers that viewer_live.js needs to run the whole
forward pass again in the browser when a student types a sentence (no Qt, no torch beyond reading the bundle).

Two architectures run in the browser, and nothing else:
  - the paper's encoder-decoder as the bundled en-hi, copy, reverse and sort models use it (post-LN LayerNorm,
    sinusoidal positions added to embeddings scaled by √d_model, ReLU feed-forward, biases, tied output layer);
  - the parts of a Llama-style decoder that llama-tiny uses (decoder-only, RMSNorm before each sublayer and after
    the stack, rotary positions, grouped-query attention, gated SiLU feed-forward, no biases).
The switches between them (norm kind, pre- or post-norm, final norm, gating, activation relu/silu, biases, tying,
grouped key/value heads) are read one by one, so their mixtures run too. `live_refusal` names, in one sentence,
the first thing of a model the engine does not compute; `live_model` packs what it does.

Weights are packed as the page packs its maps (packing.py: byte-shuffled, gzip, base64), float16 when every value
of a tensor is a float16 number (the bundled en-hi and llama-tiny were saved in float16, so nothing is lost) and
float32 otherwise (copy, reverse and sort were saved in float32): the browser then computes from the very weights
Python does.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from ..loading.model_bundle import GENERATION_CAP
from ..running.generation import DEFAULT_NEW_TOKENS
from .packing import compress, shuffled

LIVE_BYTES = 20_000_000  # the weights a page may carry for the browser to run (bytes, as stored: float16 or 32)

_ACTIVATIONS = {"gelu": "GELU", "gelu_tanh": "GELU (tanh approximation)"}
_POSITIONS = {
    "learned": "learned position embeddings",
    "sinusoidal_halves": "sinusoids laid out in halves (Marian)",
    "none": "no positional encoding",
}
# Config fields whose value the engine does not compute, each with the phrase that names it. Read in order; the
# first one a model sets is what live_refusal says. Every other field is read by the engine (sizes, norm kind and
# place, final norm, gating, biases, tying, key/value heads, θ) or changes nothing in evaluation (dropout).
_UNSUPPORTED = (
    (lambda c: not c.has_decoder, "it is encoder-only (no decoder writes output)"),
    (lambda c: c.relative_buckets, "it adds a relative position bias to the attention scores (T5)"),
    (lambda c: c.scale_decoder_output, "it scales the decoder output before the output layer (T5)"),
    (lambda c: c.n_experts, "it has a mixture of experts in place of the feed-forward layers"),
    (lambda c: c.activation not in ("relu", "silu"),
     lambda c: f"its feed-forward layers use {_ACTIVATIONS.get(c.activation, c.activation)}, and the page computes "
               "ReLU and SiLU only"),
    (lambda c: c.positional not in ("sinusoidal", "rotary"),
     lambda c: f"it uses {_POSITIONS.get(c.positional, c.positional)}, and the page computes the paper's sinusoids "
               "and rotary positions only"),
    (lambda c: c.embed_layer_norm, "it normalises its embeddings (a LayerNorm after them)"),
    (lambda c: c.type_vocab_size, "it adds token-type (segment) embeddings"),
    (lambda c: c.final_logits_bias, "its output layer adds a bias to the logits"),
    (lambda c: c.d_kv is not None and c.d_kv * c.n_heads != c.d_model, "its heads are not d_model / h wide (d_kv)"),
    (lambda c: not c.scale_attention or c.attn_scale_dim is not None, "its attention scores are not divided by √d_k"),
    (lambda c: c.positional == "rotary" and c.rotary_fraction != 1.0,
     "its rotary positions turn only part of each head"),
    (lambda c: c.positional == "rotary" and c.rope_scaling != "none",
     lambda c: f"its rotary positions are stretched ({c.rope_scaling} scaling)"),
    (lambda c: c.qk_norm != "none", "it normalises queries and keys (QK-norm)"),
    (lambda c: c.sliding_window, "it attends through a sliding window"),
    (lambda c: c.parallel_residual, "its attention and feed-forward run side by side (parallel residual)"),
    (lambda c: c.rmsnorm_plus_one, "its RMSNorm multiplies by (1 + γ) (Gemma)"),
    (lambda c: c.round_embed_scale, "it rounds the embeddings' √d_model (Gemma)"),
    (lambda c: c.post_norm or c.post_norm_only, "it normalises each sublayer's output before the residual add"),
    (lambda c: c.attn_softcap or c.final_softcap, "it soft-caps its scores or logits (Gemma 2)"),
    (lambda c: c.rope_local_theta is not None, "its local layers turn by a rotary base of their own"),
    (lambda c: c.mlm_head, "it has a masked-language-model head"),
    (lambda c: c.position_offset, "its position ids start at an offset"),
)  # fmt: skip

# What a word-level tokenizer.json must say for the engine to read text as the Hugging Face one does.
_NORMALIZER = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
_PRE_TOKENIZER = ("WhitespaceSplit", "Punctuation")
_DECODER = {"type": "WordPiece", "prefix": "##", "cleanup": False}


def _tokenizer_json(tokenizer) -> dict:
    return json.loads(tokenizer.hf.backend_tokenizer.to_str())


def _tokenizer_problem(tokenizer, side: str, rows: int) -> str | None:
    """Why the engine cannot read text as this tokenizer does, or None."""
    if tokenizer.kind != "word-level":
        return f"its {side} tokenizer is {tokenizer.kind}, and the page reads word-level vocabularies only"
    spec = _tokenizer_json(tokenizer)
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [])
    same = (
        spec.get("model", {}).get("type") == "WordLevel"
        and spec.get("normalizer") == _NORMALIZER
        and pre.get("type") == "Sequence"
        and tuple(s.get("type") for s in steps) == _PRE_TOKENIZER
        and steps[1].get("behavior") == "Removed"
        and spec.get("decoder") == _DECODER
        and all(not (t["normalized"] or t["lstrip"] or t["rstrip"] or t["single_word"]) for t in spec["added_tokens"])
    )
    if not same:
        return f"its {side} tokenizer reads text with other rules than scratchformer's word-level one"
    if tokenizer.vocab_size > rows:
        return f"its {side} tokenizer knows {tokenizer.vocab_size} tokens and its embedding has {rows} rows"
    return None


def _weights(model) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Every tensor of the state dict once ({name: tensor}), and the names that share another's ({alias: name}):
    a tied output layer is the target embedding itself."""
    unique, tied, seen = {}, {}, {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key in seen:
            tied[name] = seen[key]
        else:
            seen[key] = name
            unique[name] = tensor.detach()
    return unique, tied


def _dtype(values: np.ndarray) -> str:
    """'f16' when every value is a float16 number (stored as float16: nothing is lost), else 'f32'."""
    return "f16" if bool(np.array_equal(values.astype(np.float16).astype(np.float32), values)) else "f32"


def weight_bytes(bundle) -> int:
    """Bytes of the weights as the page would carry them (float16 or float32 each, before compression)."""
    tensors, _ = _weights(bundle.model)
    return sum(t.numel() * (2 if _dtype(t.float().cpu().numpy()) == "f16" else 4) for t in tensors.values())


def live_refusal(bundle) -> str | None:
    """One sentence saying why the page cannot run this model in the browser, or None when it can."""
    c = bundle.config
    why = None
    for test, phrase in _UNSUPPORTED:
        if test(c):
            why = phrase(c) if callable(phrase) else phrase
            break
    if why is None:
        sides = [("text", bundle.tgt_tokenizer, c.tgt_vocab_size)]
        if c.has_encoder:
            sides = [("source", bundle.src_tokenizer, c.src_vocab_size), ("target", *sides[0][1:])]
        why = next((p for side, tok, rows in sides if (p := _tokenizer_problem(tok, side, rows)) is not None), None)
    if why is None:
        size = weight_bytes(bundle)
        if size > LIVE_BYTES:
            why = f"its weights take {size / 1e6:.1f} MB, more than the {LIVE_BYTES / 1e6:.0f} MB a page may carry"
    if why is None:
        return None
    return f"The page cannot rerun {bundle.name} in the browser: {why}."


def _tokenizer(tokenizer) -> dict:
    """What the engine reads text with: every token by id, the unknown token, the added tokens (matched in the raw
    text before it is normalised) and which ids are special (left out of decoded text)."""
    spec = _tokenizer_json(tokenizer)
    vocab = tokenizer.hf.get_vocab()  # the model's words and the added tokens
    tokens = [""] * (max(vocab.values()) + 1)
    for token, i in vocab.items():
        tokens[i] = token
    words = spec["model"]["vocab"]
    added = [[t["content"], t["id"]] for t in spec["added_tokens"]]
    return {"tokens": tokens, "unk": tokenizer.unk_id,
            "added": added,  # [text, id]: split out of the raw text first, longest leftmost match
            "not_words": [i for _, i in added if tokens[i] not in words],  # ids a plain word never reads as
            "special": sorted(t["id"] for t in spec["added_tokens"] if t["special"])}  # fmt: skip


def _config(bundle) -> dict:
    c = bundle.config
    ids = lambda key, tok: [i for t in c.extra.get(key, []) if (i := tok.token_id(t)) is not None]  # noqa: E731
    return {
        "name": bundle.name, "d_model": c.d_model, "n_heads": c.n_heads, "n_kv_heads": c.kv_heads,
        "d_head": c.d_head, "d_ff": c.d_ff, "n_encoder_layers": c.n_encoder_layers,
        "n_decoder_layers": c.n_decoder_layers, "max_len": c.max_len, "pad_id": c.pad_id,
        "start_id": bundle.start_id(), "end_id": bundle.end_id(),
        "src_prefix": ids("src_prefix", bundle.src_tokenizer), "src_suffix": ids("src_suffix", bundle.src_tokenizer),
        "tgt_prefix": ids("tgt_prefix", bundle.tgt_tokenizer) if c.has_encoder else [],
        "scale_embedding": c.scale_embedding, "positional": c.positional, "rope_theta": float(c.rope_theta),
        "norm": c.norm, "norm_first": c.norm_first, "final_layer_norm": c.final_layer_norm,
        "eps": float(c.layer_norm_eps), "activation": c.activation, "ffn_gated": c.ffn_gated,
        "generation_cap": GENERATION_CAP, "new_tokens": DEFAULT_NEW_TOKENS,
    }  # fmt: skip


def _step_template(bundle) -> list[dict]:
    """Every step a trace of this model has, in order, with what the page shows beside its values (title,
    formula, axes, diagram block): the same for any input, taken from a trace of a one-word input."""
    inputs = bundle.prepare(bundle.examples()[0].source if bundle.examples() else "a")
    _, trace = bundle.run(inputs, keep_output=False)
    return [{"name": s.name, "kind": s.kind, "title": s.title, "formula": s.formula, "dims": list(s.dims),
             "sublayer": s.sublayer, "major": s.major} for s in trace]  # fmt: skip


def live_model(bundle, steps: bool = True) -> dict:
    """The model as the browser's engine (viewer_live.js) reads it: JSON-able. Call live_refusal first; a model
    it refuses is packed all the same but would not run right."""
    tensors, tied = _weights(bundle.model)
    weights = {}
    for name, tensor in tensors.items():
        values = tensor.float().cpu().numpy()
        dtype = _dtype(values)
        weights[name] = {"shape": list(values.shape), "dtype": dtype, "data": compress(shuffled(values, dtype))}
    out = {"config": _config(bundle),
           "tokenizers": {"src": _tokenizer(bundle.src_tokenizer), "tgt": _tokenizer(bundle.tgt_tokenizer)},
           "weights": weights, "tied": tied}  # fmt: skip
    if steps:
        out["steps"] = _step_template(bundle)
    return out
