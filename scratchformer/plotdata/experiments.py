"""What the Experiments view draws from an experiment's result (scratchformer.experiments): line charts as
series of numbers, maps as Heatmaps, and the numbers as CSV. Pure functions of the result dict and the view's
switch, so that what is exported is exactly what is shown.

    charts(result, switch) → [Chart]     maps(result, switch) → [Heatmap]     charts_csv(charts) → str
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np

from .heatmap import DIVERGING, SEQUENTIAL, Heatmap

# The switch of each experiment: (control name, what it says when on, when off)
SWITCHES: dict[str, tuple[str, str, str]] = {
    "mask": ("masked", "with the causal mask", "without the causal mask"),
    "order": ("positional", "with positional encoding", "without positional encoding"),
    "norm": ("batchnorm", "BatchNorm", "LayerNorm"),
    "superposition": ("sparse", "sparse features", "dense features (sparsity 0)"),
}


@dataclass
class Series:
    name: str
    x: list[float]
    y: list[float]
    colour: str = "#1f5fa8"


@dataclass
class Chart:
    """A line chart: one or more series over a shared x axis."""

    title: str
    x_label: str
    y_label: str
    series: list[Series]
    log_x: bool = False
    marker_x: float | None = None  # a vertical line at the control's value (d_k, T)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)  # labelled ticks (x in data units)
    square: bool = False  # one unit is as long on both axes (vectors in a plane)


BLUE, RED, GREY = "#1f5fa8", "#c2452d", "#777777"
FEATURE_COLOURS = ("#1f5fa8", "#c2452d", "#2a8a3e", "#8e44ad", "#d68910", "#17a2b8", "#7f8c8d", "#e84393")


def _heatmap(values, rows, cols, row_dim, col_dim, title, subtitle, formula="", levels=None, cmap=SEQUENTIAL):
    v = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(len(rows), len(cols)))
    if levels is None:
        top = float(np.nanmax(np.abs(v))) if v.size else 0.0
        levels = (0.0, top if top > 0 else 1.0)
    return Heatmap(v, list(rows), list(cols), row_dim, col_dim, levels, cmap, title, subtitle, formula)


def _shared_top(*arrays) -> tuple[float, float]:
    """(0, the largest |value| of both sides): a switch flips the map but keeps its colour scale."""
    top = max((float(np.abs(np.asarray(a)).max()) for a in arrays if np.asarray(a).size), default=0.0)
    return 0.0, top if top > 0 else 1.0


def switch_on(result: dict, switch: bool | None = None) -> bool:
    """The view's switch for this result: given, else the result's own control, else on."""
    name = SWITCHES.get(result["experiment"], (None,))[0]
    if switch is not None:
        return bool(switch)
    return bool(result.get("controls", {}).get(name, True)) if name else True


def charts(result: dict, switch: bool | None = None) -> list[Chart]:
    """The line charts of a result."""
    name = result["experiment"]
    if name == "scaling":
        curve, d_k = result["curve"], result["example"]["d_k"]
        x = [float(c["d_k"]) for c in curve]

        def two(key: str) -> list[Series]:
            return [Series("÷ √d_k", x, [c["scaled"][key] for c in curve], BLUE),
                    Series("not scaled", x, [c["unscaled"][key] for c in curve], RED)]  # fmt: skip

        ticks = [(float(d), str(d)) for d in (1, 8, 64, 512)]
        return [Chart("Largest weight (10 keys)", "d_k", "max weight", two("max_weight"), True, d_k, ticks),
                Chart("Entropy (nats)", "d_k", "entropy", two("entropy"), True, d_k, ticks),
                Chart("Gradient left", "d_k", "mean |∂softmax/∂score|", two("mean_abs_gradient"), True, d_k,
                      ticks)]  # fmt: skip
    if name == "mask":
        t = len(result["decoder_tokens"])
        pos = [float(i) for i in range(t)]
        ticks = [(float(i), tok) for i, tok in enumerate(result["decoder_tokens"])]

        def later(key: str) -> list[float]:
            m = np.asarray(result[key]["changes"])
            return [float(m[i, i + 1 :].max()) if i + 1 < t else 0.0 for i in range(t)]

        return [Chart("How far a later token moves each position's output", "decoder position", "max |Δ output|",
                      [Series("with the mask", pos, later("with_mask"), BLUE),
                       Series("without the mask", pos, later("without_mask"), RED)], x_ticks=ticks)]  # fmt: skip
    if name == "order":
        pos = [float(i) for i in range(len(result["source_tokens"]))]
        ticks = [(float(i), tok) for i, tok in enumerate(result["source_tokens"])]
        return [Chart("Shuffled, then put back: each row against the original", "source position",
                      "max |Δ row|", [Series("with positional encoding", pos, result["with_pe"]["row_diffs"], RED),
                                      Series("without it", pos, result["without_pe"]["row_diffs"], BLUE)],
                      x_ticks=ticks)]  # fmt: skip
    if name == "norm":
        tokens = result["tokens"][0]
        pos = [float(i) for i in range(len(tokens))]
        ticks = [(float(i), tok) for i, tok in enumerate(tokens)]
        return [Chart("Sentence 1's normalised values when sentence 2 changes", "position in sentence 1",
                      "max |Δ|", [Series("BatchNorm", pos, result["batchnorm"]["per_position"], RED),
                                  Series("LayerNorm", pos, result["layernorm"]["per_position"], BLUE)],
                      x_ticks=ticks)]  # fmt: skip
    if name == "teacher_forcing":
        snaps = result["snapshots"]
        if not snaps:
            return []
        x = [float(i) for i in range(len(snaps))]
        ticks = [(float(i), str(s["step"])) for i, s in enumerate(snaps)]
        chosen = next((i for i, s in enumerate(snaps) if s["step"] == result["snapshot"]["step"]), None)
        return [Chart("Tokens right, by training snapshot", "training step", "accuracy",
                      [Series("teacher forcing", x, [s["teacher_forced"] for s in snaps], BLUE),
                       Series("free-running", x, [s["free_running"] for s in snaps], RED)],
                      marker_x=float(chosen) if chosen is not None else None, x_ticks=ticks)]  # fmt: skip
    if name == "superposition":
        return superposition_charts(result, switch_on(result, switch))
    if name == "polysemantic":
        n = result["neuron"]
        classes = list(n["per_class"])
        x = [float(i) for i in range(len(classes))]
        return [Chart(f"Neuron {n['index']} of encoder layer {n['layer']}: its strongest activation per word class",
                      "word class", "largest ReLU(x W_1 + b_1)",
                      [Series("largest activation", x, [n["per_class"][k] for k in classes], BLUE)],
                      x_ticks=[(float(i), k) for i, k in enumerate(classes)])]  # fmt: skip
    if name == "temperature":
        curve = result["curve"]
        x = [c["temperature"] for c in curve]
        return [Chart("Next-token distribution against temperature", "temperature T", "nats / probability",
                      [Series("entropy (nats)", x, [c["entropy"] for c in curve], BLUE),
                       Series("top probability", x, [c["top_probability"] for c in curve], RED)],
                      True, result["temperature"], [(t, f"{t:g}") for t in (0.1, 0.3, 1.0, 3.0, 10.0)])]  # fmt: skip
    return []


def maps(result: dict, switch: bool | None = None) -> list[Heatmap]:
    """The maps of a result (for the switch's side where it has two), ready for HeatmapWidget and the exporters."""
    name, on = result["experiment"], switch_on(result, switch)
    model = result.get("model", "")
    if name == "scaling":
        ex = result["example"]
        keys = [f"key {i + 1}" for i in range(len(ex["scaled"]))]
        return [_heatmap([ex["scaled"], ex["unscaled"]], ["÷ √d_k", "not scaled"], keys, "softmax", "key",
                         f"One row of 10 random keys at d_k = {ex['d_k']}", "softmax(q·k / √d_k) and softmax(q·k)",
                         levels=(0.0, 1.0))]  # fmt: skip
    if name == "mask":
        key = "with_mask" if on else "without_mask"
        tokens = result["decoder_tokens"]
        changed = [f"{t} → {n}" for t, n in zip(tokens, result["replaced_with"])]
        return [_heatmap(result[key]["changes"], tokens, changed, "output at", "token replaced",
                         f"Change of each position's output, {SWITCHES['mask'][1 if on else 2]}",
                         f"{model} decoder · max |Δ| over d_model · above the diagonal: a later token",
                         levels=_shared_top(result["with_mask"]["changes"], result["without_mask"]["changes"]))]
    if name == "order":
        key = "with_pe" if on else "without_pe"
        return [_heatmap([result[key]["row_diffs"]], ["put back"], result["source_tokens"], "", "source position",
                         f"Shuffled encoder output put back, {SWITCHES['order'][1 if on else 2]}",
                         f"{model} encoder · max |Δ| of each row against the unshuffled run",
                         levels=_shared_top(result["with_pe"]["row_diffs"], result["without_pe"]["row_diffs"]))]
    if name == "norm":
        key = "batchnorm" if on else "layernorm"
        values = np.asarray(result[key]["change_map"])  # (positions, d_model)
        top = _shared_top(result["layernorm"]["change_map"], result["batchnorm"]["change_map"])[1]
        d = values.shape[1] if values.ndim == 2 else 0
        return [_heatmap(values, result["tokens"][0], [str(i) for i in range(d)], "position", "feature",
                         f"Sentence 1 after another sentence changed: {SWITCHES['norm'][1 if on else 2]}",
                         f"{model} · {result['input_step']} normalised · Δ = after − before",
                         levels=(-top, top), cmap=DIVERGING)]  # fmt: skip
    if name == "teacher_forcing":
        tf, fr = result["teacher_forced"], result["free_running"]
        cols = [f"{i + 1} {t}" for i, t in enumerate(result["reference"]["tokens"])]
        values = [[1.0 if ok else 0.0 for ok in tf["correct"]], [1.0 if ok else 0.0 for ok in fr["correct"]]]
        return [_heatmap(values, ["teacher forcing", "free-running"], cols, "decoding", "reference token",
                         f"Right (1) or wrong (0) at each position: {result['snapshot']['spec']}",
                         "teacher forcing reads the reference; free-running reads its own output",
                         levels=(0.0, 1.0))]  # fmt: skip
    if name == "superposition":
        side = result["sparse" if on else "dense"]
        n = result["features"]
        labels = [f"feature {i + 1}" for i in range(n)]
        top = _shared_top(result["dense"]["WtW"], result["sparse"]["WtW"])[1]
        return [_heatmap(side["WtW"], labels, labels, "feature", "feature",
                         f"WᵀW at sparsity {side['sparsity']:g}: which features share directions",
                         f"toy model, {n} features in {result['dims']} dimensions · diagonal ‖W_i‖², off it W_i · W_j",
                         levels=(-top, top), cmap=DIVERGING)]  # fmt: skip
    if name == "polysemantic":
        n = result["neuron"]
        return [_heatmap([[t["activation"] for t in n["top"]]], [f"neuron {n['index']}"],
                         [f"{t['token']} ({t['class']})" for t in n["top"]], "", "word",
                         f"The words that fire neuron {n['index']} of encoder layer {n['layer']} most",
                         f"{result['model']} · {n['step']} · the largest activation of each word over "
                         f"{result['sentences']} of the task's sentences")]  # fmt: skip
    if name == "temperature":
        top = result["next_token"]["top"]
        return [_heatmap([[t["p"] for t in top]], [f"T = {result['temperature']:g}"], [t["token"] for t in top],
                         "", "next token", f"Most likely next tokens after “{result['context_tokens'][-1]}”",
                         "softmax(logits / T)", levels=(0.0, 1.0))]  # fmt: skip
    return []


def superposition_charts(result: dict, sparse: bool) -> list[Chart]:
    """The toy model: the columns W_i of the setting shown as arrows from the origin of its plane, then each
    feature's norm ‖W_i‖ and interference Σ_{j≠i} (Ŵ_i · W_j)², dense against sparse."""
    side = result["sparse" if sparse else "dense"]
    w = np.asarray(side["W"])  # (m, n)
    n = w.shape[1]
    arrows = [Series(f"feature {i + 1}", [0.0, float(w[0, i])], [0.0, float(w[1, i]) if w.shape[0] > 1 else 0.0],
                     FEATURE_COLOURS[i % len(FEATURE_COLOURS)]) for i in range(n)]  # fmt: skip
    x = [float(i + 1) for i in range(n)]
    ticks = [(float(i + 1), str(i + 1)) for i in range(n)]
    dense, sparse_, cut = result["dense"], result["sparse"], result["threshold"]

    def stored_only(s: dict, key: str) -> list[float]:  # a dropped feature's direction is noise: drawn as 0
        return [v if key == "norms" or norm > cut else 0.0 for v, norm in zip(s[key], s["norms"])]

    def both(key: str) -> list[Series]:
        return [Series("dense (S = 0)", x, stored_only(dense, key), RED),
                Series(f"sparse (S = {sparse_['sparsity']:g})", x, stored_only(sparse_, key), BLUE)]  # fmt: skip
    return [Chart(f"W_i at S = {side['sparsity']:g}: {side['stored']} of {n} stored",
                  "dimension 1", "dimension 2", arrows, square=True),
            Chart(f"‖W_i‖ (stored > {cut:g})", "feature (most important first)", "‖W_i‖",
                  both("norms"), x_ticks=ticks),
            Chart("Interference Σ_{j≠i} (Ŵ_i · W_j)²", "feature", "interference",
                  both("interference"), x_ticks=ticks)]  # fmt: skip


def charts_csv(drawn: list[Chart]) -> str:
    """Every series of these charts as CSV rows: chart, series, x, y."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["chart", "series", "x", "y"])
    for chart in drawn:
        for s in chart.series:
            for x, y in zip(s.x, s.y):
                writer.writerow([chart.title, s.name, f"{x:g}", repr(float(y))])
    return out.getvalue()
