"""Self-attention does not know order: it is a weighted sum over a set. Shuffle the source and, without
positional encoding, the encoder gives back exactly the same rows in the shuffled order (put back, they equal the
original run up to float rounding). The positional encoding (paper §3.5) is what makes a word's vector depend on
where it stands: with it, the rows put back differ.

Measured with the model's own encoder layers; "without positional encoding" starts them from the token
embeddings alone (E[x]·√d_model, plus token types and the embedding LayerNorm where the model has them).

A decoder-only model with rotary positions (Llama, Mistral, Qwen, …) has no encoder and adds nothing to its
embeddings: its positions turn the queries and keys inside every attention. Its decoder is measured instead, with
the causal mask switched off (the mask alone would tell positions apart: position t sees t tokens); "with" turns q
and k by their positions as the model does, "without" leaves them unturned.
"""

from __future__ import annotations

import torch

from .inputs import need_two_tokens, read_source
from .measures import max_abs_diff

TITLE = "Order and positional encoding"
CLAIM = ("Without positional encoding the encoder output of a shuffled source is the same rows shuffled; with it, "
         "each row depends on its position.")  # fmt: skip
CONTROLS = {"positional": True, "seed": 0}


def applies(bundle) -> str | None:
    c = bundle.config
    if rotary_decoder(c):
        return None
    if not c.has_encoder:
        return (f"The order experiment shuffles an encoder's source, and {bundle.name} has no encoder (its decoder's "
                "causal mask already tells positions apart).")  # fmt: skip
    if c.positional == "none":
        if c.relative_buckets:
            return (f"{bundle.name} has no positional encoding to remove: positions enter each attention as a "
                    "relative position bias instead (T5), so the order experiment does not apply.")  # fmt: skip
        return (f"{bundle.name} adds no positional encoding, so there is none to remove: the order experiment does "
                "not apply.")
    return None


def embed_without_positions(model, src: torch.Tensor) -> torch.Tensor:
    """The source embedding as Embeddings.forward makes it, less the positional term: (1, S) → (1, S, d_model)."""
    emb = model.src_embed
    x = emb.tokens(src) * emb.scale  # (1, S, d_model)
    if emb.token_types is not None:
        x = x + emb.token_types(torch.zeros_like(src))
    return emb.layer_norm(x) if emb.layer_norm is not None else x


def encode(model, src: torch.Tensor, positional: bool) -> torch.Tensor:
    """(1, S) ids → encoder output (1, S, d_model), with or without the positional encoding."""
    with torch.inference_mode():
        if positional:
            return model.encode(src)
        x = embed_without_positions(model, src)
        for layer in model.encoder:
            x = layer(x, None)  # one sentence: no padding mask
        return model.encoder_norm(x) if model.encoder_norm is not None else x


def rotary_decoder(config) -> bool:
    """A decoder-only model whose positions are rotary: the experiment shuffles its decoder's input."""
    return not config.has_encoder and config.has_decoder and config.positional == "rotary"


def decode_unmasked(model, tgt: torch.Tensor, rotate: bool) -> torch.Tensor:
    """(1, T) ids → the decoder's output (1, T, d_model) with no causal mask (one sentence: nothing padded), queries
    and keys turned by their positions (rotate) or not. As Transformer.decode(causal=False) computes it, with the
    rotation left out on request."""
    c = model.config
    with torch.inference_mode():
        x = model.tgt_embed(tgt)  # (1, T, d_model): no positions are added under RoPE
        t = tgt.shape[1]
        rope = model.rotary(t) if rotate and model.rotary is not None else None  # (cos, sin), each (T, d_rot)
        local = model.rotary_local(t) if rotate and model.rotary_local is not None else None
        for i, layer in enumerate(model.decoder):
            x = layer(x, None, None, None, None, False, None, local if c.local_rope(i) else rope)
        return model.decoder_norm(x) if model.decoder_norm is not None else x


def permutation(n: int, seed: int) -> list[int]:
    """A seeded shuffle of 0 … n−1 that moves at least one position (n ≥ 2)."""
    gen = torch.Generator().manual_seed(int(seed))
    for _ in range(100):
        perm = torch.randperm(n, generator=gen).tolist()
        if perm != list(range(n)):
            return perm
    return list(range(1, n)) + [0]


def run(bundle, source: str, target: str | None = None, positional: bool = True, seed: int = 0) -> dict:
    model = bundle.model
    if rotary_decoder(bundle.config):
        inputs = bundle.prepare_run(source, source)  # the text behind the start token, as the decoder reads it
        src, tokens = inputs.tgt.to(bundle.device), inputs.target_tokens[0]
        need_two_tokens(tokens, "order experiment's text")
        return _measure(src, tokens, seed, lambda ids, on: decode_unmasked(model, ids, on), "decoder",
                        "rotary positions")  # fmt: skip
    src, tokens = read_source(bundle, source)  # (1, S); the target is not read
    need_two_tokens(tokens, "order experiment's source")
    return _measure(src, tokens, seed, lambda ids, on: encode(model, ids, on), "encoder", "positional encoding")


def _measure(src: torch.Tensor, tokens: list[str], seed: int, stack, where: str, what: str) -> dict:
    """Run `stack(ids, positions_on)` on the text and on a shuffle of it, rows put back, with and without
    positions."""
    perm = permutation(src.shape[1], seed)
    back = [perm.index(i) for i in range(len(perm))]  # shuffled row back[i] holds original position i
    shuffled = src[:, perm]  # (1, S)
    result = {}
    for key, pe in (("with_pe", True), ("without_pe", False)):
        original = stack(src, pe)[0]  # (S, d_model)
        moved = stack(shuffled, pe)[0]  # (S, d_model), rows in the shuffled order
        put_back = moved[back]  # (S, d_model), rows in the original order again
        rows = (put_back.double() - original.double()).abs().amax(-1)  # (S,)
        result[key] = {"max_diff_after_unpermuting": max_abs_diff(put_back, original),
                       "max_diff_in_place": max_abs_diff(moved, original),
                       "row_diffs": [float(x) for x in rows]}
    result.update(
        permutation=perm, source_tokens=tokens, shuffled_tokens=[tokens[i] for i in perm],
        stack=where, positions=what,
        summary=(f"Shuffled and put back, the {where} output differs by at most "
                 f"{result['without_pe']['max_diff_after_unpermuting']:.2g} without {what} (float "
                 f"rounding) and by {result['with_pe']['max_diff_after_unpermuting']:.3g} with "
                 f"{'them' if what.endswith('s') else 'it'}"
                 + (" (causal mask off, so that only the positions tell order)." if where == "decoder" else ".")),
    )
    return result
