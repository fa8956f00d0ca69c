"""Training curves (from a model folder's training.json) and the attention maps of training snapshots.

Pure functions for the Training tab and its exporters: `training_record(spec)` reads the record of a bundled
model or checkpoint folder (a spec's `@step-N` names its parent run), `training_curves(record)` turns it into
plain lists, and `snapshot_heatmap(trace, …)` / `aligned_head(trace, …)` read one attention map of a traced run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..recording.trace import Trace
from .heatmap import Heatmap, step_heatmap

CROSS = "decoder.cross_attn"


@dataclass
class TrainingCurves:
    """The loss / accuracy curves of one training run, as (step, value) lists; empty lists where unknown."""

    train_loss: list[tuple[int, float]] = field(default_factory=list)
    valid_loss: list[tuple[int, float]] = field(default_factory=list)
    valid_token_accuracy: list[tuple[int, float]] = field(default_factory=list)
    snapshot_steps: list[int] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.train_loss or self.valid_loss or self.valid_token_accuracy)


def training_json_path(spec: str) -> Path | None:
    """The training.json of a bundled model's name or a checkpoint folder (a spec's `@step-N` is ignored)."""
    from ..loading.bundle import bundled_models, split_snapshot

    base, _ = split_snapshot(spec)
    if not base:
        return None
    directory = bundled_models().get(base) or Path(base).expanduser()
    path = directory / "training.json"
    return path if path.is_file() else None


def training_record(spec: str) -> dict | None:
    """The parsed training.json of a model spec, or None (preset, imported model, missing or damaged file)."""
    path = training_json_path(spec)
    if path is None:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _points(entries, key: str) -> list[tuple[int, float]]:
    out = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        step, value = entry.get("step"), entry.get(key)
        if isinstance(step, (int, float)) and isinstance(value, (int, float)) and np.isfinite(value):
            out.append((int(step), float(value)))
    return sorted(out)


def training_curves(record: dict | None) -> TrainingCurves:
    """Curves from a training.json record: its dense "curve" when present, else the per-epoch "history"."""
    if not record:
        return TrainingCurves()
    entries = record.get("curve") or record.get("history") or []
    curves = TrainingCurves(
        train_loss=_points(entries, "train_loss"),
        valid_loss=_points(entries, "valid_loss"),
        valid_token_accuracy=_points(entries, "valid_token_accuracy"),
    )
    snaps = record.get("snapshots") or []
    curves.snapshot_steps = sorted(int(s["step"]) for s in snaps
                                   if isinstance(s, dict) and isinstance(s.get("step"), (int, float)))
    return curves


def attention_step_name(attention_type: str, layer: int) -> str:
    """"decoder.cross_attn", 1 → "decoder.1.cross_attn.weights"."""
    stack, kind = attention_type.split(".")
    return f"{stack}.{layer}.{kind}.weights"


def attention_layers(trace: Trace, attention_type: str) -> int:
    """How many layers of this attention type the trace holds."""
    return len([s for s in trace.attention_steps() if s.attention_type == attention_type])


def alignment_scores(weights: np.ndarray) -> np.ndarray:
    """How much each head of one attention map (H, Q, K) looks like an alignment: the mean over rows of the row's
    largest weight (peaked rows), times the share of distinct key positions those peaks land on (rows that point
    at different tokens, not all at one). A head that copies or reorders scores near 1; a uniform head 1/K; a
    head whose every row stares at the same token 1/min(Q, K)."""
    weights = np.nan_to_num(weights, nan=0.0)  # (H, Q, K)
    peaks = weights.max(axis=-1).mean(axis=-1)  # (H,)
    spread = np.array([len(np.unique(head.argmax(axis=-1))) for head in weights]) / min(weights.shape[1:])  # (H,)
    return peaks * spread


def aligned_head(trace: Trace, attention_type: str = CROSS, layer: int = -1,
                guided: tuple[int, int] | None = None) -> int:
    """The Training tab's default head: the most "aligned" head of that layer (layer -1: the last). `guided`:
    the (decoder layer, head) a model was trained to align with (config extra "guided_alignment"), chosen for
    its own cross-attention layer; otherwise the head with the best alignment_scores. 0 when the trace has no
    such step."""
    n = attention_layers(trace, attention_type)
    if n == 0:
        return 0
    if guided is not None and attention_type == CROSS and guided[0] == layer % n:
        return guided[1]
    step = trace.find(attention_step_name(attention_type, layer % n))
    if step is None:
        return 0
    return int(np.argmax(alignment_scores(step.item(0).float().numpy())))


def shared_decoder_input(target: str, translation: str, start_only: bool = False) -> str:
    """What every snapshot reads as decoder input, so its map has the final model's rows: the typed target, or
    else (unless the start token alone is asked for) the final model's own translation."""
    return target if target.strip() or start_only else translation


def head_labels(n_heads: int, guided: tuple[int, int] | None = None) -> list[str]:
    """A head list's entries, counted from 1; the head trained on the gold alignment says so ("1 (guided in
    layer 2)")."""
    return [f"{i + 1} (guided in layer {guided[0] + 1})" if guided is not None and i == guided[1] else str(i + 1)
            for i in range(n_heads)]


def guided_head(config) -> tuple[int, int] | None:
    """(decoder layer, head) of a model trained with guided alignment, from its config; None otherwise."""
    guided = config.extra.get("guided_alignment") if config is not None else None
    if not guided or not 0 <= guided.get("layer", -1) < config.n_decoder_layers:
        return None
    return int(guided["layer"]), int(guided.get("head", 0))


def snapshot_heatmap(trace: Trace, attention_type: str = CROSS, layer: int = -1, head: int = 0,
                     caption: str = "") -> Heatmap | None:
    """The attention map (batch item 0) of one type, layer and head of a traced run; None if absent.
    `caption` (e.g. "step 334 · valid loss 1.26") is put in front of the title."""
    n = attention_layers(trace, attention_type)
    if n == 0:
        return None
    step = trace.find(attention_step_name(attention_type, layer % n))
    if step is None:
        return None
    hm = step_heatmap(trace, step, 0, max(0, min(head, step.shape[1] - 1)))
    if caption:
        hm.title = f"{caption} — {hm.title}"
    return hm
