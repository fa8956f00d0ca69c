"""The position-wise feed-forward network (paper §3.3), and the gated form of T5 v1.1 and Llama-style decoders."""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

from ..recording.intervention_context import patched
from ..recording.trace import active_tracer, add_dropout
from .config import TransformerConfig

# Applied in place to the fresh output of W_1 (nothing else holds it): no second d_ff-wide tensor is allocated.
ACTIVATIONS = {
    "relu": lambda x: F.relu(x, inplace=True),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": lambda x: F.silu(x, inplace=True),
}



class RerunSublayer(nn.Module):
    """A sublayer whose every intermediate a lazy trace may drop and get back by running it again on its kept input.

    Subclasses give `interior(x)` (every intermediate, keyed by step-name suffix, "out" among them), `_record(tracer,
    parts)` (the steps) and `trace_name`. The output is where a patch replaces the sublayer (interventions), never
    its interior; a training-mode trace keeps everything, as dropout would draw new masks on a rerun."""

    trace_name: str

    def interior(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _record(self, tracer, parts: dict[str, torch.Tensor]) -> None:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tracer, n = active_tracer(), self.trace_name
        if tracer is None:
            return patched(f"{n}.out", self.interior(x)["out"])
        parts = self.interior(x)
        parts["out"] = patched(f"{n}.out", parts["out"])  # a patch replaces the output, never the interior
        kept = x.detach().cpu()
        device = next(self.parameters()).device

        def rerun() -> dict[str, torch.Tensor]:
            with torch.inference_mode():
                again = self.interior(kept.to(device))
            return {f"{n}.{k}": v.detach().cpu() for k, v in again.items()}

        with tracer.recompute_from(n, rerun, (kept,)) if not self.training else nullcontext():
            self._record(tracer, parts)
        return parts["out"]


class PositionwiseFeedForward(RerunSublayer):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2  (paper §3.3), applied to each position separately.

    Gated (config.ffn_gated, T5 v1.1's "gated-gelu", Shazeer 2020 "GLU Variants Improve Transformer"):
    FFN(x) = (act(x W_1) ⊙ x V) W_2 — the activated branch W_1 gates a second, linear branch V (`w_v`).
    """

    def __init__(self, config: TransformerConfig, pos_dim: str, trace_name: str) -> None:
        super().__init__()
        bias = config.linear_bias if config.ffn_bias is None else config.ffn_bias
        self.w_1 = nn.Linear(config.d_model, config.d_ff, bias=bias)
        self.w_v = nn.Linear(config.d_model, config.d_ff, bias=bias) if config.ffn_gated else None
        self.w_2 = nn.Linear(config.d_ff, config.d_model, bias=bias)
        self.dropout = nn.Dropout(config.dropout)  # on the hidden layer, as torch.nn.Transformer does
        self.activation = ACTIVATIONS[config.activation]
        self.activation_name = config.activation
        self.pos_dim, self.trace_name = pos_dim, trace_name

    def interior(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"gate", "linear" (gated FFNs only), "hidden", "dropout" (training with p > 0 only), "out"}: every
        intermediate, keyed by step-name suffix."""
        gate = self.activation(self.w_1(x))  # (B, T, d_model) → (B, T, d_ff)
        linear = self.w_v(x) if self.w_v is not None else None  # (B, T, d_ff)
        hidden = gate * linear if linear is not None else gate  # (B, T, d_ff)
        dropped = self.dropout(hidden)  # (B, T, d_ff)
        out = self.w_2(dropped)  # (B, T, d_ff) → (B, T, d_model)
        drops = self.training and self.dropout.p > 0
        parts = {"gate": gate, "linear": linear, "hidden": hidden, "dropout": dropped if drops else None, "out": out}
        return {k: v for k, v in parts.items() if v is not None}

    def _record(self, tracer, parts: dict[str, torch.Tensor]) -> None:
        n, p = self.trace_name, self.pos_dim
        act = "max(0, ·)" if self.activation_name == "relu" else self.activation_name.upper()
        b1, b2 = (" + b_1", " + b_2") if self.w_1.bias is not None else ("", "")
        dims = ("batch", p, "d_ff")
        if "linear" not in parts:
            tracer.add(f"{n}.hidden", "ffn_hidden", parts["hidden"], dims, "Feed-forward hidden layer",
                       f"{act}(x W_1{b1})", n)
            formula = f"FFN(x) = {act}(x W_1{b1}) W_2{b2}"
        else:
            bv = " + b_v" if self.w_v.bias is not None else ""
            tracer.add(f"{n}.gate", "ffn_gate", parts["gate"], dims, f"Gate branch: {act}(x W_1)",
                       f"{act}(x W_1{b1})", n)
            tracer.add(f"{n}.linear", "ffn_gate", parts["linear"], dims, "Linear branch: x V (no activation)",
                       f"x V{bv}", n)
            tracer.add(f"{n}.hidden", "ffn_hidden", parts["hidden"], dims, "Gated hidden layer (gate ⊙ linear)",
                       f"{act}(x W_1{b1}) ⊙ (x V{bv})", n)
            linear = f"(x V{bv})" if bv else "x V"  # the bias is inside the branch: ⊙ binds before +
            formula = f"FFN(x) = ({act}(x W_1{b1}) ⊙ {linear}) W_2{b2}"
        if "dropout" in parts:  # training only: W_2 reads the hidden layer after dropout, so derive needs it
            add_dropout(tracer, self.dropout, n, parts["dropout"], dims)
        with tracer.stored():
            tracer.add(f"{n}.out", "ffn_out", parts["out"], ("batch", p, "d_model"), "Feed-forward output", formula,
                       n, major=True)
