"""How a model departs from the 2017 paper, in short phrases for people (the window and `scratchformer trace`).

The paper's model ("Attention Is All You Need", §3): an encoder and a decoder, post-LN residual connections
LayerNorm(x + Sublayer(x)), a ReLU feed-forward network, the interleaved sinusoidal positional encoding added to
embeddings scaled by √d_model, attention scores divided by √d_k with d_k = d_model / h, biases in every linear
layer of the sublayers, and an output layer tied to the embeddings with no bias. Every TransformerConfig
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
    elif not c.has_decoder and c.mlm_head:
        out.append("encoder-only: no decoder; a masked-language-model head (dense → activation → LayerNorm → "
                   "vocabulary) reads the encoder output")  # fmt: skip
    elif not c.has_decoder:
        out.append("encoder-only: no decoder and no output layer")
    if c.positional == "learned":
        offset = f", counted from {c.position_offset}" if c.position_offset else ""
        out.append(f"learned position embeddings instead of sinusoids{offset}")
    elif c.positional == "sinusoidal_halves":
        out.append("sinusoids laid out as all sines, then all cosines (not interleaved)")
    elif c.positional == "rotary":
        share = f", on {c.d_rotary} of each head's {c.d_head} dimensions" if c.d_rotary < c.d_head else ""
        scaled = {"linear": f", positions slowed {c.rope_factor:g}× (linear scaling)",
                  "llama3": f", low frequencies slowed up to {c.rope_factor:g}× (Llama 3 scaling)"}.get(
                      c.rope_scaling, "")  # fmt: skip
        local = f" (θ = {c.rope_local_theta:g} in the sliding-window layers)" if c.rope_local_theta is not None else ""
        out.append(f"rotary positions (RoPE), base θ = {c.rope_theta:g}{local}{share}{scaled}: queries and keys "
                   "turned by position inside each attention, nothing added to the embeddings")  # fmt: skip
    elif c.positional == "none":
        out.append("no positional encoding")
    if not c.scale_embedding:
        out.append("embeddings not scaled by √d_model")
    elif c.round_embed_scale:
        out.append("√d_model rounded to the weights' precision before it scales the embeddings")
    if c.type_vocab_size:
        out.append("token-type (segment) embeddings added to the input")
    if c.embed_layer_norm:
        out.append("LayerNorm on the embeddings")
    norm = "RMSNorm" if c.norm == "rmsnorm" else "LayerNorm"
    if c.norm_first and c.post_norm and c.post_norm_only:
        article = "an" if norm == "RMSNorm" else "a"
        out.append(f"post-norm only: {article} {norm} after each sublayer and none before it, "
                   f"x + {norm}(Sublayer(x)) (the residual sum itself is not normalised, unlike the paper's post-LN)")
    elif c.norm_first and c.post_norm:
        out.append(f"sandwich norms: a {norm} before and another after each sublayer, "
                   f"x + {norm}(Sublayer({norm}(x)))")
    elif c.norm_first:
        out.append(f"pre-LN: {norm} before each sublayer, x + Sublayer({norm}(x))")
    if c.norm == "rmsnorm" and c.rmsnorm_plus_one:
        out.append("RMSNorm instead of LayerNorm, scaling by (1 + γ): (1 + γ)·x/√(mean(x²) + ε), no mean "
                   "subtracted and no β")  # fmt: skip
    elif c.norm == "rmsnorm":
        out.append("RMSNorm instead of LayerNorm: γ·x/√(mean(x²) + ε), no mean subtracted and no β")
    if c.relative_buckets:
        out.append(f"relative position bias added to the attention scores ({c.relative_buckets} buckets of the "
                   f"distance key − query, up to {c.relative_max_distance}), computed in the first layer of each "
                   "stack and shared by the others")  # fmt: skip
    if not c.scale_attention:
        out.append("no 1/√d_k scaling of the attention scores (T5 folds it into the initialisation)")
    elif c.attn_scale_dim is not None:
        out.append(f"attention scores divided by √{c.attn_scale_dim:g} (query_pre_attn_scalar) instead of "
                   f"√d_k = √{c.d_head}")  # fmt: skip
    if c.attn_softcap:
        out.append(f"attention scores soft-capped before the mask: {c.attn_softcap:g}·tanh(s / {c.attn_softcap:g})")
    if c.d_attn != c.d_model:
        out.append(f"heads of d_k = {c.d_head}: h·d_k = {c.d_attn} ≠ d_model = {c.d_model}")
    if c.parallel_residual:
        out.append("attention and feed-forward side by side: x + Attention(LN₁(x)) + FFN(LN₂(x)), each reading the "
                   "layer's input through its own norm")
    if c.kv_heads != c.n_heads:
        what = "multi-query attention: one key/value head" if c.kv_heads == 1 else (
            f"grouped-query attention: {c.kv_heads} key/value heads")
        out.append(f"{what} shared by {c.n_heads} query heads ({c.n_heads // c.kv_heads} each)")
    if c.qk_norm != "none":
        over = "each head's" if c.qk_norm == "head" else "all heads'"
        out.append(f"QK-norm: RMSNorm of {over} queries and keys before the scores")
    if c.sliding_window:
        layers = "every layer" if c.sliding_layers is None else (
            f"layers {', '.join(str(i + 1) for i in c.sliding_layers)}")
        out.append(f"sliding-window attention in {layers}: each position sees the last {c.sliding_window} "
                   "positions only")
    qkv_bias = c.linear_bias if c.qkv_bias is None else c.qkv_bias
    ffn_bias = c.linear_bias if c.ffn_bias is None else c.ffn_bias
    if not (c.linear_bias or qkv_bias or ffn_bias):
        out.append("no biases in the attention and feed-forward linear layers")
    elif not (c.linear_bias and qkv_bias and ffn_bias):
        have = [w for w, b in (("W^Q, W^K, W^V", qkv_bias), ("W^O", c.linear_bias), ("the feed-forward", ffn_bias))
                if b]  # fmt: skip
        out.append(f"biases only in {' and '.join(have)}")
    if c.ffn_gated:
        act = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU", "silu": "SiLU"}[c.activation]
        v11 = " (gated GELU, as in T5 v1.1 and Flan-T5)" if act == "GELU" else ""
        out.append(f"gated feed-forward: ({act}(x W_1) ⊙ x V) W_2, a third matrix V{v11}")
    if c.n_experts:
        numbers = [str(i + 1) for i in c.moe_layers or []]
        listed = numbers[0] if len(numbers) == 1 else f"{', '.join(numbers[:-1])} and {numbers[-1]}" if numbers else ""
        where = "" if c.moe_layers is None else (
            f" in layer{'s' if len(numbers) != 1 else ''} {listed} (the others keep one feed-forward)")
        weights = "renormalised over the chosen" if c.moe_renormalize else "not renormalised"
        out.append(f"mixture of experts{where}: a router (d_model → {c.n_experts}, softmax) sends each token to "
                   f"{c.experts_per_token} of {c.n_experts} expert feed-forwards ({c.d_expert or c.d_ff} wide), "
                   f"whose outputs are added weighted by the router's probabilities ({weights})")  # fmt: skip
    if c.activation in ACTIVATION_PHRASES:
        out.append(ACTIVATION_PHRASES[c.activation])
    if c.final_layer_norm:
        stacks = " and ".join(s for s, has in (("encoder", c.has_encoder), ("decoder", c.has_decoder)) if has)
        out.append(f"a final {norm} after the {stacks} stack{'s' if ' and ' in stacks else ''}")
    if c.has_decoder and not c.tie_output:
        out.append("an output layer of its own, not tied to the embeddings")
    if c.has_decoder and c.scale_decoder_output:
        out.append("the decoder output scaled by d_model^-0.5 before the output layer")
    if c.has_decoder and c.final_logits_bias:
        out.append("a bias added to the output logits")
    if c.has_decoder and c.final_softcap:
        out.append(f"the output logits soft-capped: {c.final_softcap:g}·tanh(logits / {c.final_softcap:g})")
    return out
