"""A mixture of experts in place of the decoder's feed-forward (Mixtral, Qwen3-MoE; config.n_experts).

The paper's feed-forward is one network that every token goes through. Here there are n_experts of them (the
experts, each a feed-forward of its own, gated as config.ffn_gated says) and a router, a linear map
W_router (d_model → n_experts, no bias), that sends each token to only a few of them:

    p = softmax(x W_router)                      one probability per expert
    E(x) = the experts_per_token (k) experts with the largest p
    w_e = p_e / Σ_{e' ∈ E(x)} p_e'   for e ∈ E(x)   (moe_renormalize; else w_e = p_e)
    MoE(x) = Σ_{e ∈ E(x)} w_e · FFN_e(x)

So each token pays for k experts while the layer holds n_experts of them. Trace steps (under `<layer>.moe`):
router_logits, router_weights (p, the whole distribution) and chosen_weights (w: the chosen experts' weights,
0 for the others — the tokens × experts map of who went where), kind `router`, dims (batch, pos, expert); then
choice_1 … choice_k, the output of each token's first, second, … choice of expert (kind `ffn_out`: which expert
that is differs from token to token, chosen_weights says), and `out`, their weighted sum, the sublayer's output.
One step per choice rather than per expert keeps the trace the same size whatever the number of experts, and
holds no rows of zeros for the tokens an expert did not get.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from .config import TransformerConfig
from .feed_forward import PositionwiseFeedForward, RerunSublayer

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def ordinal(k: int) -> str:
    """1 → 'first', 9 → '9th': how the k-th choice of expert is called."""
    return ORDINALS[k - 1] if k <= len(ORDINALS) else f"{k}th"


def expert_config(config: TransformerConfig) -> TransformerConfig:
    """What each expert is built from: a feed-forward d_expert wide, without dropout (Mixtral and Qwen3-MoE
    drop nothing inside their experts; the residual dropout after the sublayer still applies)."""
    return dataclasses.replace(config, d_ff=config.d_expert or config.d_ff, dropout=0.0, n_experts=0)


class MixtureOfExperts(RerunSublayer):
    """MoE(x) = Σ_{e ∈ top-k(softmax(x W_router))} w_e · FFN_e(x), applied to each position separately."""

    def __init__(self, config: TransformerConfig, pos_dim: str, trace_name: str) -> None:
        super().__init__()
        self.router = nn.Linear(config.d_model, config.n_experts, bias=False)
        inner = expert_config(config)
        self.experts = nn.ModuleList(PositionwiseFeedForward(inner, pos_dim, f"{trace_name}.experts.{e}")
                                     for e in range(config.n_experts))  # fmt: skip
        self.k, self.renormalize = config.experts_per_token, config.moe_renormalize
        self.activation_name, self.gated = config.activation, config.ffn_gated
        self.pos_dim, self.trace_name = pos_dim, trace_name

    def route(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The router's part: {"router_logits", "router_weights", "chosen", "weights"}; chosen (B, T, k) holds each
        token's experts, most probable first, and weights (B, T, k) what each of them counts for."""
        logits = self.router(x)  # (B, T, d_model) → (B, T, E)
        probs = torch.softmax(logits.float(), dim=-1)  # (B, T, E), in float32 whatever the weights' precision
        top, chosen = probs.topk(self.k, dim=-1)  # (B, T, k) each, largest first
        weights = top / top.sum(-1, keepdim=True) if self.renormalize else top  # (B, T, k)
        return {"router_logits": logits, "router_weights": probs, "chosen": chosen, "weights": weights}

    def interior(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every intermediate keyed by step-name suffix: the router's three maps, choice_1 … choice_k and out."""
        routed = self.route(x)
        chosen, weights = routed["chosen"], routed["weights"].to(x.dtype)  # (B, T, k)
        b, t, d = x.shape
        tokens = x.reshape(b * t, d)  # (N, d_model), N = B·T
        picks = chosen.reshape(b * t, self.k)  # (N, k)
        outputs = x.new_zeros(self.k, b * t, d)  # (k, N, d_model): slot j holds each token's j-th expert's output
        for e, expert in enumerate(self.experts):
            token, slot = (picks == e).nonzero(as_tuple=True)  # the tokens routed to expert e, and as which choice
            if len(token):
                outputs[slot, token] = expert.interior(tokens[token])["out"]  # (n_e, d_model)
        outputs = outputs.view(self.k, b, t, d)  # (k, B, T, d_model)
        out = (weights.permute(2, 0, 1)[..., None] * outputs).sum(0)  # Σ_j w_j · FFN_(e_j)(x): (B, T, d_model)
        # the tokens × experts map: w where an expert was chosen, 0 elsewhere
        map_ = torch.zeros_like(routed["router_weights"]).scatter(-1, chosen, routed["weights"])  # (B, T, E)
        parts = {"router_logits": routed["router_logits"], "router_weights": routed["router_weights"],
                 "chosen_weights": map_}  # fmt: skip
        parts.update({f"choice_{j + 1}": outputs[j] for j in range(self.k)})
        parts["out"] = out
        return parts

    def expert_formula(self, e: str = "e") -> str:
        """'(SiLU(x W_1^e) ⊙ x V^e) W_2^e': what one expert computes."""
        act = "max(0, ·)" if self.activation_name == "relu" else self.activation_name.upper()
        if self.gated:
            return f"({act}(x W_1^{e}) ⊙ x V^{e}) W_2^{e}"
        return f"{act}(x W_1^{e}) W_2^{e}"

    def _record(self, tracer, parts: dict[str, torch.Tensor]) -> None:
        n, p, k, n_experts = self.trace_name, self.pos_dim, self.k, len(self.experts)
        routing, vectors = ("batch", p, "expert"), ("batch", p, "d_model")
        tracer.add(f"{n}.router_logits", "router", parts["router_logits"], routing,
                   f"Router logits: a score per expert ({n_experts})", "x W_router", n)
        tracer.add(f"{n}.router_weights", "router", parts["router_weights"], routing,
                   "Router probabilities over the experts", "p = softmax(x W_router)", n)
        scaled = "renormalised to add up to 1" if self.renormalize else "as they are"
        tracer.add(f"{n}.chosen_weights", "router", parts["chosen_weights"], routing,
                   f"Chosen experts: the top {k} of p per token, weighted (0 elsewhere)",
                   f"w = the {k} largest p, {scaled}; 0 for the other experts", n)
        for j in range(1, k + 1):
            tracer.add(f"{n}.choice_{j}", "ffn_out", parts[f"choice_{j}"], vectors,
                       f"Output of each token's {ordinal(j)}-choice expert",
                       f"FFN_e(x) = {self.expert_formula()}, e = the token's {ordinal(j)} choice", n)
        with tracer.stored():
            tracer.add(f"{n}.out", "ffn_out", parts["out"], vectors, f"Mixture of experts: the {k} chosen experts' "
                       "weighted sum", f"MoE(x) = Σ_j w_(e_j) · FFN_(e_j)(x) over the {k} chosen experts", n,
                       major=True)  # fmt: skip
