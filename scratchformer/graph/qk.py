"""Why attention moved it: one head's score split into what the graph's nodes put into its query and its key.

An edge that crosses positions goes through a head's frozen pattern A_h[i, j] (replacement.py). The pattern is
the softmax of scores, and each score is a dot product of a query and a key that are, in the replacement model,
affine functions of the graph's nodes (every node's value passes through frozen norms and attentions to the
layer's input, then through W_Q or W_K, and a rotary model's rotation at its position, which is linear too):

    q_i = Σ_a u_a Q_a + q_0          k_j = Σ_b u_b K_b + k_0         (Q_a: node a's share of the query)

    s_ij = q_i · k_j / √d_k  (+ a T5 position bias)
         = Σ_a Σ_b (u_a Q_a)·(u_b K_b)/√d_k      query node a × key node b
           + Σ_a (u_a Q_a)·k_0/√d_k              query node a × the key's biases
           + Σ_b q_0·(u_b K_b)/√d_k              the query's biases × key node b
           + q_0·k_0/√d_k (+ bias)               biases alone

— the same split derive makes of one score into d_k products, one level up: products of features instead of
dimensions. q_0 and k_0 are what the biases carry (b_enc, b_dec, attention and feed-forward biases, LayerNorm's β,
W_Q's and W_K's own). The terms sum to the score exactly (up to rounding), which the result checks.

A soft-capped score (Gemma 2) or a QK-norm (Qwen3, OLMo 2, Gemma 3) is not bilinear in the nodes: refused in one
sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from ..errors import UserError
from ..transformer.attention import MultiHeadAttention, expand_kv, score_divisor
from .attribution import Graph
from .replacement import LocalReplacement

_SPEC = re.compile(r"(?P<attention>[\w.]+)\.head(?P<head>\d+)(?:@(?P<query>\d+)(?:,(?P<key>\d+))?)?")


@dataclass
class QKSplit:
    """One head's score at (query, key) split by node pairs. `pairs`: the largest |term| first, each (query node
    id, key node id, term); "bias" names the biases' side. `by_query`/`by_key`: each node's whole share (its row
    or column of the table, the other side's biases included), largest first."""

    attention: str
    head: int
    query: int
    key: int
    score: float  # the score as the model computed it (scaled, before the mask)
    weight: float  # the frozen attention weight A_h[query, key]
    total: float  # the sum of every term
    pairs: list[tuple[str, str, float]]
    by_query: list[tuple[str, float]]
    by_key: list[tuple[str, float]]
    bias_term: float  # q_0·k_0/√d_k plus any position bias
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"attention": self.attention, "head": self.head, "query": self.query, "key": self.key,
                "score": self.score, "weight": self.weight, "total": self.total,
                "pairs": [{"query": a, "key": b, "term": t} for a, b, t in self.pairs],
                "by_query": [{"node": a, "term": t} for a, t in self.by_query],
                "by_key": [{"node": b, "term": t} for b, t in self.by_key],
                "bias": self.bias_term, "notes": self.notes}  # fmt: skip

    def text(self) -> str:
        """The split for a terminal: the score, then the largest products and each side's largest nodes."""
        lines = [f"{self.attention} head {self.head}: the score of query {self.query} against key {self.key} is "
                 f"{self.score:.4f} (weight {self.weight:.3f}); the terms below sum to {self.total:.4f}, the biases "
                 f"alone {self.bias_term:+.4f}.", "Largest products (query node × key node):"]  # fmt: skip
        lines += [f"  {t:+9.4f}  {a} × {b}" for a, b, t in self.pairs]
        lines.append("Largest query-side shares:  " + ", ".join(f"{a} {t:+.3f}" for a, t in self.by_query[:6]))
        lines.append("Largest key-side shares:    " + ", ".join(f"{b} {t:+.3f}" for b, t in self.by_key[:6]))
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def parse_qk(text: str) -> tuple[str, int, int | None, int | None]:
    """'decoder.1.cross_attn.head0@0,1' → (attention, head, query, key); positions may be left out."""
    m = _SPEC.fullmatch(text.strip())
    if m is None:
        raise UserError(f"--qk {text!r}: write ATTENTION.headH[@QUERY[,KEY]], e.g. decoder.1.cross_attn.head0@0,1 "
                        "(heads and positions from 0).")  # fmt: skip
    pos = lambda k: int(m[k]) if m[k] is not None else None  # noqa: E731
    return m["attention"], int(m["head"]), pos("query"), pos("key")


def _attention(rep: LocalReplacement, name: str) -> MultiHeadAttention:
    try:
        mod = rep.model.get_submodule(name)
    except AttributeError:
        mod = None
    if not isinstance(mod, MultiHeadAttention):
        names = [n for n, m in rep.model.named_modules() if isinstance(m, MultiHeadAttention)]
        raise UserError(f"This model has no attention named {name!r}; it has {', '.join(names)}.")
    if mod.softcap or mod.qk_norm != "none":
        why = "soft-caps its scores" if mod.softcap else "normalises its queries and keys (QK-norm)"
        raise UserError(f"{name} {why}, so its scores are not a sum of node-by-node products; the split needs "
                        "plain dot products.")  # fmt: skip
    return mod


def _one_node_rows(rep: LocalReplacement):
    """Leaves of 1 + n rows: row 0 every node at 0 (what the biases carry), row 1 + s node s alone at its value
    (sources in the graph's order: features, errors, embeddings)."""
    real = rep.leaves(1).tensors()
    n = sum(t.shape[1] for t in real)
    leaves = rep.leaves(1 + n, "zero")
    offset = 1
    for mine, values in zip(leaves.tensors(), real):
        k = values.shape[1]
        rows = torch.arange(offset, offset + k, device=rep.device)
        mine[rows, torch.arange(k, device=rep.device)] = values[0]
        offset += k
    return leaves, n


def split_score(rep: LocalReplacement, graph: Graph, attention: str, head: int, query: int | None = None,
                key: int | None = None, top: int | None = 12) -> QKSplit:  # fmt: skip
    """The score of head `head` of `attention` at (query, key) split by node pairs (see the module's text).
    query defaults to the graph's position for a decoder attention (0 for the encoder's), key to the key this
    query attends to most. `top`: how many pairs and nodes to list (None: every one)."""
    mod = _attention(rep, attention)
    if not 0 <= head < mod.n_heads:
        raise UserError(f"{attention} has heads 0 to {mod.n_heads - 1}.")
    pattern = rep.patterns[attention][0, head]  # (Tq, Tk)
    n_q, n_k = pattern.shape
    if query is None:
        query = graph.position if attention.startswith("decoder") and graph.position < n_q else 0
    if not 0 <= query < n_q:
        raise UserError(f"{attention} has query positions 0 to {n_q - 1}, not {query}.")
    if key is None:
        key = int(pattern[query].argmax())
    if not 0 <= key < n_k:
        raise UserError(f"{attention} has key positions 0 to {n_k - 1}, not {key}.")
    leaves, n = _one_node_rows(rep)
    q, k, position_bias = _query_key(rep, mod, leaves, head, query, key)  # (1 + n, d_k) each
    divisor = score_divisor(mod.scale, q.shape[-1]) if mod.scale else 1.0
    q0, k0 = q[0], k[0]  # the biases' shares
    Q, K = q[1:] - q0, k[1:] - k0  # (n, d_k): each node's share
    table = Q @ K.T / divisor  # (n, n): query node a × key node b
    with_k0 = Q @ k0 / divisor  # (n,)
    with_q0 = K @ q0 / divisor  # (n,)
    bias = float(q0 @ k0 / divisor)
    notes = []
    if position_bias is not None:
        bias += position_bias
        notes.append("The score includes the relative position bias, counted with the biases.")
    total = float(table.sum() + with_k0.sum() + with_q0.sum()) + bias
    ids = [node.id for node in graph.nodes[:n]]
    largest = lambda v: v.abs().argsort(descending=True)[:top].tolist()  # noqa: E731 - indices, largest |v| first
    flat = table.flatten()
    pairs = [(ids[i // n], ids[i % n], float(flat[i])) for i in largest(flat)]
    pairs += [(ids[a], "bias", float(with_k0[a])) for a in largest(with_k0)]
    pairs += [("bias", ids[b], float(with_q0[b])) for b in largest(with_q0)]
    pairs = sorted(pairs, key=lambda p: -abs(p[2]))[:top]
    rows, cols = table.sum(1) + with_k0, table.sum(0) + with_q0  # (n,) each: a node's query and key shares
    rank = lambda v: [(ids[i], float(v[i])) for i in largest(v)]  # noqa: E731
    q1, k1, _ = _query_key(rep, mod, rep.leaves(1), head, query, key)  # every node at its value
    score = float(q1[0] @ k1[0]) / divisor + (position_bias or 0.0)
    return QKSplit(attention, head, query, key, score, float(pattern[query, key]), total, pairs, rank(rows),
                   rank(cols), bias, notes)  # fmt: skip


def _query_key(rep: LocalReplacement, mod: MultiHeadAttention, leaves, head: int, query: int, key: int):
    """(q, k, position bias): the query at `query` and the key at `key` of one head, (B, d_k) each, in one
    replacement pass over `leaves` (B rows), as the head computes them (rotated in a rotary model); the position
    bias of that cell (T5), or None."""
    captured: dict = {}
    inner = mod.forward

    def spy(x, memory=None, mask=None, cache=None, is_causal=False, position_bias=None, rope=None):
        captured.update(x=x, memory=memory, rope=rope, bias=position_bias)
        return inner(x, memory, mask, cache, is_causal, position_bias, rope)

    mod.forward = spy  # the replacement's own forward of this attention, watched for its inputs
    try:
        with torch.no_grad():
            rep.forward(leaves)
            parts = mod.project(captured["x"], captured["memory"], None, captured["rope"])
    finally:
        mod.forward = inner
    q = parts["q_heads"][:, head, query]  # (B, d_k)
    k = expand_kv(parts["k_heads"], mod.n_heads)[:, head, key]  # (B, d_k)
    b = captured["bias"]
    if b is None:
        return q, k, None
    b = b[0] if b.dim() == 4 else b  # (h, Tq, Tk)
    return q, k, float(b[head, query, key])
