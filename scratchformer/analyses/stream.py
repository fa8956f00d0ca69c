"""The points of a stack's residual stream, found by name among a trace's steps, and what the analyses' command
lines share (the model, the input and its traced run).

The residual stream is the vector each position carries from layer to layer: the embeddings' output, then the
value after each sublayer has added its part. Which step holds it depends on where the model normalises:
post-LN (the paper's) normalises the sum, so the stream after a sublayer is that Add & Norm's LayerNorm output
(`…add_norm1.out`); pre-LN (GPT-2, T5) never normalises the stream, so it is the residual sum itself
(`…add_norm1.residual`). A final norm after the stack (pre-LN models, torch.nn.Transformer) is not a point of
the stream: it belongs to the read-out, like the output layer.
"""

from __future__ import annotations

import argparse
import re

from ..errors import UserError
from ..recording.trace import Trace

_SUBLAYER_OUT = re.compile(r"(?P<stack>encoder|decoder)\.(?P<layer>\d+)\.add_norm(?P<k>\d)\.(?P<part>out|residual)")


def embedding_point(trace: Trace, stack: str) -> str:
    """The step that holds the embeddings' output for this stack: their LayerNorm (BERT, BART) or the sum."""
    embed = "tgt_embed" if stack == "decoder" else "src_embed"
    for name in (f"{embed}.dropout", f"{embed}.layer_norm", f"{embed}.sum"):
        if trace.find(name) is not None:
            return name
    raise UserError(f"This run has no {stack} embeddings to read.")


def residual_points(trace: Trace, stack: str, norm_first: bool) -> list[str]:
    """Step names of every point of the stack's residual stream, in order: after the embeddings, then after
    each sublayer of each layer (self-attention, cross-attention, feed-forward)."""
    part = "residual" if norm_first else "out"
    points = [embedding_point(trace, stack)]
    for step in trace:
        m = _SUBLAYER_OUT.fullmatch(step.name)
        if m and m["stack"] == stack and m["part"] == part:
            points.append(step.name)
    return points


def point_label(name: str) -> str:
    """'decoder.1.add_norm2.out' → 'layer 2 cross-attention'; embeddings → 'embeddings' (for tables and maps)."""
    m = _SUBLAYER_OUT.fullmatch(name)
    if m is None:
        return "embeddings"
    k = int(m["k"])
    if m["stack"] == "encoder":
        what = {1: "self-attention", 2: "feed-forward"}[k]
    else:
        what = {1: "self-attention", 2: "cross-attention", 3: "feed-forward"}[k]
    return f"layer {int(m['layer']) + 1} {what}"


# --- command line -----------------------------------------------------------------------------------------------


def add_run_args(parser: argparse.ArgumentParser) -> None:
    """--model, --device, the input options of `trace`, --item and --json."""
    from ..commands.common import add_input_args, add_model_args

    add_model_args(parser)
    add_input_args(parser)
    parser.add_argument("--item", type=int, default=1, help="with a batch (--text-file --batch): which item, from 1")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
