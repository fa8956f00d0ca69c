"""Planning and running an export: the one implementation behind the window and `scratchformer export`.

A plan is a list of FileTasks (path, format, index row, and either a Figure to render or a writer for tensor
data). ExportRun checks the overwrite policy for the whole plan before anything is written, then writes one
file per `step()` so the window can interleave progress, cancel and repaint, and finally writes the index.

Overwrite policy: an export never replaces an existing file silently. If any planned file (index included)
exists, ExportRun refuses with one sentence naming how many and one example, before writing anything, unless
`overwrite=True` (the command line's --overwrite; the window asks first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..errors import UserError
from ..plotdata import VocabLabels
from ..recording.trace import Step, Trace
from .figure import Figure, single_figure, step_figure
from .files import atomic_write, atomic_write_bytes, conflicts, overwrite_refusal
from .index import index_paths, write_index
from .selection import ATTENTION, attention_maps, steps_for
from .tensors import Matrix, Slot, matrix_slots, slot_matrix, write_csv, write_npz

IMAGE_FORMATS = ("png", "svg", "pdf")
TENSOR_FORMATS = ("npz", "csv")
FORMATS = IMAGE_FORMATS + TENSOR_FORMATS
Renderer = Callable[[Figure, str], bytes]  # (figure, "png" | "svg" | "pdf") -> file contents


def parse_formats(text: str | Sequence[str]) -> list[str]:
    words = text.replace(",", " ").split() if isinstance(text, str) else [w.lower() for w in text]
    formats = []
    for w in (w.lower().lstrip(".") for w in words):
        if w not in FORMATS:
            raise UserError(f"Unknown export format {w!r}; choose from {', '.join(FORMATS)}.")
        if w not in formats:
            formats.append(w)
    if not formats:
        raise UserError(f"Name at least one export format ({', '.join(FORMATS)}).")
    return formats


@dataclass
class FileTask:
    """One file to write: a Figure to render (png/svg/pdf) or a writer for data (npz/csv)."""

    path: Path
    fmt: str
    row: dict  # the index row (see index.COLUMNS)
    figure: Figure | None = None
    write: Callable[[BinaryIO], None] | None = None
    make_figure: Callable[[], Figure] | None = None  # a figure built only when its file is written

    @property
    def is_image(self) -> bool:
        return self.figure is not None or self.make_figure is not None


Explain = Callable[[str], str]  # step name → plain-text explanation


def _step_row(step: Step, fmt: str) -> dict:
    layer = step.layer
    return {"format": fmt, "step": step.name, "kind": step.kind, "attention_type": step.attention_type or "",
            "layer": "" if layer is None else layer + 1}  # fmt: skip


def _slot_row(step: Step, slot: Slot, fmt: str) -> dict:
    row = _step_row(step, fmt)
    row.update(head=slot.head + 1 if slot.heads > 1 else "", batch_item=slot.batch + 1, rows=slot.shape[0],
               cols=slot.shape[1], row_dim=slot.row_dim, col_dim=slot.col_dim)  # fmt: skip
    return row


def _csv_task(path: Path, trace: Trace, step: Step, slot: Slot, vocab_labels: VocabLabels | None) -> FileTask:
    """One CSV of one slice, whose values are taken (recomputed if need be) only when the file is written."""
    write = lambda f: write_csv(f, slot_matrix(trace, step, slot, vocab_labels))  # noqa: E731
    return FileTask(path, "csv", _slot_row(step, slot, "csv"), write=write)


def _npz_task(path: Path, trace: Trace, steps: list[Step]) -> FileTask:
    row = {"format": "npz", "step": " ".join(s.name for s in steps), "kind": "tensors"}
    return FileTask(path, "npz", row, write=lambda f: write_npz(f, trace, steps))


def plan_attention_maps(
    trace: Trace, folder: Path | str, formats: Sequence[str], batch: int = 0, explain: Explain | None = None
) -> list[FileTask]:
    """Every layer × head × attention type as its own file per format; npz gathers all of them in one file.
    `explain` (step name → text, e.g. scratchformer.explain.explainer) fills the index's explanation column."""
    folder = Path(folder)
    tasks: list[FileTask] = []
    items = attention_maps(trace, batch)
    for item in items:  # each map is built when its file is written: the export streams, map by map
        row = {"step": item.step, "kind": "attention_weights", "attention_type": item.attention_type,
               "layer": item.layer, "head": item.head, "batch_item": batch + 1, "rows": item.shape[0],
               "cols": item.shape[1], "row_dim": item.row_dim, "col_dim": item.col_dim,
               "explanation": explain(item.step) if explain else ""}  # fmt: skip
        for fmt in formats:
            path = folder / f"{item.filename}.{fmt}"
            if fmt in IMAGE_FORMATS:
                make = lambda item=item: single_figure(item.heatmap)  # noqa: E731
                tasks.append(FileTask(path, fmt, {**row, "format": fmt}, make_figure=make))
            elif fmt == "csv":
                tasks.append(FileTask(path, fmt, {**row, "format": fmt},
                                      write=lambda f, item=item: write_csv(f, _map_matrix(item))))  # fmt: skip
    if "npz" in formats:
        tasks.append(_npz_task(folder / "attention.npz", trace, trace.attention_steps()))
    return tasks


def _map_matrix(item) -> Matrix:
    hm = item.heatmap
    rows = hm.row_labels or [f"{hm.row_dim} {i}" for i in range(hm.shape[0])]  # a run without token labels
    cols = hm.col_labels or [f"{hm.col_dim} {i}" for i in range(hm.shape[1])]
    return Matrix("", hm.values, rows, cols, hm.row_dim, hm.col_dim, item.head, item.batch)


def plan_export(
    trace: Trace,
    folder: Path | str,
    formats: Sequence[str],
    steps: str | Sequence[str] = ATTENTION,
    batch: int = 0,
    vocab_labels: VocabLabels | None = None,
    explain: Explain | None = None,
) -> list[FileTask]:
    """`--steps attention`: one file per attention map; otherwise one picture per step (all heads side by
    side), one CSV per 2-D slice, and one tensors.npz with every chosen step. `explain` as in
    plan_attention_maps."""
    words = steps.split() if isinstance(steps, str) else list(steps)
    if words == [ATTENTION]:
        return plan_attention_maps(trace, folder, formats, batch, explain)
    folder = Path(folder)
    chosen = steps_for(trace, words)
    tasks: list[FileTask] = []
    for step in chosen:
        said = {"explanation": explain(step.name)} if explain else {}
        for fmt in formats:
            if fmt in IMAGE_FORMATS:
                make = lambda step=step: step_figure(trace, step, batch, vocab_labels)  # noqa: E731
                row = {**_step_row(step, fmt), "batch_item": batch + 1, **said}
                tasks.append(FileTask(folder / f"{step.name}.{fmt}", fmt, row, make_figure=make))
            elif fmt == "csv":
                for slot in matrix_slots(step, batch):
                    task = _csv_task(folder / f"{step.name}{slot.suffix}.csv", trace, step, slot, vocab_labels)
                    task.row.update(said)
                    tasks.append(task)
    if "npz" in formats:
        tasks.append(_npz_task(folder / "tensors.npz", trace, chosen))
    return tasks


def plan_tensors(
    trace: Trace,
    path: Path | str,
    steps: Sequence[Step],
    batch: int = 0,
    vocab_labels: VocabLabels | None = None,
) -> list[FileTask]:
    """The window's tensor export to a chosen file: .npz holds every given step; .csv writes one file per
    2-D slice, named after the chosen file ("x.csv" → "x.head1.csv", "x.encoder.0.self_attn.q.head1.csv")."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt == "npz":
        return [_npz_task(path, trace, list(steps))]
    if fmt != "csv":
        given = path.suffix or "a file without extension"
        raise UserError(f"Tensors can be saved as .npz or .csv, not {given}; choose one of those.")
    tasks = []
    for step in steps:
        for slot in matrix_slots(step, batch):
            middle = (f".{step.name}" if len(steps) > 1 else "") + slot.suffix
            target = path if not middle else path.with_name(f"{path.stem}{middle}.csv")
            tasks.append(_csv_task(target, trace, step, slot, vocab_labels))
    return tasks


@dataclass
class ExportResult:
    folder: Path
    files: list[Path] = field(default_factory=list)
    index: list[Path] = field(default_factory=list)
    bytes: int = 0
    planned: int = 0
    cancelled: bool = False

    def summary(self) -> str:
        size = f"{self.bytes / 1e6:.1f} MB" if self.bytes >= 1e5 else f"{self.bytes / 1e3:.1f} kB"
        what = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        where = "" if len(self.files) == 1 else f" to {self.folder}"
        head = f"Wrote {what}"
        if self.cancelled:
            head = f"Cancelled after {len(self.files)} of {self.planned} files"
        index = f"; index: {', '.join(p.name for p in self.index)}" if self.index else ""
        return f"{head} ({size}){where}{index}."


class ExportRun:
    """Writes a plan file by file. Checks the overwrite policy up front (raises UserError), so a refused
    export writes nothing; an error later leaves the files already written and no partial file."""

    def __init__(
        self,
        tasks: list[FileTask],
        folder: Path | str,
        renderer: Renderer | None = None,
        overwrite: bool = False,
        index: bool = True,
        overwrite_hint: str = "add --overwrite to replace them or choose another folder",
    ) -> None:
        self.tasks, self.folder = tasks, Path(folder)
        self.renderer, self.overwrite, self.with_index = renderer, overwrite, index
        if renderer is None and any(t.is_image for t in tasks):
            raise UserError("Image formats need the Qt renderer (app.export.render); it was not given.")
        targets = [t.path for t in tasks] + (index_paths(self.folder) if index else [])
        if len(set(targets)) != len(targets):
            raise UserError("Two files of this export would have the same name; choose fewer or other steps.")
        existing = conflicts(targets)
        if existing and not overwrite:
            raise UserError(overwrite_refusal(existing, self.folder, overwrite_hint))
        self.result = ExportResult(self.folder, planned=len(tasks))
        self._next = 0
        self._rows: list[dict] = []

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def done(self) -> int:
        return self._next

    def step(self) -> bool:
        """Write the next file; True while more remain."""
        if self._next >= len(self.tasks):
            return False
        task = self.tasks[self._next]
        if task.is_image:
            figure = task.figure if task.figure is not None else task.make_figure()
            data = self.renderer(figure, task.fmt)  # type: ignore[misc]
            size = atomic_write_bytes(task.path, data, self.overwrite)
        else:
            size = atomic_write(task.path, task.write, self.overwrite)  # type: ignore[arg-type]
        self._next += 1
        self.result.files.append(task.path)
        self.result.bytes += size
        self._rows.append({**task.row, "file": _relative(task.path, self.folder)})
        return self._next < len(self.tasks)

    def finish(self, cancelled: bool = False) -> ExportResult:
        """Write the index of what was written (also after a cancel) and return the result."""
        self.result.cancelled = cancelled
        if self.with_index and self._rows:
            self.result.index = write_index(self.folder, self._rows, overwrite=True)
            self.result.bytes += sum(p.stat().st_size for p in self.result.index)
        return self.result

    def run(self, progress: Callable[[int, int, Path], bool] | None = None) -> ExportResult:
        """Write everything; `progress(done, total, path)` returning False cancels."""
        while self._next < len(self.tasks):
            self.step()
            last = self.tasks[self._next - 1].path
            if progress is not None and progress(self._next, len(self.tasks), last) is False:
                return self.finish(cancelled=self._next < len(self.tasks))
        return self.finish()


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return str(path)
