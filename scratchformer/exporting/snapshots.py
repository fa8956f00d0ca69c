"""One attention map followed through training: the data behind the snapshot animation and grid (Qt-free).

`snapshot_series(spec, source, …)` runs one input through every training snapshot of a model and then through
the final model, and keeps for each of them the chosen attention map (plotdata.snapshot_heatmap), the training
step, the loss training.json recorded at that step and the greedy output. The window's Training tab and
`scratchformer export --snapshots` both compute this once and draw from it: `frame_figure` is one frame of the
animation, `grid_figure` the small multiples. Layers and heads are counted from 0 here, from 1 where people see
them (captions, file names, the command line).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..loading.bundle import bundled_models, load_model, snapshots_of, split_snapshot
from ..plotdata import ATTENTION_TITLES, Heatmap, aligned_head, attention_types, guided_head, snapshot_heatmap
from ..plotdata.training import CROSS, attention_layers, shared_decoder_input, training_record
from ..recording.trace import Trace
from .figure import Figure

# What --attention takes on the command line → the trace's attention type.
ATTENTION_NAMES = {"cross": CROSS, "self": "encoder.self_attn", "decoder-self": "decoder.self_attn"}
GRID_ONE_ROW = 5  # up to this many small multiples sit in one row; more take two rows (7 maps: 4 + 3), like a slide

Progress = Callable[[int, int], None]  # (models run so far, models to run)


@dataclass
class SnapshotFrame:
    """One point of training: a snapshot (or the final model) with its map and output for the input."""

    spec: str  # what load_model took: "reverse@step-000334", or "reverse" for the final model
    step: int | None  # training step (None when training.json does not say, for the final model)
    loss: float | None  # validation loss at that step (training loss where no validation loss was recorded)
    loss_name: str  # "valid loss" or "train loss"
    output: str  # the greedy output for the source ("" for a model that cannot generate)
    heatmap: Heatmap
    final: bool = False

    @property
    def caption(self) -> str:
        """"step 334 · valid loss 1.26"; the final model's starts with "final"."""
        parts = ["final" if self.final else ""]
        if self.step is not None:
            parts.append(f"step {self.step}")
        if self.loss is not None:
            parts.append(f"{self.loss_name} {self.loss:.2f}")
        return " · ".join(p for p in parts if p) or "final"


@dataclass
class SnapshotSeries:
    """The chosen attention map of one input over a model's training: one frame per snapshot, then the final."""

    model: str  # the model's name without @step ("reverse", or a folder's name)
    source: str
    target: str
    attention_type: str  # "decoder.cross_attn", …
    layer: int  # counted from 0
    head: int  # counted from 0
    reads: str = ""  # the final model's translation, which every frame reads as decoder input ("" if typed)
    frames: list[SnapshotFrame] = field(default_factory=list)

    @property
    def where(self) -> str:
        """"Cross-attention, layer 2, head 3"."""
        return f"{ATTENTION_TITLES.get(self.attention_type, self.attention_type)}, layer {self.layer + 1}, " \
               f"head {self.head + 1}"  # fmt: skip

    @property
    def title(self) -> str:
        return f"{self.model}: {self.where} over training"

    @property
    def input_text(self) -> str:
        typed = f"  ·  target (teacher forcing): {self.target}" if self.target else ""
        if self.reads:
            typed = f"  ·  every frame reads the final model's translation: {self.reads}"
        return f"source: {self.source}{typed}"

    def stem(self) -> str:
        """A file name stem: "reverse-cross-attention-L2-H3"."""
        kind = {v: k for k, v in ATTENTION_NAMES.items()}.get(self.attention_type, self.attention_type)
        name = re.sub(r"[^\w.-]+", "_", Path(self.model).name, flags=re.UNICODE).strip("_.") or "model"
        return f"{name}-{kind}-attention-L{self.layer + 1}-H{self.head + 1}"


def attention_choice(name: str | None) -> str | None:
    """--attention's word ("cross", "self", "decoder-self") → attention type; None stays None (the default)."""
    if name is None:
        return None
    key = name.strip().lower()
    if key in ATTENTION_NAMES:
        return ATTENTION_NAMES[key]
    if key in ATTENTION_TITLES:
        return key
    raise UserError(f"Unknown attention {name!r}; choose from {', '.join(ATTENTION_NAMES)}.")


def _final_loss(record: dict | None, step: int | None) -> tuple[float | None, str]:
    """The validation loss training.json recorded at the final step (else the last training loss there)."""
    entries = [e for e in (record or {}).get("curve") or (record or {}).get("history") or [] if isinstance(e, dict)]
    at_end = [e for e in entries if step is not None and e.get("step") == step]
    for key, name in (("valid_loss", "valid loss"), ("train_loss", "train loss")):
        for entry in reversed(at_end or entries[-1:]):
            if isinstance(entry.get(key), (int, float)):
                return float(entry[key]), name
    return None, "valid loss"


def snapshot_run(spec: str, source: str, target: str = "", start_only: bool = False, truncate: bool = False,
                 device: str = "cpu") -> tuple[Trace, str, tuple[int, int] | None]:
    """One model's traced run of the input (teacher-forced on `target` when given), its own greedy output (also
    when a target was given) and its guided-alignment head, if any. The Training tab runs snapshots with this too."""
    bundle = load_model(spec, device)
    inputs = bundle.prepare_run(source, target, start_only=start_only, truncate=truncate)
    _, trace = bundle.run(inputs)
    output = inputs.translation
    if inputs.decoder_input != "generated" and bundle.can_generate:
        output = bundle.prepare_run(source, "", truncate=truncate).translation
    return trace, output, guided_head(bundle.config)


def _choose(trace: Trace, attention_type: str | None, layer: int | None, head: int | None,
            guided: tuple[int, int] | None = None) -> tuple[str, int, int]:
    """Validate (type, layer, head) against a trace; the defaults are cross-attention (else the last type
    present), the last layer and the most aligned head (`guided`, else by alignment_scores), as in the Training
    tab."""
    types = attention_types(trace)
    if not types:
        raise UserError("This model has no attention maps to follow over training.")
    if attention_type is None:
        attention_type = CROSS if CROSS in types else types[-1]
    if attention_type not in types:
        names = [k for k, v in ATTENTION_NAMES.items() if v in types]
        raise UserError(f"This model has no {ATTENTION_TITLES.get(attention_type, attention_type).lower()}; "
                        f"choose --attention {' or '.join(names)}.")
    n_layers = attention_layers(trace, attention_type)
    layer = n_layers - 1 if layer is None else layer
    if not 0 <= layer < n_layers:
        raise UserError(f"Layer {layer + 1} does not exist; this model has layers 1 to {n_layers}.")
    n_heads = next(s.shape[1] for s in trace.attention_steps() if s.attention_type == attention_type)
    head = aligned_head(trace, attention_type, layer, guided) if head is None else head
    if not 0 <= head < n_heads:
        raise UserError(f"Head {head + 1} does not exist; this model has heads 1 to {n_heads}.")
    return attention_type, layer, head


def snapshot_series(spec: str, source: str, target: str = "", attention_type: str | None = None,
                    layer: int | None = None, head: int | None = None, *, start_only: bool = False,
                    truncate: bool = False, device: str = "cpu", progress: Progress | None = None) -> SnapshotSeries:
    """Run the input through every snapshot of `spec`'s model and through the final model (the last frame).
    Layer and head count from 0; None picks the Training tab's default (the last layer, and the most aligned
    head of the last snapshot: the guided one if the model had guided alignment). A model without snapshots is a
    UserError with one sentence."""
    base, _ = split_snapshot(spec)
    snaps = snapshots_of(base)
    if not snaps:
        having = [name for name in bundled_models() if snapshots_of(name)]
        hint = f" or choose one that has them ({', '.join(having)})" if having else ""
        raise UserError(f"{base} has no training snapshots; train a model with `scratchformer train --snapshots N`"
                        f"{hint}.")
    total = len(snaps) + 1
    final_trace, final_output, _ = snapshot_run(base, source, target, start_only, truncate, device)
    if progress is not None:
        progress(1, total)
    # Every frame reads the same decoder input, so their rows line up; each snapshot's own greedy output still
    # goes in its frame.
    reads = shared_decoder_input(target, final_output, start_only)
    runs: list[tuple[Trace, str, tuple[int, int] | None]] = []
    for i, snap in enumerate(snaps):
        runs.append(snapshot_run(snap.spec, source, reads, start_only, truncate, device))
        if progress is not None:
            progress(i + 2, total)
    kind, layer, head = _choose(runs[-1][0], attention_type, layer, head, guided=runs[-1][2])

    name = _display_name(base)
    series = SnapshotSeries(name, source.strip(), target.strip(), kind, layer, head,
                            reads=reads.strip() if not target.strip() else "")
    for snap, (trace, output, _) in zip(snaps, runs):
        loss, loss_name = (snap.valid_loss, "valid loss") if snap.valid_loss is not None else \
            (snap.train_loss, "train loss")  # fmt: skip
        series.frames.append(SnapshotFrame(snap.spec, snap.step, loss, loss_name, output,
                                           _map(trace, kind, layer, head, f"step {snap.step}")))
    record = training_record(base)
    step = record.get("steps") if record else None
    step = int(step) if isinstance(step, (int, float)) else None
    loss, loss_name = _final_loss(record, step)
    series.frames.append(SnapshotFrame(base, step, loss, loss_name, final_output,
                                       _map(final_trace, kind, layer, head, "final"), final=True))
    for frame in series.frames:
        frame.heatmap.title = frame.caption  # the small multiple's caption
    return series


def _display_name(base: str) -> str:
    """A bundled model's name, or the folder's name for a path."""
    return Path(base).name if ("/" in base or base.startswith((".", "~"))) else base


def _map(trace: Trace, kind: str, layer: int, head: int, which: str) -> Heatmap:
    """The chosen map of one run; its title becomes the frame's caption."""
    hm = snapshot_heatmap(trace, kind, layer, head)
    if hm is None:  # every snapshot has the final model's architecture; only a damaged folder gets here
        raise UserError(f"The {which} model has no {ATTENTION_TITLES.get(kind, kind).lower()} in layer {layer + 1}.")
    return hm


def frame_figure(series: SnapshotSeries, index: int) -> Figure:
    """One frame of the animation: the caption as the title, the decoded output under it, then the map."""
    frame = series.frames[index]
    said = "its own output" if series.reads or series.target else "output"  # the map may read another input
    output = f"{said}: {frame.output}" if frame.output else f"{said}: (nothing)"
    return Figure(f"{series.model} · {frame.caption}", [frame.heatmap], output, f"{series.where}  ·  "
                  f"{series.input_text}", columns=1, panel_titles=False)  # fmt: skip


def grid_columns(n: int) -> int:
    """Small multiples per row for n frames: one row up to GRID_ONE_ROW, else two rows."""
    return n if n <= GRID_ONE_ROW else -(-n // 2)


def grid_figure(series: SnapshotSeries, columns: int | None = None) -> Figure:
    """Every frame as a small multiple with its step and loss as caption, one shared 0…1 colour bar."""
    return Figure(series.title, [f.heatmap for f in series.frames], series.input_text,
                  "rows: queries, columns: keys; each caption: the training step and the loss recorded there",
                  columns=min(columns or grid_columns(len(series.frames)), len(series.frames)),
                  panel_titles=True)  # fmt: skip
