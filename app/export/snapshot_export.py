"""The Training tab's Export…: the map chosen there (attention type, layer, head) over every snapshot and the
final model, saved as an animation (GIF, APNG) or one grid of small multiples (PNG, SVG, PDF).

The file is chosen first (the extension decides what is written); then a job (app/work/jobs.py) runs the input through
every snapshot (scratchformer.exporting.snapshots, the same data as `scratchformer export --snapshots`). When it
finishes, the frames or the grid are drawn and the one file is written atomically on the UI thread, and the
window's status line says what was written (or, in one sentence, why not).
"""

from __future__ import annotations

from pathlib import Path

from scratchformer.errors import UserError
from scratchformer.exporting.animation import ANIMATION_FORMATS, SNAPSHOT_FORMATS, plan_snapshot_export
from scratchformer.exporting.job import ExportRun
from scratchformer.exporting.snapshots import SnapshotSeries, snapshot_series

from . import actions
from .render import frames_renderer, renderer

FILTERS = {
    "gif": "Animated GIF (*.gif)",
    "apng": "Animated PNG (*.apng)",
    "png": "Grid of small multiples, PNG image (*.png)",
    "svg": "Grid of small multiples, SVG vector image (*.svg)",
    "pdf": "Grid of small multiples, PDF document (*.pdf)",
}


class SnapshotExport:
    """One export of the Training tab: `series` is the job's work (off the UI thread, app/work/jobs.py), `write` its
    result's handler on the UI thread, `fail` its error's. Both end in the window's status line."""

    def __init__(self, window, path: Path, choice: dict) -> None:
        self.window, self.path, self.choice = window, path, choice

    def series(self, job) -> SnapshotSeries:
        return snapshot_series(**self.choice, truncate=True)

    def write(self, series: SnapshotSeries) -> None:
        """Draw the frames or the grid and write the one file (Qt draws only on the UI thread)."""
        try:
            fmt = self.path.suffix.lower().lstrip(".")
            task = plan_snapshot_export(series, self.path.parent, [fmt], frames_renderer(actions.PNG_SCALE))[0]
            task.path = self.path  # the name chosen in the dialog
            result = ExportRun([task], self.path.parent, renderer(actions.PNG_SCALE), overwrite=True,
                               index=False).run()  # fmt: skip
        except UserError as exc:
            self.fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - a failed export reaches the status line, not a traceback
            self.fail(f"The export failed: {exc}")
        else:
            what = "animation" if fmt in ANIMATION_FORMATS else "grid"
            actions._tell(self.window, f"{result.summary()[:-1]} — the {what} of {series.where}, "
                                       f"{len(series.frames)} frames.")  # fmt: skip

    def fail(self, sentence: str) -> None:
        actions._tell(self.window, sentence or "The export failed.", error=True)


def choice_of(view) -> dict:
    """What the Training tab shows now, as snapshot_series' arguments (layer and head from 0)."""
    base = getattr(view, "_base", None)
    snapshot_input = getattr(view, "_input", None)
    if not base or not view.current_snapshot() or snapshot_input is None or view.empty.isVisible():
        raise UserError("Run a model that has training snapshots first; there is nothing to export yet.")
    source, target = snapshot_input
    return {"spec": base, "source": source, "target": target, "attention_type": view.type_box.currentData(),
            "layer": max(0, view.layer_box.currentIndex()), "head": max(0, view.head_box.currentIndex())}


def plan_export(view, path: str | Path | None = None) -> SnapshotExport | None:
    """Ask for the file (unless `path` is given), then return the export, for the view to run; None if cancelled.
    Raises UserError (one sentence) when there is nothing to export or the name cannot be used."""
    window = view.main
    choice = choice_of(view)
    if path is None:
        stem = SnapshotSeries(Path(choice["spec"]).name, "", "", choice["attention_type"] or "", choice["layer"],
                              choice["head"]).stem()  # fmt: skip
        suggested = str(Path(actions.last_folder()) / f"{stem}.gif")
        raw = actions.ask_save_path(window, "Export the snapshots", suggested, ";;".join(FILTERS.values()))
        if not raw:
            return None
        path = actions._checked_target(window, raw, SNAPSHOT_FORMATS, "gif")
        if not actions._confirm_replace(window, [path]):
            return None
        actions.remember_folder(path.parent)
    else:
        path = Path(path)
        if path.suffix.lower().lstrip(".") not in SNAPSHOT_FORMATS:
            raise UserError(f"{path.name} cannot be saved here; use one of: "
                            f"{', '.join('.' + f for f in SNAPSHOT_FORMATS)}.")  # fmt: skip
    actions._tell(window, f"Running the input through every snapshot for {path.name}…")
    return SnapshotExport(window, path, choice)
