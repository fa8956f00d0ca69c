"""Influence on the explained logit, pruning, and the graph's two scores, as Ameisen et al. (2025) define them and
circuit-tracer computes them (its graph.py), written here from the definitions:

    Â = |A| / Σ_s |A[t, s]|                 each target's incoming weights as shares of their absolute sum
    influence = w (Â + Â² + Â³ + …)         = w ((I − Â)^{-1} − I): w is 1 at the logit, 0 elsewhere; the series
                                              ends, as the graph has no cycles (Â is nilpotent)

A node's influence is the share of the logit's (absolute) inputs that flows through it, over every path.

Pruning keeps the nodes whose influences, largest first, make up `node_threshold` (0.8) of the total, plus every
embedding and the logit; then, on the graph of kept nodes, scores each edge by Â[t, s]·(influence_t + w_t) and
keeps the edges that make up `edge_threshold` (0.98) of that; then drops, until nothing changes, feature and
error nodes left without an outgoing edge and features left without an incoming one.

    replacement score  = Σ influence(embeddings) / Σ influence(embeddings and errors)
                         how much of the end-to-end influence of the input on the logit runs through features
                         rather than errors (1: none through errors)
    completeness score = Σ_t (1 − Σ_{s error} Â[t, s]) (influence_t + w_t) / Σ_t (influence_t + w_t)
                         each node's share of non-error inputs, weighted by how much it matters (partial credit)

`total_effects` gives what the graph says removing a node does to the logit in the linear regime (features
following their pre-activations): its direct effect plus every path through other features,
Σ_paths Π (edge / value of the node it enters through) — the row of (I − M)^{-1}, M[t, s] = A[t, s] / u_s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attribution import Graph

NODE_THRESHOLD = 0.8  # the default share of the influence on the logit the kept nodes carry
EDGE_THRESHOLD = 0.98  # and the kept edges


def normalise(adjacency: torch.Tensor) -> torch.Tensor:
    """Â: each row of |A| divided by its sum (rows without inputs stay 0): (n, n) → (n, n)."""
    a = adjacency.abs()
    return a / a.sum(dim=1, keepdim=True).clamp_min(1e-10)


def influence(normalised: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """w Â + w Â² + …: (n,). Each term is the last one times Â; on a graph without cycles it reaches exactly 0
    after at most as many terms as the longest path has edges."""
    term = weights @ normalised  # (n,)
    total = term.clone()
    for _ in range(normalised.shape[0]):
        if not bool(term.any()):
            return total
        term = term @ normalised
        total += term
    raise ValueError("the graph's influence did not settle: its adjacency has a cycle")


def logit_weights(graph: Graph) -> torch.Tensor:
    """w: 1 at the logit, 0 elsewhere (n,)."""
    w = torch.zeros(len(graph.nodes), dtype=graph.adjacency.dtype)
    w[graph.logit_index] = 1.0
    return w


def node_influence(graph: Graph) -> torch.Tensor:
    """Every node's influence on the logit, the logit's own weight (1) included: (n,)."""
    return influence(normalise(graph.adjacency), logit_weights(graph)) + logit_weights(graph)


def base(graph: Graph) -> tuple[torch.Tensor, torch.Tensor]:
    """(Â (n, n), influence (n,), the logit's own weight left out) of the full graph: what prune and scores read,
    made once when both are wanted."""
    norm = normalise(graph.adjacency)
    return norm, influence(norm, logit_weights(graph))


def cutoff(scores: torch.Tensor, fraction: float) -> float:
    """The smallest score among the largest ones that together make up `fraction` of the total (all of them at
    fraction 1); +∞ when every score is 0."""
    flat = scores.flatten()
    ordered = flat[flat > 0].sort(descending=True).values  # the zeros add nothing: only the others are sorted
    total = ordered.sum()
    if not bool(total > 0):
        return float("inf")
    share = ordered.cumsum(0) / total
    index = int(torch.searchsorted(share, torch.tensor(fraction, dtype=share.dtype)))
    if index >= len(ordered):  # rounding kept the sum short of the fraction: every score, zeros included
        return 0.0 if len(ordered) < len(flat) else float(ordered[-1])
    return float(ordered[index])


@dataclass
class Pruned:
    nodes: torch.Tensor  # (n,) bool: kept
    edges: torch.Tensor  # (n, n) bool: kept (non-zero edges between kept nodes)
    influence: torch.Tensor  # (n,) every node's influence (full graph), the logit's own weight included
    kept_influence: float  # the kept nodes' share of the total influence (the logit's own weight left out)


def prune(graph: Graph, node_threshold: float = NODE_THRESHOLD, edge_threshold: float = EDGE_THRESHOLD,
          made: tuple[torch.Tensor, torch.Tensor] | None = None) -> Pruned:  # fmt: skip
    """The pruned graph (see the module's text); `made`: base(graph), when the caller has it."""
    n, w = len(graph.nodes), logit_weights(graph)
    a = graph.adjacency
    inf = (made or base(graph))[1]  # (n,)
    always = torch.zeros(n, dtype=torch.bool)
    always[graph.n_features + graph.n_errors :] = True  # embeddings and the logit
    keep = (inf >= cutoff(inf, node_threshold)) | always
    inner = a * keep[:, None] * keep[None, :]  # (n, n): the edges among kept nodes
    norm_inner = normalise(inner)
    edge_score = norm_inner * (influence(norm_inner, w) + w)[:, None]  # (n, n)
    edges = (edge_score >= cutoff(edge_score, edge_threshold)) & (inner != 0)
    f, fe = graph.n_features, graph.n_features + graph.n_errors
    while True:  # features and errors need a way out, features a way in
        before = keep.clone()
        keep[:fe] &= edges[:, :fe].any(0)
        keep[:f] &= edges[:f].any(1)
        edges &= keep[:, None] & keep[None, :]
        if torch.equal(before, keep):
            break
    total = float(inf.sum())
    kept = float(inf[keep].sum()) / total if total > 0 else 1.0
    return Pruned(keep, edges, inf + w, kept)


def scores(graph: Graph, made: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[float, float]:
    """(replacement score, completeness score) of the full graph (see the module's text); `made`: base(graph)."""
    w = logit_weights(graph)
    norm, inf = made or base(graph)
    f, e, m = graph.n_features, graph.n_errors, graph.n_embeddings
    through_errors = float(inf[f : f + e].sum())
    from_inputs = float(inf[f + e : f + e + m].sum())
    replacement = from_inputs / (from_inputs + through_errors) if from_inputs + through_errors > 0 else 1.0
    non_error = 1.0 - norm[:, f : f + e].sum(dim=1)  # (n,)
    weight = inf + w
    completeness = float((non_error * weight).sum() / weight.sum())
    return replacement, completeness


def total_effects(graph: Graph) -> torch.Tensor:
    """(n,) what removing each node changes the logit by, in the graph's linear regime: the direct effect (the
    edge into the logit) plus every path through other features. The logit's own entry is the logit itself."""
    u = graph.values.clone()
    u[graph.logit_index] = 1.0
    m = graph.adjacency / u[None, :]  # (n, n): J, the effect per unit of each source
    eye = torch.eye(len(graph.nodes), dtype=m.dtype)
    e = torch.zeros(len(graph.nodes), dtype=m.dtype)
    e[graph.logit_index] = 1.0
    row = torch.linalg.solve((eye - m).T, e)  # the logit's row of (I − M)^{-1}
    return row * graph.values
