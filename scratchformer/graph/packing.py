"""Rows that carry only the decoder positions their targets read, for the edges' backward passes.

A target at decoder position p (a feature's pre-activation there, or the logit) reads nothing after p: the
decoder is causal and the replacement freezes its patterns, A[q, k] = 0 for k > q. So the row of a batch that
reads a target's edges needs positions 0 … p only. `deal` hands each layer's targets out to the rows of a
batch so that one backward pass reads one target per row and a row's targets sit at nearby positions (the highest
positions in the last rows); row b then carries its first L_b positions. The replacement's decoder runs on those
positions laid end to end, (1, N, d_model) with N = Σ_b L_b, instead of (B, T, d_model): every position-wise
product (the values' W^V, the output's W^O, the norms, the residual sums) and its backward does N rows of work
instead of B·T, about half for targets spread evenly over the positions. Attention and the feed-forward's
features, which read across positions or by position, unpack to (B, T, …) around their own small products.

The encoder of an encoder-decoder is not packed: a decoder position reads every source position through the
cross-attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..transformer.attention import expand_kv


@dataclass
class Packing:
    """Row b of a batch of B carries decoder positions 0 … lengths[b] − 1; packed, they lie end to end."""

    lengths: list[int]  # (B,)
    length: int  # T: the decoder positions of an unpacked row
    by_row: torch.Tensor  # (N,) where each packed position lies in a (B·T) grid, row-major: row·T + position
    by_position: torch.Tensor  # (N,) and in a (T·B) grid, position-major: position·B + row
    pos: torch.Tensor  # (N,) its position

    @classmethod
    def of(cls, lengths: list[int], length: int, device: torch.device) -> Packing:
        b = len(lengths)
        row = torch.repeat_interleave(torch.arange(b), torch.tensor(lengths, dtype=torch.long))  # (N,)
        pos = torch.cat([torch.arange(n) for n in lengths])  # (N,)
        return cls(list(lengths), length, (row * length + pos).to(device), (pos * b + row).to(device), pos.to(device))

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, …) → (1, N, …): each row's own positions."""
        return x.flatten(0, 1).index_select(0, self.by_row)[None]  # (B·T, …) → (N, …) → (1, N, …)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(1, N, …) → (B, T, …), zeros at the positions a row does not carry."""
        grid = x.new_zeros(len(self.lengths) * self.length, *x.shape[2:])  # (B·T, …)
        return grid.index_copy(0, self.by_row, x[0]).unflatten(0, (len(self.lengths), self.length))

    def attend(self, pattern: torch.Tensor, values: torch.Tensor, packed: bool, d_head: int) -> torch.Tensor:
        """Every head's frozen pattern applied to its values, for packed queries: Σ_k A_h[q, k] V_h[k] →
        (N, h·d_head), the heads concatenated as MultiHeadAttention.combine lays them out.
        pattern (1, h, Tq, Tk); values: packed (1, N, h_kv·d_head) (self-attention) or not (B, Tk, h_kv·d_head)
        (cross-attention, the encoder's), with h_kv dividing h. The heads' products are one batched product over
        (h, Tq, Tk) @ (h, Tk, B·d_head) rather than B·h small ones."""
        _, h, tq, tk = pattern.shape
        b = len(self.lengths)
        if packed:  # (1, N, W) → a (T·B, W) grid → (T, B, h_kv, d_head)
            grid = values.new_zeros(tk * b, values.shape[2]).index_copy(0, self.by_position, values[0])
            grid = grid.view(tk, b, -1, d_head)
        else:  # (B, Tk, W) → (Tk, B, h_kv, d_head)
            grid = values.view(b, tk, -1, d_head).transpose(0, 1)
        h_kv, d = grid.shape[2], d_head
        v = grid.permute(2, 0, 1, 3).reshape(1, h_kv, tk, b * d)  # (1, h_kv, Tk, B·d_head)
        context = pattern[0] @ expand_kv(v, h)[0]  # (h, Tq, Tk) @ (h, Tk, B·d_head) → (h, Tq, B·d_head)
        concat = context.view(h, tq, b, d).permute(1, 2, 0, 3).reshape(tq * b, h * d)  # (Tq·B, h·d_head)
        return concat.index_select(0, self.by_position)  # (N, h·d_head)


@dataclass
class Deal:
    """Targets handed out to the rows of one batch: `rows` rows, each carrying `lengths[b]` decoder positions, and
    per backward pass the (row, target index) pairs it reads (target indices count into the targets given)."""

    rows: int
    lengths: list[int]
    passes: list[list[tuple[int, int]]]


def deal(groups: list[int], positions: list[int], batch: int, length: int) -> Deal:
    """Hand targets out to rows. `groups[i]`: target i's group (targets of one group share their backward passes:
    the feature layers they are in); `positions[i]`: the decoder position it reads up to, −1 for one that reads the
    encoder only. A group of n targets takes c = ⌈n / batch⌉ passes and ⌈n / c⌉ rows; sorted by position, its
    targets go from the highest down to rows B − 1, B − 1, … (c per row), one to each pass, so a row's targets
    are close in position and the rows' lengths rise with b. A row carries the highest position any of its targets
    reads (no row carries more than `length`)."""
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    if not members:
        return Deal(0, [], [])
    counts = {g: -(-len(m) // batch) for g, m in members.items()}  # passes per group
    rows = max(-(-len(m) // counts[g]) for g, m in members.items())
    lengths = [0] * rows
    passes: list[list[tuple[int, int]]] = []
    for g, m in members.items():
        c = counts[g]
        mine: list[list[tuple[int, int]]] = [[] for _ in range(c)]
        for r, i in enumerate(sorted(m, key=lambda i: positions[i], reverse=True)):  # r = 0: the highest position
            b = rows - 1 - r // c
            mine[r % c].append((b, i))
            lengths[b] = max(lengths[b], min(positions[i] + 1, length))
        passes += mine
    return Deal(rows, lengths, passes)


def target_groups(parts: list[int], batch: int) -> list[int]:
    """Groups of targets by their part (a feed-forward step, in order; the logit the last): consecutive parts join one
    group until it holds `batch` targets, and a last group smaller than that joins the one before (the logit with
    the last layer's features), so no pass is spent on a handful of targets."""
    sizes: dict[int, int] = {}
    for p in parts:
        sizes[p] = sizes.get(p, 0) + 1
    group_of, group, held = {}, 0, 0
    order = sorted(sizes)
    for p in order:
        group_of[p] = group
        held += sizes[p]
        if held >= batch:
            group, held = group + 1, 0
    if 0 < held < batch and group > 0:  # the last, small group joins the one before
        for p in order:
            if group_of[p] == group:
                group_of[p] = group - 1
    return [group_of[p] for p in parts]
