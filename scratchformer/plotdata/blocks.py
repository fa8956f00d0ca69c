"""The architecture diagram's blocks: which boxes a model has and which trace steps fall in each."""

from __future__ import annotations

from dataclasses import dataclass

from ..trace import Step, Trace


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


def architecture(config) -> list[Block]:
    """The blocks of a model in reading order, from its config (any layer count; only the stacks it has)."""
    blocks: list[Block] = []
    if config.has_encoder:
        blocks += [
            Block("src_embed.embedding", "Input embedding", "encoder", "embedding"),
            Block("src_embed.positional", "⊕ Positional encoding", "encoder", "positional"),
        ]
        for i in range(config.n_encoder_layers):
            blocks += [
                Block(f"encoder.{i}.self_attn", "Multi-head self-attention", "encoder", "attention", i),
                Block(f"encoder.{i}.add_norm1", "Add & Norm", "encoder", "add_norm", i),
                Block(f"encoder.{i}.ffn", "Feed-forward", "encoder", "ffn", i),
                Block(f"encoder.{i}.add_norm2", "Add & Norm", "encoder", "add_norm", i),
            ]
        if config.final_layer_norm:
            blocks.append(Block("encoder.final_norm", "Final LayerNorm", "encoder", "norm"))
    if config.has_decoder:
        blocks += [
            Block("tgt_embed.embedding", "Output embedding", "decoder", "embedding"),
            Block("tgt_embed.positional", "⊕ Positional encoding", "decoder", "positional"),
        ]
        for i in range(config.n_decoder_layers):
            blocks += [
                Block(f"decoder.{i}.self_attn", "Masked self-attention", "decoder", "attention", i),
                Block(f"decoder.{i}.add_norm1", "Add & Norm", "decoder", "add_norm", i),
            ]
            if config.has_encoder:
                blocks += [
                    Block(f"decoder.{i}.cross_attn", "Cross-attention", "decoder", "attention", i),
                    Block(f"decoder.{i}.add_norm2", "Add & Norm", "decoder", "add_norm", i),
                ]
            blocks += [  # add_norm3 even without cross-attention: the module and its trace steps keep that name
                Block(f"decoder.{i}.ffn", "Feed-forward", "decoder", "ffn", i),
                Block(f"decoder.{i}.add_norm3", "Add & Norm", "decoder", "add_norm", i),
            ]
        if config.final_layer_norm:
            blocks.append(Block("decoder.final_norm", "Final LayerNorm", "decoder", "norm"))
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
