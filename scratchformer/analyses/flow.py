"""Attention flow (Abnar & Zuidema 2020): the layers' Ã = 0.5·A + 0.5·I (heads averaged, rows renormalised) as
edge capacities of a graph with one node per position per layer; a top position's relevance to an input token is
the maximum flow between the two nodes, and each row is then normalised to sum to 1.

The decoder's graph follows the rollout's reading of an encoder-decoder (scratchformer.analyses.rollout): after
each decoder layer's self-attention, a position passes half its capacity to its own vector and half to the
encoder's top positions, in proportion to its cross-attention weights; the encoder's graph continues below them.
"""

from __future__ import annotations

import torch

from .mixing import residual_attention


def _add_layers(graph, mats: list[torch.Tensor], name: str, below: str | None = None) -> None:
    """Edges (name, l + 1, i) → (name, l, j) with capacity Ã_l[i, j] for every layer l (first layer first).
    With `below`, the layer's output passes through a node (below, l, i) first: used for the decoder, see
    _add_cross."""
    for layer, a in enumerate(mats):
        for i, row in enumerate(a.tolist()):
            for j, cap in enumerate(row):
                if cap > 0:
                    graph.add_edge((below or name, layer + 1, i), (name, layer, j), capacity=cap)


def _normalised(m: torch.Tensor) -> torch.Tensor:
    sums = m.sum(-1, keepdim=True)
    return torch.where(sums > 0, m / sums.clamp_min(1e-300), m)


def _flow_matrix(graph, top: list, bottom: list) -> torch.Tensor:
    import networkx as nx  # only here: importing it costs a tenth of a second

    out = torch.zeros(len(top), len(bottom), dtype=torch.float64)
    for i, u in enumerate(top):
        for j, v in enumerate(bottom):
            if u in graph and v in graph:
                out[i, j] = nx.maximum_flow_value(graph, u, v)
    return out


def flows(enc_w: list[torch.Tensor], dec_w: list[torch.Tensor], cross_w: list[torch.Tensor]):
    """(encoder (S, S), decoder (T, T), cross (T, S)) flows, None where the model lacks a stack.
    Each list holds one (h, Tq, Tk) weight tensor per layer, first layer first."""
    import networkx as nx

    encoder = decoder = cross = None
    enc_mats = [residual_attention(w) for w in enc_w]
    dec_mats = [residual_attention(w) for w in dec_w]
    if enc_mats:
        g = nx.DiGraph()
        _add_layers(g, enc_mats, "e")
        s, top = enc_mats[0].shape[0], len(enc_mats)
        encoder = _normalised(_flow_matrix(g, [("e", top, i) for i in range(s)], [("e", 0, j) for j in range(s)]))
    if dec_mats:
        g = nx.DiGraph()
        _add_layers(g, dec_mats, "d")
        t, top = dec_mats[0].shape[0], len(dec_mats)
        decoder = _normalised(_flow_matrix(g, [("d", top, i) for i in range(t)], [("d", 0, j) for j in range(t)]))
    if enc_mats and cross_w:
        g = nx.DiGraph()
        _add_layers(g, enc_mats, "e")
        _add_layers(g, dec_mats, "d", below="s")  # (s, l + 1, i): decoder position i after layer l's self-attn
        s, top_e = enc_mats[0].shape[0], len(enc_mats)
        for layer, w in enumerate(cross_w):
            cross_a = w.double().mean(0)  # (T, S) heads averaged
            for i, row in enumerate(cross_a.tolist()):
                g.add_edge(("d", layer + 1, i), ("s", layer + 1, i), capacity=0.5)
                for j, cap in enumerate(row):
                    if cap > 0:
                        g.add_edge(("d", layer + 1, i), ("e", top_e, j), capacity=0.5 * cap)
        t, top_d = dec_mats[0].shape[0], len(dec_mats)
        tops = [("d", top_d, i) for i in range(t)]
        cross = _normalised(_flow_matrix(g, tops, [("e", 0, j) for j in range(s)]))  # (T, S)
    return encoder, decoder, cross
