"""The architecture diagram's blocks: which boxes a model has and which trace steps fall in each."""

from __future__ import annotations

from dataclasses import dataclass

from ..recording.trace import Step, Trace


@dataclass
class Block:
    """One box of the architecture diagram. `key` is what block_key(step) returns for the steps inside it."""

    key: str
    label: str
    column: str  # "encoder" or "decoder"
    kind: str  # embedding, positional, attention, add_norm, ffn, norm, linear, softmax
    layer: int | None = None  # 0-based layer inside its stack, None outside the layers


EMBEDDING_KINDS = {"tokens", "embedding"}


def block_key(step: Step) -> str:
    """The diagram block a step belongs to: its sublayer, with the embeddings and the output split in two."""
    if step.stack in ("src_embed", "tgt_embed"):
        return f"{step.stack}.{'embedding' if step.kind in EMBEDDING_KINDS else 'positional'}"
    if step.stack == "generator":
        return "generator.softmax" if step.kind == "probabilities" else "generator.linear"
    return step.sublayer


def _residual_blocks(config, sublayer: Block, add_norm: str, column: str, layer: int) -> list[Block]:
    """A sublayer with its Add & Norm, in the order the model computes them.

    Post-LN (the paper): sublayer, then "Add & Norm". Pre-LN (config.norm_first): a "LayerNorm" block (the
    `<add_norm>.norm` steps) before the sublayer, then "Add" (the residual sum, with no norm after it). Sandwich
    (config.post_norm): a second norm block (`<add_norm>.post_norm`) between the sublayer and "Add". Post-norm only
    (config.post_norm_only, OLMo 2): the sandwich without its first norm — sublayer, norm, "Add".
    """
    if getattr(config, "post_norm_only", False):  # OLMo 2: the norm after the sublayer alone
        return [sublayer, Block(f"{add_norm}.post_norm", f"{_norm_label(config)} (after)", column, "norm", layer),
                Block(add_norm, "Add", column, "add_norm", layer)]  # fmt: skip
    if config.norm_first and getattr(config, "post_norm", False):  # Gemma 2 and 3: a norm on each side
        return [Block(f"{add_norm}.norm", _norm_label(config), column, "norm", layer), sublayer,
                Block(f"{add_norm}.post_norm", f"{_norm_label(config)} (after)", column, "norm", layer),
                Block(add_norm, "Add", column, "add_norm", layer)]  # fmt: skip
    if config.norm_first:
        return [Block(f"{add_norm}.norm", _norm_label(config), column, "norm", layer), sublayer,
                Block(add_norm, "Add", column, "add_norm", layer)]  # fmt: skip
    return [sublayer, Block(add_norm, "Add & Norm", column, "add_norm", layer)]


def _norm_label(config) -> str:
    """What the model's norm is called: the paper's LayerNorm, or T5's RMSNorm (config.norm)."""
    return "RMSNorm" if getattr(config, "norm", "layernorm") == "rmsnorm" else "LayerNorm"


def _positional_label(config) -> str:
    """T5 adds no positional encoding (positions enter its attention as a relative bias), nor does a rotary model
    (they turn its queries and keys): the box says so."""
    positional = getattr(config, "positional", "")
    if positional == "rotary":
        return "⊕ No positional encoding (RoPE: in attention)"
    return "⊕ No positional encoding" if positional == "none" else "⊕ Positional encoding"


def _parallel_blocks(config, n: str, i: int) -> list[Block]:
    """A parallel layer's blocks (GPT-NeoX, Pythia): each sublayer after its own norm (and before its post-norm in a
    sandwich layer), then one Add for both. A mixture of experts stands in for the feed-forward where it has one."""
    norm = _norm_label(config)
    experts = bool(getattr(config, "n_experts", 0)) and config.has_experts(i)
    ffn = (Block(f"{n}.moe", "Mixture of experts", "decoder", "ffn", i) if experts
           else Block(f"{n}.ffn", "Feed-forward", "decoder", "ffn", i))  # fmt: skip
    blocks = []
    for k, sublayer in ((1, Block(f"{n}.self_attn", "Masked self-attention", "decoder", "attention", i)), (3, ffn)):
        blocks += [Block(f"{n}.add_norm{k}.norm", norm, "decoder", "norm", i), sublayer]
        if getattr(config, "post_norm", False):  # a sandwich layer: its output normalised before the add
            blocks.append(Block(f"{n}.add_norm{k}.post_norm", f"{norm} (after)", "decoder", "norm", i))
    label = f"Add (attention + {'experts' if experts else 'feed-forward'})"
    return blocks + [Block(f"{n}.add_norm3", label, "decoder", "add_norm", i)]


def architecture(config) -> list[Block]:
    """The blocks of a model in reading order, from its config (any layer count; only the stacks it has)."""
    blocks: list[Block] = []
    if config.has_encoder:
        blocks += [
            Block("src_embed.embedding", "Input embedding", "encoder", "embedding"),
            Block("src_embed.positional", _positional_label(config), "encoder", "positional"),
        ]
        for i in range(config.n_encoder_layers):
            n = f"encoder.{i}"
            attn = Block(f"{n}.self_attn", "Multi-head self-attention", "encoder", "attention", i)
            blocks += _residual_blocks(config, attn, f"{n}.add_norm1", "encoder", i)
            ffn = Block(f"{n}.ffn", "Feed-forward", "encoder", "ffn", i)
            blocks += _residual_blocks(config, ffn, f"{n}.add_norm2", "encoder", i)
        if config.final_layer_norm:
            blocks.append(Block("encoder.final_norm", f"Final {_norm_label(config)}", "encoder", "norm"))
    if config.has_decoder:
        blocks += [
            Block("tgt_embed.embedding", "Output embedding", "decoder", "embedding"),
            Block("tgt_embed.positional", _positional_label(config), "decoder", "positional"),
        ]
        for i in range(config.n_decoder_layers):
            n = f"decoder.{i}"
            if config.parallel_residual:  # GPT-NeoX: both sublayers read x, one Add joins them
                blocks += _parallel_blocks(config, n, i)
                continue
            attn = Block(f"{n}.self_attn", "Masked self-attention", "decoder", "attention", i)
            blocks += _residual_blocks(config, attn, f"{n}.add_norm1", "decoder", i)
            if config.has_encoder:  # a decoder-only model (GPT-2) has no cross-attention
                cross = Block(f"{n}.cross_attn", "Cross-attention", "decoder", "attention", i)
                blocks += _residual_blocks(config, cross, f"{n}.add_norm2", "decoder", i)
            # add_norm3 even without cross-attention: the module and its trace steps keep that name
            ffn = Block(f"{n}.ffn", "Feed-forward", "decoder", "ffn", i)
            if getattr(config, "n_experts", 0) and config.has_experts(i):  # Mixtral, Qwen3-MoE: router + experts
                ffn = Block(f"{n}.moe", "Mixture of experts", "decoder", "ffn", i)
            blocks += _residual_blocks(config, ffn, f"{n}.add_norm3", "decoder", i)
        if config.final_layer_norm:
            blocks.append(Block("decoder.final_norm", f"Final {_norm_label(config)}", "decoder", "norm"))
        blocks += [
            Block("generator.linear", "Linear", "decoder", "linear"),
            Block("generator.softmax", "Softmax", "decoder", "softmax"),
        ]
    return blocks


def block_steps(trace: Trace) -> dict[str, list[int]]:
    """Block key → the indices of its steps, in order."""
    out: dict[str, list[int]] = {}
    for s in trace:
        out.setdefault(block_key(s), []).append(s.index)
    return out
