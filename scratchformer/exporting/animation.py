"""Writing a snapshot series (exporting/snapshots.py): an animated GIF or APNG and a grid of small multiples.

The frames are pictures drawn by the window's painter (app/export/render.py) and handed in as RGB arrays of one
size; this module only assembles them with Pillow, so it needs no Qt. `plan_snapshot_export` turns a series and
a list of formats into FileTasks for ExportRun, the same writer as every other export: atomic files, the
overwrite policy checked before anything is written, and an index of what was written.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..errors import UserError
from .figure import Figure
from .job import IMAGE_FORMATS, FileTask
from .snapshots import SnapshotSeries, frame_figure, grid_figure

ANIMATION_FORMATS = ("gif", "apng")
SNAPSHOT_FORMATS = ANIMATION_FORMATS + IMAGE_FORMATS  # png, svg and pdf are the grid
FRAME_MS = 1200  # how long each snapshot stays on screen
LAST_FRAME_MS = 4000  # the final model is held longer before the animation starts again
FramesRenderer = Callable[[list[Figure]], list[np.ndarray]]  # figures → (H, W, 3) uint8 frames of one size


def parse_snapshot_formats(text: str | Sequence[str]) -> list[str]:
    """"gif,apng,png" → ["gif", "apng", "png"]; an unknown word is one sentence."""
    words = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    formats: list[str] = []
    for w in (w.lower().lstrip(".") for w in words):
        if w not in SNAPSHOT_FORMATS:
            raise UserError(f"Unknown snapshot export format {w!r}; choose from {', '.join(SNAPSHOT_FORMATS)} "
                            "(gif and apng are animations, png, svg and pdf the grid).")
        if w not in formats:
            formats.append(w)
    if not formats:
        raise UserError(f"Name at least one export format ({', '.join(SNAPSHOT_FORMATS)}).")
    return formats


def durations(n_frames: int) -> list[int]:
    """Milliseconds per frame: FRAME_MS each, the last one LAST_FRAME_MS."""
    return [FRAME_MS] * (n_frames - 1) + [LAST_FRAME_MS] if n_frames else []


def encode_animation(frames: list[np.ndarray], fmt: str, frame_ms: list[int] | None = None) -> bytes:
    """An animated GIF or APNG (looping forever) of RGB frames of one size, (H, W, 3) uint8 each."""
    from PIL import Image

    if not frames:
        raise ValueError("an animation needs at least one frame")
    if len({f.shape for f in frames}) != 1:
        raise ValueError("all frames of an animation must have the same size")
    images = [Image.fromarray(np.ascontiguousarray(f, dtype=np.uint8), "RGB") for f in frames]
    ms = frame_ms or durations(len(images))
    out = io.BytesIO()
    first, rest = images[0], images[1:]
    if fmt == "gif":  # each frame gets its own 256-colour palette (the colour maps and anti-aliased text fit)
        first.save(out, format="GIF", save_all=True, append_images=rest, duration=ms, loop=0, disposal=1)
    elif fmt == "apng":  # full colour, every frame whole (no blending with the one before)
        first.save(out, format="PNG", save_all=True, append_images=rest, duration=ms, loop=0, disposal=0,
                   blend=0, default_image=False)  # fmt: skip
    else:
        raise ValueError(f"not an animation format: {fmt!r}")
    return out.getvalue()


def animation_figures(series: SnapshotSeries) -> list[Figure]:
    return [frame_figure(series, i) for i in range(len(series.frames))]


def _row(series: SnapshotSeries, fmt: str, kind: str) -> dict:
    first = series.frames[0].heatmap
    return {"format": fmt, "step": " ".join(f"{f.step}" for f in series.frames), "kind": kind,
            "attention_type": series.attention_type, "layer": series.layer + 1, "head": series.head + 1,
            "batch_item": 1, "rows": first.shape[0], "cols": first.shape[1], "row_dim": first.row_dim,
            "col_dim": first.col_dim,
            "explanation": f"{series.title}: {len(series.frames)} frames (each snapshot, then the final model) for "
                           f"{series.input_text}"}  # fmt: skip


def plan_snapshot_export(series: SnapshotSeries, folder: Path | str, formats: Sequence[str],
                         frames_renderer: FramesRenderer | None = None, stem: str | None = None) -> list[FileTask]:
    """One file per format in `folder`: STEM.gif / STEM.apng (the animation, frames drawn once for both) and
    STEM-grid.png/.svg/.pdf (the small multiples). ExportRun writes them (its renderer draws the grid)."""
    folder, stem = Path(folder), stem or series.stem()
    cache: dict[str, list[np.ndarray]] = {}

    def frames() -> list[np.ndarray]:
        if "frames" not in cache:
            if frames_renderer is None:
                raise UserError("Animations need the Qt renderer (app.export.render); it was not given.")
            cache["frames"] = frames_renderer(animation_figures(series))
        return cache["frames"]

    tasks: list[FileTask] = []
    for fmt in formats:
        if fmt in ANIMATION_FORMATS:
            write = lambda f, fmt=fmt: f.write(encode_animation(frames(), fmt))  # noqa: E731
            tasks.append(FileTask(folder / f"{stem}.{fmt}", fmt, _row(series, fmt, "snapshot_animation"),
                                  write=write))
        elif fmt in IMAGE_FORMATS:
            tasks.append(FileTask(folder / f"{stem}-grid.{fmt}", fmt, _row(series, fmt, "snapshot_grid"),
                                  figure=grid_figure(series)))
        else:
            raise UserError(f"Unknown snapshot export format {fmt!r}; choose from {', '.join(SNAPSHOT_FORMATS)}.")
    return tasks
