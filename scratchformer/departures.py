"""How a model departs from the 2017 paper, in short phrases for people (the window and `scratchformer trace`).

The paper's model ("Attention Is All You Need", §3): an encoder and a decoder, post-LN residual connections
LayerNorm(x + Sublayer(x)), a ReLU feed-forward network, the interleaved sinusoidal positional encoding added to
embeddings scaled by √d_model, and an output layer tied to the embeddings with no bias. Every TransformerConfig
option that changes one of these is named here; an empty list means the paper's architecture (the `paper` and
`blog` presets, and the bundled models). Sizes, dropout, LayerNorm ε and separate source/target vocabularies are
not departures: the paper fixes none of them for every model.
"""

from __future__ import annotations

from .config import TransformerConfig

ACTIVATION_PHRASES = {
    "gelu": "GELU instead of ReLU in the feed-forward network",
    "gelu_tanh": "GELU (tanh approximation) instead of ReLU in the feed-forward network",
    "silu": "SiLU (swish) instead of ReLU in the feed-forward network",
}


def departures(config: TransformerConfig) -> list[str]:
    """Every way `config` departs from the 2017 paper, one short phrase each, in reading order; [] for the paper."""
    c, out = config, []
    if not c.has_encoder:
        out.append("decoder-only: no encoder and no cross-attention")
    elif not c.has_decoder:
        out.append("encoder-only: no decoder and no output layer")
    if c.positional == "learned":
        offset = f", counted from {c.position_offset}" if c.position_offset else ""
        out.append(f"learned position embeddings instead of sinusoids{offset}")
    elif c.positional == "sinusoidal_halves":
        out.append("sinusoids laid out as all sines, then all cosines (not interleaved)")
    elif c.positional == "none":
        out.append("no positional encoding")
    if not c.scale_embedding:
        out.append("embeddings not scaled by √d_model")
    if c.type_vocab_size:
        out.append("token-type (segment) embeddings added to the input")
    if c.embed_layer_norm:
        out.append("LayerNorm on the embeddings")
    if c.norm_first:
        out.append("pre-LN: LayerNorm before each sublayer, x + Sublayer(LayerNorm(x))")
    if c.activation in ACTIVATION_PHRASES:
        out.append(ACTIVATION_PHRASES[c.activation])
    if c.final_layer_norm:
        stacks = " and ".join(s for s, has in (("encoder", c.has_encoder), ("decoder", c.has_decoder)) if has)
        out.append(f"a final LayerNorm after the {stacks} stack{'s' if ' and ' in stacks else ''}")
    if c.has_decoder and not c.tie_output:
        out.append("an output layer of its own, not tied to the embeddings")
    if c.has_decoder and c.final_logits_bias:
        out.append("a bias added to the output logits")
    return out
