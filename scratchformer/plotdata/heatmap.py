"""Plot data: pure functions from trace steps to what a heatmap shows (numpy + labels + levels).

The window (app/) and every exporter draw from these objects and nothing else, so what is exported is exactly
what is shown: same numbers, colour map, levels, labels and title.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .trace import Step, Trace, breadcrumb

VocabLabels = Callable[[Sequence[int]], list[str]]

# Colour maps by meaning: probabilities are sequential from 0; signed activations are diverging around 0.
SEQUENTIAL, DIVERGING, MASK = "viridis", "RdBu_r", "mask"
PROBABILITY_KINDS = {"attention_weights", "probabilities"}
VOCAB_COLUMNS = 24  # a vocab axis shows the union of the top tokens per row, not 50 257 columns


@dataclass
class Heatmap:
    """A 2-D grid of numbers ready to draw: values[row, col], with −∞ cells flagged in `masked`."""

    values: np.ndarray  # (rows, cols) float32, C-contiguous; masked cells hold −inf
    row_labels: list[str] | None
    col_labels: list[str] | None
    row_dim: str
    col_dim: str
    levels: tuple[float, float]  # the colour bar's range, explicit (never sampled)
    colormap: str  # SEQUENTIAL, DIVERGING or MASK
    title: str
    subtitle: str = ""  # shape and position in the model, for exports and tooltips
    formula: str = ""
    masked: np.ndarray | None = None  # (rows, cols) bool, True where the value is −∞
    extra: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape  # type: ignore[return-value]

    def cell_text(self, row: int, col: int) -> str:
        """'row token → col token: value' for the hover read-out."""
        rl, cl = self.row_labels, self.col_labels
        r = rl[row] if rl and row < len(rl) else f"{self.row_dim} {row}"
        c = cl[col] if cl and col < len(cl) else f"{self.col_dim} {col}"
        return f"{r!s} · {c!s} = {format_value(float(self.values[row, col]))}"


def format_value(v: float) -> str:
    if v == float("-inf"):
        return "−∞"
    if v != v:
        return "NaN"
    return f"{v:.4g}"


def abbreviate(label: str, max_chars: int = 8) -> str:
    """Short axis label; the full token shows on hover. Spaces at the ends become '␣' so they are visible."""
    shown = label.replace("\n", "⏎")
    if shown.startswith(" "):
        shown = "␣" + shown[1:]
    if len(shown) > max_chars:
        shown = shown[: max_chars - 1] + "…"
    return shown


def levels_for(values: np.ndarray, kind: str) -> tuple[tuple[float, float], str]:
    """Explicit colour levels and colour map: [0, 1] for probabilities, symmetric for signed data."""
    finite = values[np.isfinite(values)]
    if kind == "attention_weights" or finite.size == 0:
        return (0.0, 1.0), SEQUENTIAL
    if kind == "probabilities":  # over a whole vocabulary the top probability can be tiny: scale to it
        return (0.0, max(float(finite.max()), 1e-6)), SEQUENTIAL
    lo, hi = float(finite.min()), float(finite.max())
    if kind in ("tokens",):
        return (lo, max(hi, lo + 1)), SEQUENTIAL
    if lo < 0 < hi:
        m = max(-lo, hi)
        return (-m, m), DIVERGING
    if lo == hi:
        hi = lo + 1.0
    return (lo, hi), SEQUENTIAL


def matrix_of(step: Step, batch: int = 0, head: int = 0) -> tuple[np.ndarray, str, str]:
    """The 2-D slice of a step's tensor that the heatmap shows, and the names of its two axes."""
    t = step.tensor
    dims = list(step.dims)
    index: list[int | slice] = []
    for d, n in zip(dims, t.shape):
        if d == "batch":
            index.append(min(batch, n - 1))
        elif d == "head":
            index.append(min(head, n - 1))
        else:
            index.append(slice(None))
    kept = [d for d in dims if d not in ("batch", "head")]
    m = t[tuple(index)]
    if m.dim() == 1:
        m = m[None, :]
        kept = ["row"] + kept
    if m.dim() > 2:  # not expected from the trace, but never crash: flatten the leading axes
        m = m.reshape(-1, m.shape[-1])
        kept = ["rows", kept[-1]]
    arr = m.to(torch.float32).numpy()
    return np.ascontiguousarray(arr), kept[0], kept[1]


def axis_labels(trace: Trace, dim: str, n: int, batch: int) -> list[str] | None:
    labels = trace.labels(dim, batch)
    if labels is None:
        return None
    return list(labels[:n]) + [f"{dim} {i}" for i in range(len(labels), n)]


def step_heatmap(
    trace: Trace,
    step: Step | str | int,
    batch: int = 0,
    head: int = 0,
    vocab_labels: VocabLabels | None = None,
) -> Heatmap:
    """The heatmap of one trace step for one batch item and head."""
    step = step if isinstance(step, Step) else trace[step]
    values, row_dim, col_dim = matrix_of(step, batch, head)
    col_labels = axis_labels(trace, col_dim, values.shape[1], batch)
    extra: dict = {}
    if col_dim == "vocab":
        values, cols = top_columns(values, VOCAB_COLUMNS)
        col_labels = vocab_labels(cols.tolist()) if vocab_labels else [f"#{i}" for i in cols]
        extra["vocab_ids"] = cols
    masked = np.isneginf(values)
    levels, cmap = levels_for(values, step.kind)
    if step.kind == "mask":
        levels, cmap = (0.0, 1.0), MASK
    title = " › ".join(breadcrumb(step.sublayer) + [step.title])
    heads = f", head {head + 1}" if "head" in step.dims else ""
    subtitle = f"{step.name}  ·  {step.shape_text()}  ·  batch item {batch + 1}{heads}"
    return Heatmap(
        values=values,
        row_labels=axis_labels(trace, row_dim, values.shape[0], batch),
        col_labels=col_labels,
        row_dim=row_dim,
        col_dim=col_dim,
        levels=levels,
        colormap=cmap,
        title=title,
        subtitle=subtitle,
        formula=step.formula,
        masked=masked if masked.any() else None,
        extra=extra,
    )


def top_columns(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """At most k columns: those in some row's top k (by value), best ranks first (rank 1 of every row, …)."""
    k = min(k, values.shape[1])
    if k < values.shape[1]:  # partial selection first: a full argsort of 512 × 50 257 takes seconds
        part = np.argpartition(-values, k - 1, axis=1)[:, :k]  # (rows, k), unordered
        order_in_part = np.argsort(-np.take_along_axis(values, part, axis=1), axis=1, kind="stable")
        top = np.take_along_axis(part, order_in_part, axis=1)  # (rows, k)
    else:
        top = np.argsort(-values, axis=1)[:, :k]  # (rows, k)
    order: list[int] = []
    for rank in range(k):
        for col in top[:, rank]:
            if int(col) not in order:
                order.append(int(col))
    cols = np.array(order[:k], dtype=np.int64)
    return np.ascontiguousarray(values[:, cols]), cols


def head_count(step: Step) -> int:
    return step.tensor.shape[step.dims.index("head")] if "head" in step.dims else 1


def heads_grid(trace: Trace, step: Step | str | int, batch: int = 0) -> list[Heatmap]:
    """One heatmap per head of a step with a head axis (all share the same levels for fair comparison)."""
    step = step if isinstance(step, Step) else trace[step]
    maps = [step_heatmap(trace, step, batch, h) for h in range(head_count(step))]
    if step.kind not in PROBABILITY_KINDS and maps:
        stacked = np.stack([m.values for m in maps])
        levels, _ = levels_for(stacked, step.kind)
        for m in maps:
            m.levels = levels
    for h, m in enumerate(maps):
        m.title = f"Head {h + 1}"
    return maps


# --- display reduction: more cells than screen pixels ------------------------------------------------------
# A 512 × 2048 feed-forward map in a 570-pixel-wide plot has ~3.6 cells per pixel; drawing it whole costs colour
# mapping and scaling of 1 M cells per step, and the scaler then drops cells arbitrarily. Instead the screen gets
# one value per block of cells, chosen so that no stand-out cell can vanish: the block's maximum for sequential
# maps (a single bright attention weight stays bright), the value farthest from 0 for diverging maps (a strongly
# negative activation stays dark blue; a plain maximum would hide it). A mean would dilute exactly the cells one
# looks for. The hover read-out and the exporters keep reading Heatmap.values at full resolution.

MAX, EXTREME = "max", "extreme"


def display_reduction(colormap: str) -> str:
    """How blocks of cells are reduced for a colour map: EXTREME for diverging maps, MAX otherwise."""
    return EXTREME if colormap == DIVERGING else MAX


def display_blocks(shape: tuple[int, int], pixels: tuple[float, float]) -> tuple[int, int]:
    """Rows and columns of cells per displayed value so that a (rows, cols) grid needs at most `pixels`
    (height, width) values: ceil(cells / pixels), at least 1. Rounding up never leaves fewer pixels than values."""
    rows, cols = shape
    height, width = (max(float(p), 1.0) for p in pixels)
    return max(1, int(np.ceil(rows / height - 1e-9))), max(1, int(np.ceil(cols / width - 1e-9)))


def block_reduce(values: np.ndarray, block: tuple[int, int], mode: str = MAX) -> np.ndarray:
    """(rows, cols) → (ceil(rows / br), ceil(cols / bc)) float32, one value per block of br × bc cells (the last
    blocks may be partial). MAX: the largest value, ignoring NaN. EXTREME: the finite value farthest from 0 (its
    sign kept). Either way a block is −∞ only when it holds no finite value and some −∞ (masked) cell, and NaN
    only when every cell is NaN."""
    br, bc = block
    v = np.asarray(values, dtype=np.float32)
    if br <= 1 and bc <= 1:
        return np.ascontiguousarray(v)
    rows, cols = v.shape
    pr, pc = (-rows) % br, (-cols) % bc
    if pr or pc:
        v = np.pad(v, ((0, pr), (0, pc)), constant_values=np.nan)
    if mode == MAX:
        return _reduce_strided(v, br, bc, np.fmax)  # fmax skips NaN; −∞ loses to any finite value
    if mode != EXTREME:
        raise ValueError(f"unknown block reduction {mode!r}")
    neg_inf = np.isneginf(v)
    any_masked = _reduce_strided(neg_inf, br, bc, np.logical_or) if neg_inf.any() else None
    finite = np.where(neg_inf, np.float32(np.nan), v) if any_masked is not None else v
    hi = _reduce_strided(finite, br, bc, np.fmax)  # (R, C)
    lo = _reduce_strided(finite, br, bc, np.fmin)
    out = np.where(np.abs(lo) > np.abs(hi), lo, hi)  # NaN compares False: hi (NaN too when the block is)
    if any_masked is not None:
        out[np.isnan(out) & any_masked] = -np.inf
    return np.ascontiguousarray(out, dtype=np.float32)


def _reduce_strided(v: np.ndarray, br: int, bc: int, op: np.ufunc) -> np.ndarray:
    """Combine every br-th row and bc-th column with a binary ufunc: one pass per offset inside a block (numpy's
    reduce over a short inner axis of a 4-D view is several times slower)."""
    out = v[:, 0::bc].copy()  # (rows, C)
    for k in range(1, bc):
        op(out, v[:, k::bc], out=out)
    rows_out = out[0::br].copy()  # (R, C)
    for k in range(1, br):
        op(rows_out, out[k::br], out=rows_out)
    return rows_out


# ----------------------------------------------------------------------------------------------------------
# Views beyond one step: statistics, the architecture's blocks, positional-encoding curves, masks per
# attention type, the layers × heads overview and the top-k output table. Pure functions: the window and the
# exporters both draw from them.
# ----------------------------------------------------------------------------------------------------------


@dataclass
class TensorStats:
    """Summary numbers of a whole step tensor (over every axis), ignoring −∞ and NaN cells."""

    minimum: float
    maximum: float
    mean: float
    std: float
    n_masked: int  # cells that are −∞
    n_nan: int

    def lines(self) -> list[str]:
        out = [
            f"min  {format_value(self.minimum)}",
            f"max  {format_value(self.maximum)}",
            f"mean {format_value(self.mean)}",
            f"std  {format_value(self.std)}",
        ]
        if self.n_masked:
            out.append(f"−∞   {self.n_masked} cells (masked)")
        if self.n_nan:
            out.append(f"NaN  {self.n_nan} cells")
        return out


def tensor_stats(tensor: torch.Tensor) -> TensorStats:
    t = tensor.detach().to(torch.float32)
    finite = torch.isfinite(t)
    n_masked = int(torch.isneginf(t).sum())
    n_nan = int(torch.isnan(t).sum())
    vals = t[finite] if not bool(finite.all()) else t.reshape(-1)
    if vals.numel() == 0:
        nan = float("nan")
        return TensorStats(nan, nan, nan, nan, n_masked, n_nan)
    std = float(vals.std()) if vals.numel() > 1 else 0.0
    return TensorStats(float(vals.min()), float(vals.max()), float(vals.mean()), std, n_masked, n_nan)


# --- the architecture diagram's blocks ---------------------------------------------------------------------


@dataclass
class Block:
    """One box of the architecture diagram. `key` is what block_key(step) returns for the steps inside it."""

    key: str
    label: str
    column: str  # "encoder" or "decoder"
    kind: str  # embedding, positional, attention, add_norm, ffn, norm, linear, softmax
    layer: int | None = None  # 0-based layer inside its stack, None outside the layers


EMBEDDING_KINDS = {"tokens", "embedding"}


def block_key(step: Step) -> str:
    """The diagram block a step belongs to: its sublayer, with the embeddings and the output split in two."""
    if step.stack in ("src_embed", "tgt_embed"):
        return f"{step.stack}.{'embedding' if step.kind in EMBEDDING_KINDS else 'positional'}"
    if step.stack == "generator":
        return "generator.softmax" if step.kind == "probabilities" else "generator.linear"
    return step.sublayer


def architecture(config) -> list[Block]:
    """The blocks of a model in reading order, from its config (any layer count; only the stacks it has)."""
    blocks: list[Block] = []
    if config.has_encoder:
        blocks += [
            Block("src_embed.embedding", "Input embedding", "encoder", "embedding"),
            Block("src_embed.positional", "⊕ Positional encoding", "encoder", "positional"),
        ]
        for i in range(config.n_encoder_layers):
            blocks += [
                Block(f"encoder.{i}.self_attn", "Multi-head self-attention", "encoder", "attention", i),
                Block(f"encoder.{i}.add_norm1", "Add & Norm", "encoder", "add_norm", i),
                Block(f"encoder.{i}.ffn", "Feed-forward", "encoder", "ffn", i),
                Block(f"encoder.{i}.add_norm2", "Add & Norm", "encoder", "add_norm", i),
            ]
        if config.final_layer_norm:
            blocks.append(Block("encoder.final_norm", "Final LayerNorm", "encoder", "norm"))
    if config.has_decoder:
        blocks += [
            Block("tgt_embed.embedding", "Output embedding", "decoder", "embedding"),
            Block("tgt_embed.positional", "⊕ Positional encoding", "decoder", "positional"),
        ]
        for i in range(config.n_decoder_layers):
            blocks += [
                Block(f"decoder.{i}.self_attn", "Masked self-attention", "decoder", "attention", i),
                Block(f"decoder.{i}.add_norm1", "Add & Norm", "decoder", "add_norm", i),
            ]
            if config.has_encoder:
                blocks += [
                    Block(f"decoder.{i}.cross_attn", "Cross-attention", "decoder", "attention", i),
                    Block(f"decoder.{i}.add_norm2", "Add & Norm", "decoder", "add_norm", i),
                ]
            last = 3 if config.has_encoder else 2
            blocks += [
                Block(f"decoder.{i}.ffn", "Feed-forward", "decoder", "ffn", i),
                Block(f"decoder.{i}.add_norm{last}", "Add & Norm", "decoder", "add_norm", i),
            ]
        if config.final_layer_norm:
            blocks.append(Block("decoder.final_norm", "Final LayerNorm", "decoder", "norm"))
        blocks += [
            Block("generator.linear", "Linear", "decoder", "linear"),
            Block("generator.softmax", "Softmax", "decoder", "softmax"),
        ]
    return blocks


def block_steps(trace: Trace) -> dict[str, list[int]]:
    """Block key → the indices of its steps, in order."""
    out: dict[str, list[int]] = {}
    for s in trace:
        out.setdefault(block_key(s), []).append(s.index)
    return out


# --- positional encoding -----------------------------------------------------------------------------------


@dataclass
class Curve:
    """One dimension of the positional encoding over position: a smooth line and the values actually added."""

    dim: int
    label: str  # "dim 4 (sin)"
    x: np.ndarray  # fine positions for the line
    y: np.ndarray
    x_points: np.ndarray  # integer positions 0 … n-1
    y_points: np.ndarray  # the encoding the model added there


def default_pe_dims(d_model: int) -> list[int]:
    """Two fast and two slower dimensions: 0, 1 and the sin/cos pair a quarter of the way in."""
    k = (d_model // 4) * 2
    return sorted({d for d in (0, 1, k, k + 1) if d < d_model})


def pe_curves(
    pe: np.ndarray, dims: Sequence[int], positional: str = "sinusoidal", samples: int = 8
) -> list[Curve]:
    """Curves of chosen dimensions of a (positions, d_model) encoding.

    For the paper's sinusoids the line is the formula at fractional positions (so short inputs still show the
    wave) and the points are the values the model added; for learned positions the line joins the points.
    """
    pe = np.asarray(pe, dtype=np.float32)
    n, d_model = pe.shape
    x_points = np.arange(n, dtype=np.float32)
    x_fine = np.linspace(0.0, max(n - 1, 1), max(2, (n - 1) * samples + 1), dtype=np.float64)
    curves = []
    for dim in dims:
        if not 0 <= dim < d_model:
            continue
        if positional in ("sinusoidal", "sinusoidal_halves"):
            n_sin = d_model - d_model // 2
            if positional == "sinusoidal":
                i2, is_sin = dim - dim % 2, dim % 2 == 0
            else:
                is_sin = dim < n_sin
                i2 = 2 * (dim if is_sin else dim - n_sin)
            angle = x_fine / np.power(10000.0, i2 / d_model)
            y = np.sin(angle) if is_sin else np.cos(angle)
            period = 2 * np.pi * 10000.0 ** (i2 / d_model)
            label = f"dim {dim} ({'sin' if is_sin else 'cos'}, period {period:.3g})"
            x = x_fine
        else:
            x, y, label = x_points.astype(np.float64), pe[:, dim].astype(np.float64), f"dim {dim}"
        xs, ys = x.astype(np.float32), y.astype(np.float32)
        curves.append(Curve(dim, label, xs, ys, x_points, pe[:, dim].copy()))
    return curves


def positional_heatmap(trace: Trace, stack: str = "src_embed") -> Heatmap | None:
    """position × dimension heatmap of the encoding that `stack` ("src_embed" or "tgt_embed") added."""
    step = trace.find(f"{stack}.positional_encoding")
    if step is None:
        return None
    hm = step_heatmap(trace, step)
    side = "source" if stack == "src_embed" else "target"
    n_pos, d_model = step.shape
    hm.title = f"Positional encoding added to the {side} ({n_pos} positions × {d_model} dimensions)"
    return hm


# --- masks -------------------------------------------------------------------------------------------------

ATTENTION_TITLES = {
    "encoder.self_attn": "Encoder self-attention",
    "decoder.self_attn": "Decoder masked self-attention",
    "decoder.cross_attn": "Cross-attention",
}


def attention_types(trace: Trace) -> list[str]:
    """The attention types present, in the order encoder self, decoder self, cross."""
    seen = {s.attention_type for s in trace if s.attention_type}
    return [t for t in ATTENTION_TITLES if t in seen]


def _mask_heatmap(allowed: np.ndarray, title: str, rows: list[str] | None, cols: list[str] | None,
                  row_dim: str, col_dim: str) -> Heatmap:
    values = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    masked = ~allowed
    return Heatmap(
        values=np.ascontiguousarray(values), row_labels=rows, col_labels=cols, row_dim=row_dim,
        col_dim=col_dim, levels=(0.0, 1.0), colormap=MASK, title=title,
        subtitle=f"{int(masked.sum())} of {masked.size} cells blocked (−∞)",
        formula="0 = may attend, −∞ = blocked", masked=masked if masked.any() else None,
    )


def _pad_of(trace: Trace, stack: str, batch: int, pad_id: int | None) -> np.ndarray | None:
    step = trace.find(f"{stack}.tokens")
    if step is None:
        return None
    ids = step.tensor[min(batch, step.shape[0] - 1)].numpy()
    return ids == pad_id if pad_id is not None else np.zeros(ids.shape, dtype=bool)


def mask_heatmaps(trace: Trace, attention_type: str, layer: int = 0, batch: int = 0,
                  pad_id: int | None = None) -> list[Heatmap]:
    """The masks of one attention type: its parts (causal, source / target padding) and the combined mask the
    model added to the scores (read from the trace, so it is exactly what was used)."""
    stack, kind = attention_type.split(".")
    combined_step = trace.find(f"{stack}.{layer}.{kind}.mask")
    if combined_step is None:
        return []
    b = min(batch, combined_step.shape[0] - 1)
    combined = np.isfinite(combined_step.tensor[b].to(torch.float32).numpy())
    n_q, n_k = combined.shape
    row_dim, col_dim = combined_step.dims[1], combined_step.dims[2]
    rows = axis_labels(trace, row_dim, n_q, batch)
    cols = axis_labels(trace, col_dim, n_k, batch)
    parts: list[Heatmap] = []
    if attention_type == "decoder.self_attn":
        causal = np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)
        parts.append(_mask_heatmap(causal, "Causal (no peeking ahead)", rows, cols, row_dim, col_dim))
    key_stack = "tgt_embed" if col_dim == "tgt_pos" else "src_embed"
    pad = _pad_of(trace, key_stack, batch, pad_id)
    if pad is not None and pad.shape[0] == n_k:
        side = "Target" if key_stack == "tgt_embed" else "Source"
        allowed = np.broadcast_to(~pad[None, :], (n_q, n_k))
        parts.append(_mask_heatmap(allowed, f"{side} padding", rows, cols, row_dim, col_dim))
    hm = _mask_heatmap(combined, "Combined mask used", rows, cols, row_dim, col_dim)
    hm.extra["step"] = combined_step.name
    parts.append(hm)
    for p in parts:
        p.title = f"{ATTENTION_TITLES.get(attention_type, attention_type)}: {p.title}"
    return parts


def before_after_softmax(trace: Trace, sublayer: str, batch: int = 0, head: int = 0) -> list[Heatmap]:
    """[masked scores, attention weights] of one attention sublayer and head, for side-by-side display."""
    out = []
    for part in ("masked_scores", "weights"):
        step = trace.find(f"{sublayer}.{part}")
        if step is not None:
            out.append(step_heatmap(trace, step, batch, head))
    return out


# --- layers × heads overview -------------------------------------------------------------------------------


def _shrink(m: np.ndarray, tile: int) -> np.ndarray:
    """Block-mean a matrix down to at most tile × tile cells (small matrices are kept as they are)."""
    rows, cols = m.shape
    fr, fc = -(-rows // tile), -(-cols // tile)  # ceil
    if fr == 1 and fc == 1:
        return m
    pr, pc = (-rows) % fr, (-cols) % fc
    padded = np.pad(m, ((0, pr), (0, pc)), constant_values=np.nan)
    blocks = padded.reshape(padded.shape[0] // fr, fr, padded.shape[1] // fc, fc)
    with np.errstate(invalid="ignore"):
        return np.nanmean(blocks, axis=(1, 3))


def overview_mosaic(trace: Trace, attention_type: str, batch: int = 0, tile: int = 48) -> Heatmap | None:
    """All layers × heads attention weights of one type as one mosaic image (rows = layers, columns = heads).

    Each map is block-averaged to at most `tile` cells a side; tiles are separated by one NaN cell (drawn
    transparent). extra holds what overview_cell() needs to map a clicked cell back to (layer, head).
    """
    stack, kind = attention_type.split(".")
    steps = [s for s in trace if s.attention_type == attention_type and s.kind == "attention_weights"]
    if not steps:
        return None
    steps.sort(key=lambda s: s.layer or 0)
    n_heads = head_count(steps[0])
    tiles = []
    for s in steps:
        b = min(batch, s.shape[0] - 1)
        w = s.tensor[b].to(torch.float32).numpy()  # (h, Tq, Tk)
        tiles.append([_shrink(w[h], tile) for h in range(n_heads)])
    th = max(t.shape[0] for row in tiles for t in row)
    tw = max(t.shape[1] for row in tiles for t in row)
    gap = 1
    mosaic = np.full((len(steps) * (th + gap) - gap, n_heads * (tw + gap) - gap), np.nan, dtype=np.float32)
    for li, row in enumerate(tiles):
        for h, t in enumerate(row):
            r0, c0 = li * (th + gap), h * (tw + gap)
            mosaic[r0 : r0 + t.shape[0], c0 : c0 + t.shape[1]] = t
    title = f"{ATTENTION_TITLES.get(attention_type, attention_type)}: {len(steps)} layers × {n_heads} heads"
    return Heatmap(
        values=np.ascontiguousarray(mosaic),
        row_labels=[f"Layer {s.layer + 1}" for s in steps],
        col_labels=[f"Head {h + 1}" for h in range(n_heads)],
        row_dim="layer", col_dim="head", levels=(0.0, 1.0), colormap=SEQUENTIAL, title=title,
        subtitle=f"batch item {batch + 1}; each tile is one head's weights (queries down, keys across)",
        formula="softmax(QKᵀ/√d_k + M)",
        extra={"tile_rows": th, "tile_cols": tw, "gap": gap, "layers": [s.layer for s in steps],
               "steps": [s.name for s in steps], "heads": n_heads},
    )


def overview_cell(mosaic: Heatmap, row: float, col: float) -> tuple[int, int] | None:
    """(layer index in the mosaic, head) under a mosaic cell, or None on a gap or outside."""
    e = mosaic.extra
    r, c = int(np.floor(row)), int(np.floor(col))
    if r < 0 or c < 0 or r >= mosaic.values.shape[0] or c >= mosaic.values.shape[1]:
        return None
    li, ri = divmod(r, e["tile_rows"] + e["gap"])
    h, ci = divmod(c, e["tile_cols"] + e["gap"])
    if ri >= e["tile_rows"] or ci >= e["tile_cols"]:
        return None
    return li, h


def overview_tick_positions(mosaic: Heatmap) -> tuple[list[float], list[float]]:
    """Centre of each tile along rows and columns, for axis labels."""
    e = mosaic.extra
    rows = [i * (e["tile_rows"] + e["gap"]) + (e["tile_rows"] - 1) / 2 for i in range(len(e["layers"]))]
    cols = [h * (e["tile_cols"] + e["gap"]) + (e["tile_cols"] - 1) / 2 for h in range(e["heads"])]
    return rows, cols


# --- output: top-k next tokens -----------------------------------------------------------------------------


@dataclass
class TopKRow:
    position: int
    input_token: str  # the decoder input at this position (the prediction is for the token after it)
    tokens: list[str]
    ids: list[int]
    probs: list[float]


def top_k_table(
    trace: Trace, k: int = 5, batch: int = 0, vocab_labels: VocabLabels | None = None
) -> list[TopKRow]:
    """For each target position, the k most likely next tokens and their probabilities."""
    step = trace.find("generator.probs")
    if step is None:
        return []
    probs = step.tensor[min(batch, step.shape[0] - 1)].to(torch.float32)  # (T, vocab)
    k = min(k, probs.shape[-1])
    top = torch.topk(probs, k, dim=-1)
    inputs = trace.labels("tgt_pos", batch) or []
    rows = []
    for pos in range(probs.shape[0]):
        ids = top.indices[pos].tolist()
        tokens = vocab_labels(ids) if vocab_labels else [f"#{i}" for i in ids]
        tok = inputs[pos] if pos < len(inputs) else f"tgt_pos {pos}"
        rows.append(TopKRow(pos, tok, tokens, ids, top.values[pos].tolist()))
    return rows
