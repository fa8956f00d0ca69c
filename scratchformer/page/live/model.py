"""The live page's model: weights, tokenizers and the few config numbers that run.js needs to run the whole
forward pass again in the browser when a student types a sentence (no Qt, no torch beyond reading the bundle).

Two architectures run in the browser, and nothing else:
  - the paper's encoder-decoder as the bundled en-hi, copy, reverse and sort models and the blog preset use it
    (post-LN LayerNorm, sinusoidal positions added to embeddings scaled by √d_model, ReLU feed-forward, biases, tied
    output layer);
  - the parts of a Llama-style decoder that llama-tiny uses (decoder-only, RMSNorm before each sublayer and after
    the stack, rotary positions, grouped-query attention, gated SiLU feed-forward, no biases).
The switches between them (norm kind, pre- or post-norm, final norm, gating, activation relu/silu, biases, tying,
grouped key/value heads) are read one by one, so their mixtures run too. `live_refusal` names, in one sentence,
the first thing of a model the engine does not compute; `live_model` packs what it does.

Weights are packed as the page packs its maps (packing.py: byte-shuffled, gzip, base64), float16 when every value
of a tensor is a float16 number (the bundled en-hi and llama-tiny were saved in float16, so nothing is lost) and
float32 otherwise (copy, reverse and sort were saved in float32): the browser then computes from the very weights
Python does.

Two tokenizers are read: scratchformer's word-level vocabularies (every token by id) and GPT-2's byte-level BPE as
gpt2_tokenizer builds it (bpe.js; the merges as pairs of ids, from which the browser rebuilds the
vocabulary, written once when both sides share it). The paper preset reads GPT-2's tokens too, but its weights are
far over LIVE_BYTES; a folder of the paper's architecture at a smaller size runs.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import torch

from ...loading.model_bundle import GENERATION_CAP
from ...running.generation import DEFAULT_NEW_TOKENS
from ..packing import compress, shuffled

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
# … and a byte-level BPE one, as scratchformer's gpt2_tokenizer builds it (the post-processor adds nothing: text is
# encoded without special tokens)
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
_BPE_OFF = ("dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback", "ignore_merges")
TOKENIZERS_READ = "word-level vocabularies and GPT-2's byte-level BPE"  # what the sentences below say is read


def _tokenizer_json(tokenizer) -> dict:
    return json.loads(tokenizer.hf.backend_tokenizer.to_str())


def _plain_added(spec: dict) -> bool:
    """Every added token is matched as typed (no normalising, stripping or whole-word rule)."""
    return all(not (t["normalized"] or t["lstrip"] or t["rstrip"] or t["single_word"]) for t in spec["added_tokens"])


def _word_level_same(spec: dict) -> bool:
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [])
    return (
        spec.get("normalizer") == _NORMALIZER
        and pre.get("type") == "Sequence"
        and tuple(s.get("type") for s in steps) == _PRE_TOKENIZER
        and steps[1].get("behavior") == "Removed"
        and spec.get("decoder") == _DECODER
        and _plain_added(spec)
    )


def _byte_chars() -> list[str]:
    """GPT-2's bytes_to_unicode: byte b → the character it is written as in the vocabulary."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


def _merge_pairs(spec: dict) -> list[tuple[str, str]]:
    """The BPE model's merges in rank order, as pairs (tokenizers writes ["a", "b"]; older files "a b")."""
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in spec["model"]["merges"]]


def _gpt2_layout(spec: dict) -> bool:
    """The vocabulary is laid out as GPT-2's, so that the merges imply it: the 256 byte characters by code point
    first (ids 0–255), then merge r's result at 256 + r (made of earlier ids), then added tokens only."""
    vocab = spec["model"]["vocab"]
    if any(vocab.get(ch) != i for i, ch in enumerate(sorted(_byte_chars()))):
        return False
    for r, (a, b) in enumerate(_merge_pairs(spec)):
        made = 256 + r
        if vocab.get(a + b) != made or not (vocab.get(a, made) < made and vocab.get(b, made) < made):
            return False
    added = {t["content"]: t["id"] for t in spec["added_tokens"]}
    rest = len(vocab) - 256 - len(spec["model"]["merges"])
    return rest == sum(1 for t, i in added.items() if vocab.get(t) == i)


def _byte_level_same(tokenizer, spec: dict) -> bool:
    model = spec["model"]
    return (
        spec.get("normalizer") is None
        and {k: (spec.get("pre_tokenizer") or {}).get(k) for k in _BYTE_LEVEL} == _BYTE_LEVEL
        and (spec.get("decoder") or {}).get("type") == "ByteLevel"
        and all(model.get(k) in (None, "", False) for k in _BPE_OFF)  # each BPE option off
        and not getattr(tokenizer.hf, "clean_up_tokenization_spaces", False)  # decode() would move spaces
        and _plain_added(spec)
        and _gpt2_layout(spec)
    )


def _tokenizer_problem(tokenizer, side: str, rows: int) -> str | None:
    """Why the engine cannot read text as this tokenizer does, or None."""
    spec = _tokenizer_json(tokenizer)
    kind = spec.get("model", {}).get("type")
    if kind == "WordLevel" and tokenizer.kind == "word-level":
        if not _word_level_same(spec):
            return f"its {side} tokenizer reads text with other rules than scratchformer's word-level one"
    elif kind == "BPE" and tokenizer.kind == "gpt2-bpe":
        if not _byte_level_same(tokenizer, spec):
            return f"its {side} tokenizer reads text with other rules than GPT-2's byte-level BPE"
    else:
        return f"its {side} tokenizer is {tokenizer.kind}, and the page reads {TOKENIZERS_READ} only"
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


def _planes(values: np.ndarray, width: int) -> str:
    """Unsigned integers as `width`-byte little-endian numbers gathered into byte planes, base64 (no gzip of its
    own: the page's live chunk is gzipped whole, and the engine reads this without waiting)."""
    stored = np.ascontiguousarray(values, dtype=f"<u{width}").reshape(-1).view(np.uint8).reshape(-1, width)
    return base64.b64encode(np.ascontiguousarray(stored.T).tobytes()).decode("ascii")


def _byte_level(tokenizer) -> dict:
    """GPT-2's byte-level BPE as bpe.js reads it: the merges as pairs of ids (merge r makes id
    first + r; the byte tokens before it are implied), the added tokens and which ids are special. The vocabulary's
    pieces and labels follow from these."""
    spec = _tokenizer_json(tokenizer)
    vocab = spec["model"]["vocab"]
    pairs = np.array([[vocab[a], vocab[b]] for a, b in _merge_pairs(spec)], dtype=np.int64).reshape(-1)
    width = 2 if pairs.size == 0 or pairs.max() < 2**16 else 4
    added = [[t["content"], t["id"]] for t in spec["added_tokens"]]
    return {"kind": "byte-bpe", "size": len(tokenizer.hf), "first": 256, "width": width,
            "merges": _planes(pairs, width), "added": added, "unk": None,
            "special": sorted(t["id"] for t in spec["added_tokens"] if t["special"])}  # fmt: skip


def _tokenizer(tokenizer) -> dict:
    """What the engine reads text with: every token by id, the unknown token, the added tokens (matched in the raw
    text before it is normalised) and which ids are special (left out of decoded text)."""
    if tokenizer.kind == "gpt2-bpe":
        return _byte_level(tokenizer)
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


def _tokenizers(bundle) -> dict:
    """Both sides' tokenizers; a byte-level one the target shares with the source is written once (the target then
    says {"same_as": "src"}): GPT-2's merges are the largest part of a small model's page."""
    src = _tokenizer(bundle.src_tokenizer)
    tgt = _tokenizer(bundle.tgt_tokenizer) if bundle.tgt_tokenizer is not bundle.src_tokenizer else src
    if src.get("kind") == "byte-bpe" and tgt == src:
        tgt = {"same_as": "src"}
    return {"src": src, "tgt": tgt}


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
    formula, axes, diagram block): the same for any input, taken from a trace of the first example (cut to the
    model's positions: blog reads 10) or of a one-word input."""
    inputs = bundle.prepare(bundle.examples()[0].source if bundle.examples() else "a", truncate=True)
    _, trace = bundle.run(inputs, keep_output=False)
    return [{"name": s.name, "kind": s.kind, "title": s.title, "formula": s.formula, "dims": list(s.dims),
             "sublayer": s.sublayer, "major": s.major} for s in trace]  # fmt: skip


def live_model(bundle, steps: bool = True) -> dict:
    """The model as the browser's engine (run.js) reads it: JSON-able. Call live_refusal first; a model
    it refuses is packed all the same but would not run right."""
    tensors, tied = _weights(bundle.model)
    weights = {}
    for name, tensor in tensors.items():
        values = tensor.float().cpu().numpy()
        dtype = _dtype(values)
        weights[name] = {"shape": list(values.shape), "dtype": dtype, "data": compress(shuffled(values, dtype))}
    out = {"config": _config(bundle), "tokenizers": _tokenizers(bundle), "weights": weights,
           "tied": tied}  # fmt: skip
    if steps:
        out["steps"] = _step_template(bundle)
    return out
