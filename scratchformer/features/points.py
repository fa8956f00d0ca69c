"""Which named steps a dictionary can read, and the step each feed-forward reads (a transcoder's input).

A dictionary reads a step the forward pass hands on (a patchable step, scratchformer.patching.interventions): the
same point records its activations in training, adds its steps to a trace, and takes a clamped feature's change.
"""

from __future__ import annotations

import difflib
import re

from ..errors import UserError
from ..patching.interventions import patchable_steps

_FFN = re.compile(r"(?P<stack>encoder|decoder)\.(?P<layer>\d+)\.(ffn|moe)\.out")


def readable_steps(model) -> list[str]:
    """Every step a dictionary can read, in the order the forward pass reaches them."""
    return list(patchable_steps(model))


def check_step(model, step: str, option: str = "--at") -> str:
    """`step` itself when a dictionary can read it, else UserError naming the closest ones."""
    names = readable_steps(model)
    if step in names:
        return step
    close = difflib.get_close_matches(step, names, n=4, cutoff=0.5)
    hint = f" The closest are {', '.join(close)}." if close else f" For example {', '.join(names[-3:])}."
    raise UserError(f"{option} {step!r} is not a step a dictionary can read in this model.{hint} "
                    "`scratchformer trace --list-steps` shows every step; a dictionary reads a sublayer's output, an "
                    "attention's q, k, v or context, or the residual stream.")  # fmt: skip


def ffn_steps(model) -> list[str]:
    """Each layer's feed-forward output, encoder layers first: what `--every-layer` trains a transcoder for."""
    names = readable_steps(model)
    return [n for n in names if _FFN.fullmatch(n) and ".experts." not in n]


def ffn_input(model, ffn_out: str) -> str:
    """The step a feed-forward reads, for its output step `ffn_out` ('decoder.1.ffn.out'):
    the Add & Norm before it (post-LN, the paper's), the norm in front of it (pre-LN), or the residual stream
    (OLMo 2's post-norm-only layers)."""
    m = _FFN.fullmatch(ffn_out)
    if m is None:
        raise UserError(f"{ffn_out!r} is not a feed-forward's output (e.g. decoder.0.ffn.out).")
    stack, i = m["stack"], int(m["layer"])
    c = model.config
    layer = (model.encoder if stack == "encoder" else model.decoder)[i]
    wrap = layer.add_norm2 if stack == "encoder" else layer.add_norm3  # the Add & Norm around the feed-forward
    if getattr(layer, "parallel", False) or (c.norm_first and wrap.norm is not None):
        return f"{wrap.trace_name}.norm"
    before = "add_norm1" if stack == "encoder" or getattr(layer, "cross_attn", None) is None else "add_norm2"
    return f"{stack}.{i}.{before}.{'residual' if c.norm_first else 'out'}"


def position_dim(step: str) -> str:
    """'src_pos' for an encoder step (the source's tokens), else 'tgt_pos'."""
    return "src_pos" if step.startswith(("encoder", "src_embed")) else "tgt_pos"
