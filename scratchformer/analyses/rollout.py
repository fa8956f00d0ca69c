"""Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"):
how much each position's final vector draws on each input token once every layer's attention is followed back.

One layer's attention A (heads averaged, queries × keys) mixes positions, and the residual connection carries
each position's own vector past it. Abnar & Zuidema model both as Ã = 0.5·A + 0.5·I, its rows renormalised to
sum to 1. Rollout multiplies these from the first layer up, R = Ã_L ⋯ Ã_2 Ã_1: row i of R says how much of
position i at the top comes from each input token.

Through cross-attention (our extension to encoder-decoders, in the same spirit): a decoder position's vector
after a cross-attention sublayer is half what it was and half the attended encoder output, whose own origin over
the source tokens is the encoder's rollout. Following each decoder layer (self-attention, then
cross-attention) from the embeddings up gives every decoder position a share over the decoder-input tokens and a
share over the source tokens (together 1); `cross` is the source share with its rows renormalised to 1. (How
big the source share is says nothing: with this fixed half-and-half rule it is 1 − 0.5^layers for every
position.)

Flow treats the same Ã of every layer as capacities of a graph (each position at each layer a node) and asks for
the maximum flow from a top position to an input token; rows are normalised to sum to 1. It costs one max-flow
per pair of positions (networkx), so it is refused for long inputs.

    compute(bundle, trace, method="rollout") → Rollout;  `scratchformer rollout --method rollout|flow [--json]`

The attention weights are read from the trace's steps (…self_attn.weights, …cross_attn.weights).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import torch

from ..commands.common import print_result, traced_run
from ..errors import UserError
from ..recording.trace import Trace
from .mixing import residual_attention
from .stream import add_run_args

METHODS = ("rollout", "flow")
FLOW_MAX_POSITIONS = 48  # flow runs one max-flow per pair of positions: beyond this many tokens it takes too long


@dataclass
class Rollout:
    method: str
    encoder: torch.Tensor | None  # (S, S) rows: top encoder positions, columns: source tokens
    decoder: torch.Tensor | None  # (T, T) over decoder self-attention alone
    cross: torch.Tensor | None  # (T, S) each decoder position's relevance over the source tokens, rows sum to 1
    source_tokens: list[str] = field(default_factory=list)
    target_tokens: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        rows = lambda t: None if t is None else [[float(v) for v in row] for row in t.tolist()]  # noqa: E731
        return {"method": self.method, "encoder": rows(self.encoder), "decoder": rows(self.decoder),
                "cross": rows(self.cross), "source_tokens": self.source_tokens,
                "target_tokens": self.target_tokens}  # fmt: skip


def layer_weights(trace: Trace, kind: str, batch: int) -> list[torch.Tensor]:
    """The (h, Tq, Tk) weights of every layer of one attention kind ('encoder.self_attn', 'decoder.self_attn',
    'decoder.cross_attn'), from the first layer up."""
    stack, attn = kind.split(".")
    out, layer = [], 0
    while (step := trace.find(f"{stack}.{layer}.{attn}.weights")) is not None:
        out.append(step.item(batch))
        layer += 1
    return out


def rollout(mats: list[torch.Tensor]) -> torch.Tensor:
    """R = Ã_L ⋯ Ã_1 for the layers' Ã (first layer first)."""
    r = mats[0]
    for a in mats[1:]:
        r = a @ r  # (T, T)
    return r


def decoder_rollout(self_mats: list[torch.Tensor], cross_weights: list[torch.Tensor], enc: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(share over decoder-input tokens (T, T), share over source tokens (T, S)), following each decoder layer's
    Ã_self, then its cross-attention: half the position's own vector, half the attended encoder output."""
    t = self_mats[0].shape[0]
    dd = torch.eye(t, dtype=torch.float64)  # (T, T)
    ds = torch.zeros(t, enc.shape[1], dtype=torch.float64)  # (T, S)
    for a_self, w_cross in zip(self_mats, cross_weights):
        dd, ds = a_self @ dd, a_self @ ds
        cross = w_cross.double().mean(0)  # (T, S) heads averaged
        dd, ds = 0.5 * dd, 0.5 * ds + 0.5 * cross @ enc
    return dd, ds


def compute(bundle, trace: Trace, method: str = "rollout", batch: int = 0) -> Rollout:
    if method not in METHODS:
        raise UserError(f"Unknown method {method!r}; choose rollout or flow.")
    c = bundle.config
    enc_w = layer_weights(trace, "encoder.self_attn", batch) if c.has_encoder else []
    dec_w = layer_weights(trace, "decoder.self_attn", batch) if c.has_decoder else []
    cross_w = layer_weights(trace, "decoder.cross_attn", batch) if c.has_decoder and c.has_encoder else []
    if method == "flow":
        longest = max([w.shape[-1] for w in enc_w + dec_w] or [0])
        if longest > FLOW_MAX_POSITIONS:
            raise UserError(f"Attention flow solves one max-flow problem per pair of positions, too slow for "
                            f"{longest} tokens; use --method rollout, or at most {FLOW_MAX_POSITIONS} tokens.")
        from .flow import flows  # networkx, imported only for flow

        encoder, decoder, cross = flows(enc_w, dec_w, cross_w)
    else:
        enc_mats = [residual_attention(w) for w in enc_w]
        dec_mats = [residual_attention(w) for w in dec_w]
        encoder = rollout(enc_mats) if enc_mats else None
        decoder = rollout(dec_mats) if dec_mats else None
        cross = None
        if cross_w:
            _, ds = decoder_rollout(dec_mats, cross_w, encoder)
            cross = ds / ds.sum(-1, keepdim=True)  # (T, S)
    src = list(trace.source_tokens[batch]) if trace.source_tokens else []
    tgt = list(trace.target_tokens[batch]) if trace.target_tokens else []
    f = lambda t: None if t is None else t.float()  # noqa: E731
    return Rollout(method, f(encoder), f(decoder), f(cross), src, tgt)


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    p = sub.add_parser("rollout", help="attention rollout or flow: each position's relevance over the input tokens",
                       description="Follow every layer's attention back to the input tokens (Abnar & Zuidema "
                       "2020): encoder, decoder and through cross-attention.")  # fmt: skip
    add_run_args(p)
    p.add_argument("--method", choices=METHODS, default="rollout", help="rollout (default) or flow")


def run(args: argparse.Namespace) -> int:
    bundle, _, trace, item = traced_run(args)
    result = compute(bundle, trace, args.method, item)
    return print_result(args.json, result.to_dict(), lambda: text_report(result))


def _table(title: str, m: torch.Tensor, rows: list[str], cols: list[str]) -> list[str]:
    cols = [c[:8] for c in cols]
    out = [title, " " * 14 + " ".join(f"{c:>8}" for c in cols)]
    for label, row in zip(rows, m.tolist()):
        out.append(f"{label[:12]:<12}  " + " ".join(f"{v:8.3f}" for v in row))
    return out


def text_report(r: Rollout) -> str:
    lines = []
    if r.encoder is not None:
        lines += _table(f"encoder ({r.method}): rows = top encoder positions, columns = source tokens", r.encoder,
                        r.source_tokens, r.source_tokens)  # fmt: skip
    if r.decoder is not None:
        lines += _table(f"decoder self-attention ({r.method}): rows = decoder positions, columns = decoder input",
                        r.decoder, r.target_tokens, r.target_tokens)  # fmt: skip
    if r.cross is not None:
        lines += _table(f"through cross-attention ({r.method}): rows = decoder positions, columns = source tokens",
                        r.cross, r.target_tokens, r.source_tokens)  # fmt: skip
    return "\n".join(lines)
