"""One step as a heatmap: the Heatmap record, its colour levels and labels, and per-head grids."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..recording.trace import HEAD_DIMS, Step, Trace, step_path

VocabLabels = Callable[[Sequence[int]], list[str]]

# Colour maps by meaning: probabilities are sequential from 0; signed activations are diverging around 0.
SEQUENTIAL, DIVERGING, MASK = "viridis", "RdBu_r", "mask"
PROBABILITY_KINDS = {"attention_weights", "probabilities"}
VOCAB_COLUMNS = 24  # a vocab axis shows the union of the top tokens per row, not 50 257 columns


OUTLINE_COLOUR = "#ff2d78"  # frames of outlined or highlighted cells: a hue none of the colour maps uses


@dataclass
class Heatmap:
    """A 2-D grid of numbers ready to draw: values[row, col], with the −∞ cells that a mask made flagged in
    `masked` (any other −∞, NaN or +∞ is trouble: plotdata.special), and cells without data in `gaps`."""

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
    masked: np.ndarray | None = None  # (rows, cols) bool, True where the value is a mask's −∞
    extra: dict = field(default_factory=dict)
    gaps: np.ndarray | None = None  # (rows, cols) bool, True where a cell holds no data (NaN drawn empty)
    outlined: np.ndarray | None = None  # (rows, cols) bool, cells drawn with an OUTLINE_COLOUR frame (a sweep's
    # cells where attribution patching and the real patch disagree); the window and the exports both draw it

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
    if v == float("inf"):
        return "+∞"
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
    t = step.item(batch) if "batch" in step.dims else step.tensor  # a lazy trace recomputes this item only
    dims = [d for d in step.dims if d != "batch"]
    index: list[int | slice] = []
    for d, n in zip(dims, t.shape):
        if d in HEAD_DIMS:  # one head: the queries', or a shared key/value head (GQA)
            index.append(min(head, n - 1))
        else:
            index.append(slice(None))
    kept = [d for d in dims if d not in ("batch", *HEAD_DIMS)]
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
    if dim == "expert":  # a mixture of experts' router: counted from 1, as the explanations count them
        return [f"expert {i + 1}" for i in range(n)]
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
    extra["cell_of"] = (step.name, batch, head)  # a click on (row, col) is that step's cell (plotdata.cells)
    levels, cmap = levels_for(values, step.kind)
    if step.kind == "mask":
        levels, cmap = (0.0, 1.0), MASK
    heads = head_text(step, head)
    subtitle = f"{step.name}  ·  {step.shape_text()}  ·  batch item {batch + 1}{heads}"
    hm = labelled_heatmap(values, trace, row_dim, col_dim, batch, levels, cmap, step_path(step), subtitle,
                          step.formula, col_labels, extra)  # fmt: skip
    if hm.masked is not None:
        hm.masked = masked_by_design(trace, step, values, batch)
    if step.kind == "router" and step.name.endswith(".chosen_weights"):
        # the tokens × experts map of where each token went: an expert a token did not choose did not run for
        # it, so its cell is left blank and the chosen ones stand out with their weights
        hm.gaps = values == 0
        hm.subtitle += "  ·  blank: expert not chosen for that token"
    return hm


def masked_by_design(trace: Trace, step: Step, values: np.ndarray, batch: int) -> np.ndarray | None:
    """Which −∞ cells of a step's map a mask put there: all of a mask's; those of the masked scores where the
    attention's mask is −∞; none elsewhere (a −∞ in an embedding or a score is trouble, not masking)."""
    neg = np.isneginf(values)
    if step.kind == "masked_scores":
        mask = trace.find(step.name.rsplit(".", 1)[0] + ".mask")
        if mask is not None and mask.kind == "mask":
            m = np.isneginf(matrix_of(mask, batch)[0])  # (q, k), the same for every head
            if m.shape == neg.shape:
                neg = neg & m
    elif step.kind != "mask":
        return None
    return neg if neg.any() else None


def labelled_heatmap(values: np.ndarray, trace: Trace, row_dim: str, col_dim: str, batch: int,
                     levels: tuple[float, float], cmap: str, title: str, subtitle: str, formula: str,
                     col_labels: list[str] | None = None, extra: dict | None = None) -> Heatmap:  # fmt: skip
    """A Heatmap of `values` with the run's token labels on its position axes and −∞ cells flagged; columns
    take `col_labels` when given (a vocabulary axis's chosen tokens)."""
    masked = np.isneginf(values)
    return Heatmap(
        values=np.ascontiguousarray(values, dtype=np.float32),
        row_labels=axis_labels(trace, row_dim, values.shape[0], batch),
        col_labels=col_labels if col_labels is not None else axis_labels(trace, col_dim, values.shape[1], batch),
        row_dim=row_dim,
        col_dim=col_dim,
        levels=levels,
        colormap=cmap,
        title=title,
        subtitle=subtitle,
        formula=formula,
        masked=masked if masked.any() else None,
        extra=extra or {},
    )


def shared_top_columns(first: np.ndarray, second: np.ndarray, vocab_labels=None) -> tuple[np.ndarray, list[str]]:
    """The vocabulary columns two maps of the same rows are shown by: the union of each one's top VOCAB_COLUMNS
    (the first's first), at most twice that many; (column ids, their labels)."""
    _, ca = top_columns(first, VOCAB_COLUMNS)
    _, cb = top_columns(second, VOCAB_COLUMNS)
    ids = np.array(list(dict.fromkeys([*ca.tolist(), *cb.tolist()]))[: 2 * VOCAB_COLUMNS], dtype=np.int64)
    return ids, (vocab_labels(ids.tolist()) if vocab_labels else [f"#{i}" for i in ids])


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
    return step.n_heads


def head_text(step: Step, head: int) -> str:
    """', head 2' or ', key/value head 1' (the shown one of a step's heads), '' for a step without heads."""
    if step.head_dim is None:
        return ""
    what = "key/value head" if step.head_dim == "kv_head" else "head"
    return f", {what} {min(head, step.n_heads - 1) + 1}"


def heads_grid(trace: Trace, step: Step | str | int, batch: int = 0) -> list[Heatmap]:
    """One heatmap per head of a step with a head axis (all share the same levels for fair comparison)."""
    step = step if isinstance(step, Step) else trace[step]
    maps = [step_heatmap(trace, step, batch, h) for h in range(head_count(step))]
    if step.kind not in PROBABILITY_KINDS and maps:
        stacked = np.stack([m.values for m in maps])
        levels, _ = levels_for(stacked, step.kind)
        for m in maps:
            m.levels = levels
    sharing = kv_sharing(trace, step.sublayer) if len(maps) > 1 else None
    for h, m in enumerate(maps):
        m.title = f"Head {h + 1}"
        if sharing is not None:  # grouped-query attention: say which key/value head this query head reads
            m.title += f" · reads K/V head {h // (sharing[0] // sharing[1]) + 1}"
    return maps


def kv_sharing(trace: Trace, sublayer: str) -> tuple[int, int] | None:
    """(query heads, key/value heads) of an attention sublayer whose query heads share key/value heads
    (grouped-query or multi-query attention), read from its traced keys; None when every head has its own."""
    keys = trace.find(f"{sublayer}.k")
    queries = trace.find(f"{sublayer}.scores") or trace.find(f"{sublayer}.weights")
    if keys is None or queries is None or "kv_head" not in keys.dims or "head" not in queries.dims:
        return None
    n_q, n_kv = head_count(queries), keys.shape[keys.dims.index("kv_head")]
    return (n_q, n_kv) if 0 < n_kv < n_q and n_q % n_kv == 0 else None


def kv_sharing_text(trace: Trace, sublayer: str, d_head: int | None = None) -> str:
    """One sentence on what grouped-query attention shares and saves in a sublayer; "" without sharing."""
    sharing = kv_sharing(trace, sublayer)
    if sharing is None:
        return ""
    n_q, n_kv = sharing
    group = n_q // n_kv
    who = "one key/value head" if n_kv == 1 else f"{n_kv} key/value heads"
    text = (f"{n_q} query heads read {who} ({group} each: heads {', '.join(_groups(n_q, group))}), so W^K and W^V "
            f"are {group}× narrower than W^Q")
    if d_head:
        text += (f" and the KV cache keeps 2·{n_kv}·{d_head} = {2 * n_kv * d_head:,} numbers per token and layer "
                 f"instead of {2 * n_q * d_head:,}")
    return text + "."


def _groups(n_q: int, group: int) -> list[str]:
    """["1–2", "3–4"]: the query heads (from 1) that share each key/value head."""
    return [f"{g + 1}" if group == 1 else f"{g + 1}–{g + group}" for g in range(0, n_q, group)]


# ---- the numbers inside the cells (the window and the exporters write them the same way) -----------------

DARK_TEXT, LIGHT_TEXT = (20, 20, 20), (255, 255, 255)
_LUMINANCE_SPLIT = 0.179  # relative luminance where black and white text contrast equally (WCAG)


def is_integral(values: np.ndarray) -> bool:
    """True when every finite value is a whole number of modest size (token ids, 0/−∞ masks): drawn as integers."""
    finite = values[np.isfinite(values)]
    return bool(finite.size) and bool(np.all(np.abs(finite) < 1e7)) and bool(np.all(finite == np.round(finite)))


def cell_label(value: float, integer: bool = False, decimals: int | None = None) -> str:
    """A cell's value in a few characters: 3 significant figures ("0.42", "-1.3", "12", "1234", "2.5e-5"),
    integers as they are ("30243"), a fixed number of `decimals` when given ("0.32", "0.00"), "−∞" and "∞" for
    infinities, "NaN" for NaN (cell_labels leaves gaps empty)."""
    v = float(value)
    if v != v:
        return "NaN"
    if v == float("-inf"):
        return "−∞"
    if v == float("inf"):
        return "∞"
    if integer:
        return str(int(round(v)))
    if decimals is not None:
        return f"{v:.{decimals}f}"
    a = abs(v)
    if a >= 1000 and a < 1e6:  # "1234" reads better than "1.23e+03"
        return f"{v:.0f}"
    text = f"{v:.3g}"
    if "e" in text:  # "2.5e-05" → "2.5e-5"
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return "0" if text in ("-0", "0") else text


def cell_labels(values: np.ndarray, integer: bool | None = None, decimals: int | None = None,
                gaps: np.ndarray | None = None) -> list[list[str]]:  # fmt: skip
    """cell_label of every cell of a (small) matrix; integers when all values are whole (is_integral); "" in the
    cells that `gaps` marks as holding no data."""
    whole = is_integral(values) if integer is None else integer
    labels = [[cell_label(v, whole, decimals) for v in row] for row in np.asarray(values, dtype=np.float64).tolist()]
    if gaps is not None:
        for i, j in zip(*np.nonzero(gaps)):
            labels[i][j] = ""
    return labels


def value_decimals(hm: Heatmap) -> int | None:
    """Probability maps (weights on the fixed 0 … 1 scale) read best with 3 decimals — "0.321", "1.000", "0.000",
    as the tutorials print them — rather than "4.76e-10"; other maps keep 3 significant figures (None)."""
    if hm.colormap == SEQUENTIAL and tuple(hm.levels) == (0.0, 1.0) and not is_integral(hm.values):
        return 3
    return None


def dark_text_on(rgba: np.ndarray) -> np.ndarray:
    """(…, 4) uint8 cell colours → (…) bool: True where dark text contrasts more than white (light cells).

    The colour is blended over the white background by its alpha, then compared by relative luminance
    (sRGB linearised, ITU-R BT.709 weights): above 0.179, black text has the better contrast ratio."""
    c = np.asarray(rgba, dtype=np.float64) / 255.0
    alpha = c[..., 3:4]
    rgb = c[..., :3] * alpha + (1.0 - alpha)  # over white
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = linear @ np.array([0.2126, 0.7152, 0.0722])
    return luminance > _LUMINANCE_SPLIT


def text_colour_for(rgba) -> tuple[int, int, int]:
    """The text colour (RGB) for a cell drawn in `rgba`: dark on light cells, white on dark ones."""
    return DARK_TEXT if bool(dark_text_on(np.asarray(rgba))) else LIGHT_TEXT


@dataclass
class TokenColumn:
    """One batch item of a token-id step: its tokens and their ids, position by position."""

    batch: int
    tokens: list[str]
    ids: list[int]


def token_columns(trace: Trace, step: Step | str | int) -> tuple[str, list[TokenColumn]]:
    """The walkthrough's table of a `tokens` step: (position axis name, one TokenColumn per batch item)."""
    step = step if isinstance(step, Step) else trace[step]
    ids = step.tensor.to(torch.int64)
    dims = list(step.dims)
    pos_dim = next((d for d in dims if d != "batch"), "pos")
    if "batch" not in dims:
        ids = ids[None]
    ids = ids.reshape(ids.shape[0], -1)  # (batch, pos)
    columns = []
    for b, row in enumerate(ids.tolist()):
        labels = axis_labels(trace, pos_dim, len(row), b) or [f"#{i}" for i in row]
        columns.append(TokenColumn(b, labels, [int(i) for i in row]))
    return pos_dim, columns
