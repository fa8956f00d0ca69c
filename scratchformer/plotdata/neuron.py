"""Two pictures of one attention head, as plot data the window and the exporters share.

The Q·K neuron view (`neuron_pair`, `neuron_heatmaps`): one query position against one key position — the query
vector q_i, the key vector k_j, their elementwise product q_i ⊙ k_j (whose sum is the score q_i·k_j), the score
÷ √d_k (+ T5's bias, + the mask), and where it lands in its row's softmax (paper §3.2.1, eq. 1):

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

The weighted sum (`weighted_sum`, `weighted_sum_heatmaps`): one query's output row of the head as the value
vectors v_j of every key, each scaled by its weight a_ij, summed: head_i = Σ_j a_ij v_j — the "contextual
embedding" picture of the self-attention tutorials.

Everything is read from the trace's steps of that attention sublayer (q, k, v, scores, scaled_scores,
position_bias, mask, masked_scores, weights, context), so the pictures show the run's own numbers; the sums are
redone here in float64 and agree with the trace (tests/scratchformer/test_plotdata_neuron.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..recording.trace import Trace
from .heatmap import DIVERGING, SEQUENTIAL, Heatmap, abbreviate


@dataclass
class AttentionPick:
    """Which head of which attention sublayer, for which batch item and query position."""

    sublayer: str  # 'decoder.0.cross_attn'
    batch: int
    head: int
    query: int


def attention_sublayers(trace: Trace) -> list[str]:
    """The attention sublayers of a run that the two pictures can draw, in the order the model runs them."""
    return [s.sublayer for s in trace.steps if s.kind == "attention_weights" and trace.find(f"{s.sublayer}.q")]


def _item(trace: Trace, name: str, batch: int) -> np.ndarray | None:
    step = trace.find(name)
    if step is None:
        return None
    return step.item(batch).double().numpy()  # (head, …) for the head steps; a lazy trace recomputes this item


def _checked(trace: Trace, pick: AttentionPick, key: int | None = None) -> tuple[str, str]:
    """One sentence for a pick outside the run: the valid sublayers, heads and positions. Returns the query
    and key axes' names ('tgt_pos', 'src_pos')."""
    names = attention_sublayers(trace)
    if pick.sublayer not in names:
        raise UserError(f"{pick.sublayer!r} is not an attention sublayer of this run; it has: {', '.join(names)}.")
    weights = trace[f"{pick.sublayer}.weights"]
    batches, heads, queries, keys = weights.shape
    for what, value, n in (("batch item", pick.batch, batches), ("head", pick.head, heads),
                           ("query position", pick.query, queries), ("key position", key, keys)):  # fmt: skip
        if value is not None and not 0 <= value < n:
            raise UserError(f"The {what} {value} is out of range: {pick.sublayer} has {n} (0 to {n - 1}).")
    return weights.dims[2], weights.dims[3]


def _label(trace: Trace, dim: str, pos: int, batch: int) -> str:
    labels = trace.labels(dim, batch)
    return labels[pos] if labels is not None and pos < len(labels) else f"{dim} {pos}"


def _labels(trace: Trace, dim: str, n: int, batch: int) -> list[str]:
    return [_label(trace, dim, p, batch) for p in range(n)]


# ---- Q·K --------------------------------------------------------------------------------------------------------


@dataclass
class NeuronPair:
    """q_i, k_j and everything between their dot product and the softmax weight a_ij."""

    pick: AttentionPick
    key: int
    q: np.ndarray  # (d_k,)
    k: np.ndarray  # (d_k,)
    score: float  # q·k = Σ_e q[e]·k[e]
    scaled: float  # score / √d_k (score itself when the model does not scale)
    root: float | None  # √d_k, None for a model that does not divide (T5)
    bias: float | None  # T5's relative position bias for (i, j), None without one
    mask: float  # 0 or −∞
    row: np.ndarray  # (keys,) the query's masked scores: what the softmax reads
    weights: np.ndarray  # (keys,) the query's softmax weights a_i·
    query_label: str
    key_labels: list[str]  # one per key position
    kv_head: int | None = None  # the key/value head this query head reads, when heads are shared (GQA)
    rotated: bool = False  # q and k are the rotated ones (RoPE): the score reads those
    capped: float | None = None  # Gemma 2: the scaled score soft-capped, c·tanh(s / c), before the mask

    @property
    def own_root(self) -> bool:
        """Whether the model divides by a number of its own (Gemma's √query_pre_attn_scalar), not √d_k."""
        return self.root is not None and not np.isclose(self.root, np.sqrt(len(self.q)))

    @property
    def product(self) -> np.ndarray:
        """q ⊙ k: (d_k,), the terms whose sum is the score."""
        return self.q * self.k

    @property
    def weight(self) -> float:
        return float(self.weights[self.key])

    @property
    def masked_score(self) -> float:
        return float(self.row[self.key])

    def rank(self) -> int:
        """1 for the key this query attends to most (by score: tiny weights can round to the same number)."""
        return int((self.row > self.row[self.key]).sum()) + 1

    def visible_keys(self) -> int:
        return int(np.isfinite(self.row).sum())


def neuron_pair(trace: Trace, pick: AttentionPick, key: int) -> NeuronPair:
    """The neuron view's numbers for one query and one key of one head (UserError for a pick outside the run)."""
    q_dim, k_dim = _checked(trace, pick, key)
    name, b, h, i, j = pick.sublayer, pick.batch, pick.head, pick.query, key
    q_name, k_name = _scored(trace, name, "q"), _scored(trace, name, "k")
    q_all, k_all = _item(trace, q_name, b), _item(trace, k_name, b)  # (h, Tq, d_k), (h_kv, Tk, d_k)
    g = h // (q_all.shape[0] // k_all.shape[0])  # grouped-query attention: the key head this query head reads
    q, k = q_all[h, i], k_all[g, j]  # (d_k,) each
    score = float(q @ k)
    raw, scaled = _item(trace, f"{name}.scores", b), _item(trace, f"{name}.scaled_scores", b)
    root = float(np.sqrt(len(q)))  # the model divided by √d_k when the trace's scaled scores are its scores / √d_k
    if raw is not None and scaled is not None and not np.allclose(raw[h, i] / root, scaled[h, i], rtol=1e-5):
        big = int(np.argmax(np.abs(raw[h, i])))  # a divisor of the model's own (Gemma's √s), read off the trace
        ratio = float(raw[h, i, big] / scaled[h, i, big]) if scaled[h, i, big] else 0.0
        fits = ratio > 0 and not np.isclose(ratio, 1.0) and np.allclose(raw[h, i] / ratio, scaled[h, i], rtol=1e-5)
        root = ratio if fits else None  # None: the model does not divide (T5)
    capped_step = _item(trace, f"{name}.capped_scores", b) if trace.find(f"{name}.capped_scores") else None
    bias_step = _item(trace, f"{name}.position_bias", b) if trace.find(f"{name}.position_bias") else None
    bias = None
    if bias_step is not None:  # (head, queries, keys), shared by the batch
        bias = float((bias_step[h] if bias_step.ndim == 3 else bias_step[0, h])[i, j])
    mask_item = _item(trace, f"{name}.mask", b)
    mask = float(mask_item[i, j]) if mask_item is not None else 0.0
    row = _item(trace, f"{name}.masked_scores", b)[h, i]  # (keys,)
    weights = _item(trace, f"{name}.weights", b)[h, i]  # (keys,)
    return NeuronPair(pick, j, q, k, score, score / root if root else score, root, bias, mask, row, weights,
                      _label(trace, q_dim, i, b), _labels(trace, k_dim, len(row), b),
                      g if k_all.shape[0] != q_all.shape[0] else None, q_name.endswith("_rotated"),
                      float(capped_step[h, i, j]) if capped_step is not None else None)  # fmt: skip


def _scored(trace: Trace, sublayer: str, which: str) -> str:
    """The q or k step the scores read: rotated (RoPE) or normalised (QK-norm) when the model does either."""
    for suffix in (f"{which}_rotated", f"{which}_normed", which):
        if trace.find(f"{sublayer}.{suffix}") is not None:
            return f"{sublayer}.{suffix}"
    return f"{sublayer}.{which}"


def _symmetric(*arrays: np.ndarray) -> tuple[float, float]:
    m = max((float(np.abs(a[np.isfinite(a)]).max()) for a in arrays if np.isfinite(a).any()), default=0.0)
    m = m or 1.0
    return (-m, m)


def _row_map(values: np.ndarray, labels: list[str], row: str, col_dim: str, levels, cmap, title: str,
             pick: AttentionPick, extra: dict | None = None) -> Heatmap:  # fmt: skip
    values = np.ascontiguousarray(values, dtype=np.float32)
    masked = np.isneginf(values)
    return Heatmap(values, [row], labels, "", col_dim,
                   levels, cmap, title, _where(pick), masked=masked if masked.any() else None,
                   extra=extra or {})  # fmt: skip


def _where(pick: AttentionPick) -> str:
    return f"{pick.sublayer}  ·  head {pick.head + 1}  ·  batch item {pick.batch + 1}"


def neuron_heatmaps(pair: NeuronPair) -> list[Heatmap]:
    """What the neuron view draws and exports: q and k over d_k, q ⊙ k, the row's scores and its weights."""
    p, i, j = pair.pick, pair.pick.query, pair.key
    dims = [str(e) for e in range(len(pair.q))]
    q_row = f"q{i} {abbreviate(pair.query_label, 10)}"
    k_row = f"k{j} {abbreviate(pair.key_labels[j], 10)}"
    qk = Heatmap(np.ascontiguousarray(np.stack([pair.q, pair.k]), dtype=np.float32), [q_row, k_row], dims,
                 "", "d_head", _symmetric(pair.q, pair.k), DIVERGING,
                 "Query and key vectors" + (" (rotated)" if pair.rotated else "")
                 + (f", key head {pair.kv_head + 1}" if pair.kv_head is not None else ""), _where(p),
                 "q_i = RoPE(x_i W^Q),  k_j = RoPE(x_j W^K)" if pair.rotated else "q_i = x_i W^Q,  k_j = x_j W^K")
    prod = pair.product
    product = _row_map(prod[None, :], dims, "q⊙k", "d_head", _symmetric(prod), DIVERGING,
                       f"q{i} ⊙ k{j}: the products, summing to {pair.score:.4g}", p)
    scale = (f" / {pair.root:.4g}" if pair.own_root else f" / √{len(pair.q)}") if pair.root else ""
    scale += ", capped" if pair.capped is not None else ""
    scores = _row_map(pair.row[None, :], pair.key_labels, f"q{i}·k", "key", _symmetric(pair.row), DIVERGING,
                      f"Row {i}'s scores q·k{scale}{' + B' if pair.bias is not None else ''} + M", p,
                      {"selected": j})  # fmt: skip
    weights = _row_map(pair.weights[None, :], pair.key_labels, f"a{i}", "key", (0.0, 1.0), SEQUENTIAL,
                       f"Row {i}'s softmax weights (a{i},{j} = {pair.weight:.3f})", p, {"selected": j})
    return [qk, product, scores, weights]


def neuron_summary(pair: NeuronPair, top: int = 3) -> str:
    """The arithmetic from q and k to the weight, in this run's numbers, one line per stage (plain text)."""
    i, j, d = pair.pick.query, pair.key, len(pair.q)
    prod = pair.product
    order = np.argsort(-np.abs(prod), kind="stable")[:top]
    largest = ", ".join(f"dimension {e}: {prod[e]:+.3f}" for e in order)
    share = float(np.abs(prod[order]).sum() / max(np.abs(prod).sum(), 1e-30))
    lines = [f"q{i}·k{j} = Σ over {d} dimensions of q[e]·k[e] = {pair.score:.4f} (largest terms {largest}; "
             f"they carry {share:.0%} of the products' total size)"]
    if pair.rotated:
        lines.insert(0, f"q{i} and k{j} as rotated by their positions (RoPE): the score depends on {i} − {j}, "
                        "not on where the two stand")
    if pair.kv_head is not None:
        lines.insert(0, f"query head {pair.pick.head + 1} reads key/value head {pair.kv_head + 1} (grouped-query "
                        "attention: it shares those keys with the other heads of its group)")
    if pair.own_root:
        lines.append(f"÷ √s = ÷ {pair.root:.4f} (a divisor the model sets in place of √d_k = √{d}) → "
                     f"{pair.scaled:.4f}")
    elif pair.root:
        lines.append(f"÷ √d_k = ÷ √{d} = ÷ {pair.root:.4f} → {pair.scaled:.4f}")
    else:
        lines.append("this model does not divide by √d_k (T5 folds the factor into its weights)")
    if pair.capped is not None:
        lines.append(f"soft-capped, c·tanh(s / c) → {pair.capped:.4f}")
    if pair.bias is not None:
        lines.append(f"+ relative position bias B = {pair.bias:+.4f}")
    if np.isneginf(pair.mask):
        lines.append("+ mask M = −∞: this key is hidden from this query, so its weight is exactly 0")
    else:
        lines.append(f"+ mask M = 0 → {pair.masked_score:.4f}")
        exps = np.exp(pair.row - pair.row[np.isfinite(pair.row)].max())
        lines.append(f"softmax: exp({pair.masked_score:.4f}) / Σ over the row's {pair.visible_keys()} visible keys "
                     f"= {float(exps[j] / exps.sum()):.4f} — rank {pair.rank()} of {pair.visible_keys()} "
                     f"(the trace holds {pair.weight:.4f})")  # fmt: skip
    return "\n".join(lines)


# ---- the weighted sum -------------------------------------------------------------------------------------------


@dataclass
class WeightedSum:
    """head_i = Σ_j a_ij v_j: the query's weights, every key's value, the scaled values, their sum."""

    pick: AttentionPick
    weights: np.ndarray  # (keys,)
    values: np.ndarray  # (keys, d_v)
    context: np.ndarray  # (d_v,) the trace's own head output for this query
    query_label: str
    key_labels: list[str]

    @property
    def scaled(self) -> np.ndarray:
        """a_ij · v_j: (keys, d_v)."""
        return self.weights[:, None] * self.values

    @property
    def total(self) -> np.ndarray:
        """Σ_j a_ij v_j: (d_v,), recomputed here."""
        return self.scaled.sum(axis=0)

    def order(self) -> np.ndarray:
        """Key positions by weight, largest first."""
        return np.argsort(-self.weights, kind="stable")


def weighted_sum(trace: Trace, pick: AttentionPick) -> WeightedSum:
    q_dim, k_dim = _checked(trace, pick)
    name, b, h, i = pick.sublayer, pick.batch, pick.head, pick.query
    weights = _item(trace, f"{name}.weights", b)[h, i]  # (keys,)
    all_values = _item(trace, f"{name}.v", b)  # (h_kv, keys, d_v)
    values = all_values[h // (trace[f"{name}.weights"].shape[1] // all_values.shape[0])]  # this head's value head
    context = _item(trace, f"{name}.context", b)[h, i]  # (d_v,)
    return WeightedSum(pick, weights, values, context, _label(trace, q_dim, i, b), _labels(trace, k_dim,
                                                                                          len(weights), b))


def weighted_sum_heatmaps(ws: WeightedSum) -> list[Heatmap]:
    """The keys' value vectors, the query's weights, and the scaled values with their sum as the last row."""
    p, i = ws.pick, ws.pick.query
    dims = [str(e) for e in range(ws.values.shape[1])]
    rows = [abbreviate(t, 10) for t in ws.key_labels]
    levels = _symmetric(ws.values)
    values = Heatmap(np.ascontiguousarray(ws.values, dtype=np.float32), rows, dims, "key", "d_head", levels,
                     DIVERGING, "Every key's value vector v_j", _where(p), "v_j = x_j W^V")
    weights = Heatmap(np.ascontiguousarray(ws.weights[:, None], dtype=np.float32), rows, [f"a{i}"], "key", "row",
                      (0.0, 1.0), SEQUENTIAL, f"Row {i}'s weights", _where(p), "a_ij = softmax_j(q_i·k_j / √d_k)")
    stacked = np.vstack([ws.scaled, ws.total[None, :]])  # (keys + 1, d_v): the terms, then their sum
    summed = Heatmap(np.ascontiguousarray(stacked, dtype=np.float32), [f"a·v {r}" for r in rows] + ["Σ = head"],
                     dims, "key", "d_head", _symmetric(ws.scaled, ws.total), DIVERGING,
                     f"a{i},j · v_j, summed into {abbreviate(ws.query_label, 12)}'s output", _where(p),
                     "head_i = Σ_j a_ij v_j")  # fmt: skip
    return [values, weights, summed]


def weighted_sum_summary(ws: WeightedSum, top: int = 3) -> str:
    """head_i written out with the heaviest keys, and the check against the trace."""
    i = ws.pick.query
    order = ws.order()
    shown = [f"{ws.weights[j]:.3f}·v({ws.key_labels[j]})" for j in order[:top]]
    rest = len(order) - len(shown)
    more = f" + {rest} smaller term{'s' * (rest != 1)}" if rest > 0 else ""
    top_share = float(ws.weights[order[:top]].sum())
    diff = float(np.abs(ws.total - ws.context).max())
    return (f"head{i} = {' + '.join(shown)}{more}: the {min(top, len(order))} heaviest keys hold {top_share:.0%} "
            f"of the weight.\nRecomputed Σ_j a_ij v_j differs from the trace's output row by at most {diff:.2g}.")
