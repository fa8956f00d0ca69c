"""The window's export actions: `handle(window, kind)` for File › Export and the plots' right-click menu.

The window contract: current_trace(), current_bundle(), current_step(), current_batch(), current_head(),
current_view() (with current_heatmaps() and view_title()), optional current_result() (for vocab_labels),
show_message(text) and show_error(text) (or a statusBar()). Files are planned and written by
scratchformer.exporting, the same code as `scratchformer export`; pictures are drawn by render.py.

Dialogs go through the ask_* functions below so tests can answer them. Long exports run on the UI thread in
short slices driven by a QTimer (one file at a time, ~40 ms per slice) with a QProgressDialog that can cancel:
no widget is touched off the UI thread and the window keeps repainting.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QDialog, QFileDialog, QInputDialog, QMessageBox, QProgressDialog

from scratchformer.errors import UserError
from scratchformer.explain import explainer
from scratchformer.exporting import ExportRun, figure_for_view, plan_attention_maps, plan_tensors, prepare_folder
from scratchformer.exporting.files import atomic_write_bytes, check_name, conflicts
from scratchformer.exporting.index import index_paths
from scratchformer.exporting.job import ExportResult, FileTask

from .render import render_bytes, render_image, renderer

KINDS = ("view_png", "view_svg", "view_pdf", "all_attention", "tensor_current", "tensors_all", "clipboard")
IMAGE_FILTERS = {"png": "PNG image (*.png)", "svg": "SVG vector image (*.svg)", "pdf": "PDF document (*.pdf)"}
TENSOR_FILTERS = "NumPy arrays (*.npz);;CSV tables (*.csv)"
FORMAT_CHOICES = {
    "PNG images": ["png"],
    "SVG vector images": ["svg"],
    "PDF documents": ["pdf"],
    "CSV tables": ["csv"],
    "PNG + CSV + one .npz": ["png", "csv", "npz"],
}
LAST_FOLDER = "export/last_folder"
PNG_SCALE = 2.0


# ---- dialogs (replaceable in tests) -------------------------------------------------------------------------


def ask_save_path(window, caption: str, suggested: str, filters: str, checks: dict[str, bool] | None = None
                  ) -> str | None:  # fmt: skip
    """The file to save to, or None. `checks` ({label: checked}) adds a check box per entry under the file list and
    is updated with the reader's choices; the system's own dialog cannot take widgets, so then Qt's is shown."""
    if not checks:
        path, _ = QFileDialog.getSaveFileName(window, caption, suggested, filters,
                                              options=QFileDialog.Option.DontConfirmOverwrite)  # fmt: skip
        return path or None
    dialog = QFileDialog(window, caption, suggested, filters)
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setOption(QFileDialog.Option.DontConfirmOverwrite)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog)
    boxes = {label: QCheckBox(label) for label in checks}
    grid = dialog.layout()  # Qt's dialog lays itself out on a grid: the boxes go in rows of their own below it
    for label, box in boxes.items():
        box.setChecked(checks[label])
        grid.addWidget(box, grid.rowCount(), 0, 1, -1)
    if dialog.exec() != QDialog.DialogCode.Accepted or not dialog.selectedFiles():
        return None
    checks.update({label: box.isChecked() for label, box in boxes.items()})
    return dialog.selectedFiles()[0]


def ask_folder(window, caption: str, start: str) -> str | None:
    return QFileDialog.getExistingDirectory(window, caption, start) or None


def ask_formats(window) -> list[str] | None:
    names = list(FORMAT_CHOICES)
    name, ok = QInputDialog.getItem(window, "Export all attention maps", "Write each map as:", names, 0, False)
    return FORMAT_CHOICES[name] if ok else None


def confirm(window, title: str, text: str) -> bool:
    answer = QMessageBox.question(window, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
    return answer == QMessageBox.StandardButton.Yes


# ---- entry point --------------------------------------------------------------------------------------------


def handle(window, kind: str):
    """Run one export action; raises UserError (one sentence) for the window to show. Returns the export job
    for the long kinds (all_attention, tensors_all), the written path(s) otherwise, or None if cancelled."""
    if kind not in KINDS:
        raise UserError(f"Unknown export {kind!r}.")
    if window.current_trace() is None:
        raise UserError("Run the model first; there is nothing to export yet.")
    if kind.startswith("view_"):
        return export_view(window, kind.removeprefix("view_"))
    if kind == "clipboard":
        return copy_view(window)
    if kind == "all_attention":
        return export_all_attention(window)
    return export_tensors(window, all_steps=kind == "tensors_all")


def _tell(window, text: str, error: bool = False) -> None:
    method = getattr(window, "show_error" if error else "show_message", None)
    if method is not None:
        method(text)
    else:
        window.statusBar().showMessage(text, 10_000)


def _settings():
    from app.startup.settings import AppSettings

    return AppSettings().qs


def last_folder() -> str:
    folder = _settings().value(LAST_FOLDER, "")
    return str(folder) if folder and Path(str(folder)).is_dir() else str(Path.home())


def remember_folder(folder: Path) -> None:
    qs = _settings()
    qs.setValue(LAST_FOLDER, str(folder))
    qs.sync()


def _slug(text: str) -> str:
    slug = re.sub(r"[^\w.-]+", "_", text, flags=re.UNICODE).strip("_.")
    return slug[:80] or "export"


def current_figure(window):
    view = window.current_view()
    heatmaps = view.current_heatmaps()
    if not heatmaps:
        raise UserError("This view shows no plot to export; pick a step or another tab.")
    fig = figure_for_view(view.view_title(), heatmaps)
    columns = getattr(view, "figure_columns", lambda: None)()  # a view whose maps pair up, as it lays them out
    if columns and len(heatmaps) > 1:
        fig.columns = columns
    return fig


def _suggested_stem(window) -> str:
    step = window.current_step()
    view = window.current_view()
    title = view.view_title() if hasattr(view, "view_title") else ""
    stem = step.name if step is not None else ""
    name = type(view).__name__.removesuffix("View").lower()
    if name and name not in ("step", ""):
        stem = f"{stem}.{name}" if stem else name
    return _slug(stem or title)


def _checked_target(window, raw: str, allowed: tuple[str, ...], default_fmt: str) -> Path:
    """The chosen path with a known extension, its folder ready, and replacing confirmed."""
    path = Path(raw).expanduser()
    if path.suffix.lower().lstrip(".") not in allowed:
        if path.suffix and path.suffix.lower().lstrip(".") in ("png", "svg", "pdf", "npz", "csv"):
            raise UserError(f"{path.name} cannot be saved here; use one of: {', '.join('.' + a for a in allowed)}.")
        path = path.with_name(path.name + "." + default_fmt)
    check_name(path.name)
    _ready_folder(window, path.parent)
    return path


def _ready_folder(window, folder: Path) -> Path:
    if not folder.exists() and folder.parent.is_dir():
        if not confirm(window, "Create folder?", f"The folder {folder} does not exist. Create it?"):
            raise UserError(f"The folder {folder} does not exist; nothing was written.")
    return prepare_folder(folder, create=True)


def _confirm_replace(window, paths: list[Path]) -> bool:
    existing = conflicts(paths)
    if not existing:
        return True
    if len(existing) == 1:
        text = f"{existing[0].name} already exists in {existing[0].parent}. Replace it?"
    else:
        text = f"{len(existing)} of these files already exist in {existing[0].parent} (e.g. {existing[0].name}). " \
               "Replace them?"  # fmt: skip
    return confirm(window, "Replace files?", text)


# ---- the actions --------------------------------------------------------------------------------------------


def save_numbers(window, caption: str, name: str, filters: str, save,
                 allowed: tuple[str, ...] = ("csv", "json")) -> Path | None:  # fmt: skip
    """A view's numbers (CSV or JSON; a chart's panel may allow its images too) where the user picks, as the image
    exports do: the last folder suggested, the extension checked against `allowed`, replacing confirmed;
    `save(path)` writes the file. One sentence if it cannot."""
    raw = ask_save_path(window, caption, str(Path(last_folder()) / name), filters)
    if not raw:
        return None
    try:
        path = _checked_target(window, raw, allowed, Path(name).suffix.lstrip("."))
        if not _confirm_replace(window, [path]):
            return None
        save(path)
    except UserError as exc:
        window.show_error(str(exc))
        return None
    remember_folder(path.parent)
    _tell(window, f"Saved {path}.")
    return path


def current_chart(window):
    """The chart a view shows instead of heatmaps (a pyqtgraph widget: token paths), or None."""
    view = window.current_view()
    chart = getattr(view, "current_chart", None)
    return chart() if chart is not None and not view.current_heatmaps() else None


def current_picture(window):
    """fmt → bytes of the picture a view paints itself from its own plot data (the Graph view's graph), or None."""
    own = getattr(window.current_view(), "current_picture", None)
    return own() if own is not None else None


def export_view(window, fmt: str) -> Path | None:
    """The current view as PNG, SVG or PDF: what is shown, with its title, labels and colour bar (a chart that
    is not a heatmap: as it is drawn, by plot_export; a view that paints its own picture: that picture)."""
    picture = current_picture(window)
    chart = current_chart(window) if picture is None else None
    fig = current_figure(window) if chart is None and picture is None else None
    suggested = str(Path(last_folder()) / f"{_suggested_stem(window)}.{fmt}")
    filters = ";;".join([IMAGE_FILTERS[fmt]] + [f for k, f in IMAGE_FILTERS.items() if k != fmt])
    raw = ask_save_path(window, "Export the current view", suggested, filters)
    if not raw:
        return None
    path = _checked_target(window, raw, tuple(IMAGE_FILTERS), fmt)
    fmt = path.suffix.lower().lstrip(".")  # the extension decides the format
    if not _confirm_replace(window, [path]):
        return None
    if picture is not None:
        atomic_write_bytes(path, picture(fmt), overwrite=True)
        remember_folder(path.parent)
        _tell(window, f"Saved {path}.")
        return path
    if chart is not None:
        from .plot_export import save_plot

        save_plot(chart, path, window.current_view().view_title())
        remember_folder(path.parent)
        _tell(window, f"Saved {path}.")
        return path
    task = FileTask(path, fmt, {}, figure=fig)
    result = ExportRun([task], path.parent, renderer(PNG_SCALE), overwrite=True, index=False).run()
    remember_folder(path.parent)
    _tell(window, result.summary())
    return path


def copy_view(window) -> None:
    from PySide6.QtGui import QGuiApplication, QImage

    picture = current_picture(window)
    chart = current_chart(window) if picture is None else None
    if picture is not None:
        image = QImage.fromData(picture("png"), "PNG")
    elif chart is not None:
        from .plot_export import plot_image

        image = plot_image(chart, window.current_view().view_title())
    else:
        image = render_image(current_figure(window), PNG_SCALE)
    QGuiApplication.clipboard().setImage(image)
    _tell(window, f"Copied the plot to the clipboard ({image.width()} × {image.height()} pixels).")


def export_all_attention(window) -> ChunkedExport | None:
    """Every layer × head × attention type into one folder, with an index, a progress bar and cancel."""
    formats = ask_formats(window)
    if not formats:
        return None
    raw = ask_folder(window, "Export all attention maps into…", last_folder())
    if not raw:
        return None
    folder = _ready_folder(window, Path(raw).expanduser())
    trace, bundle, batch = window.current_trace(), window.current_bundle(), window.current_batch()
    explain = explainer(trace, bundle.config, batch, _vocab_labels(window)) if bundle is not None else None
    tasks = plan_attention_maps(trace, folder, formats, batch, explain)
    if not tasks:
        raise UserError("This model has no attention steps to export.")
    if not _confirm_replace(window, [t.path for t in tasks] + index_paths(folder)):
        return None
    remember_folder(folder)
    run = ExportRun(tasks, folder, renderer(PNG_SCALE), overwrite=True)
    return _start(window, run, "Exporting attention maps…")


def _vocab_labels(window):
    result = window.current_result() if hasattr(window, "current_result") else None
    if result is not None and hasattr(result, "vocab_labels"):
        return result.vocab_labels
    bundle = window.current_bundle()
    return bundle.tgt_tokenizer.token_strings if bundle is not None else None


def export_tensors(window, all_steps: bool):
    """The current step, or every step, as one .npz or as CSV tables (one per 2-D slice)."""
    trace = window.current_trace()
    step = window.current_step()
    if not all_steps and step is None:
        raise UserError("Pick a step first; there is no current tensor.")
    steps = list(trace) if all_steps else [step]
    stem = "trace" if all_steps else step.name
    raw = ask_save_path(window, "Export tensors", str(Path(last_folder()) / f"{stem}.npz"), TENSOR_FILTERS)
    if not raw:
        return None
    path = _checked_target(window, raw, ("npz", "csv"), "npz")
    tasks = plan_tensors(trace, path, steps, window.current_batch(), _vocab_labels(window))
    with_index = len(tasks) > 1
    if not _confirm_replace(window, [t.path for t in tasks] + (index_paths(path.parent) if with_index else [])):
        return None
    remember_folder(path.parent)
    run = ExportRun(tasks, path.parent, None, overwrite=True, index=with_index)
    if not all_steps:
        result = run.run()
        _tell(window, result.summary())
        return result.files
    return _start(window, run, "Exporting tensors…")


# ---- progress and cancel, on the UI thread in slices ---------------------------------------------------------


class ChunkedExport(QObject):
    """Drives an ExportRun from a zero-interval QTimer, writing files for ~40 ms per tick, with a progress
    dialog whose Cancel stops after the current file (the index then lists what was written)."""

    finished = Signal(object)  # ExportResult
    failed = Signal(str)

    SLICE_S = 0.04

    def __init__(self, window, run: ExportRun, label: str) -> None:
        super().__init__(window)
        self.window, self.run = window, run
        self.result: ExportResult | None = None
        self.error: str | None = None
        self.progress = QProgressDialog(label, "Cancel", 0, len(run), window)
        self.progress.setWindowTitle("Export")
        self.progress.setMinimumDuration(300)
        self.progress.setAutoClose(False)
        self.progress.setAutoReset(False)
        self.progress.setValue(0)
        self.timer = QTimer(self)
        self.timer.setInterval(0)
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.timer.start()

    @property
    def running(self) -> bool:
        return self.timer.isActive()

    def cancel(self) -> None:
        self.progress.cancel()

    def _tick(self) -> None:
        self._write_slice()

    def _write_slice(self) -> None:
        if self.progress.wasCanceled():
            self._end(cancelled=True)
            return
        deadline = time.perf_counter() + self.SLICE_S
        try:
            more = True
            while more and time.perf_counter() < deadline:
                more = self.run.step()
        except UserError as exc:
            self._fail(f"{exc} ({self.run.done} of {len(self.run)} files were written before that.)")
            return
        except Exception as exc:  # noqa: BLE001 - a failed export must reach the status bar, not a traceback
            self._fail(f"The export failed after {self.run.done} files: {exc}")
            return
        self.progress.setValue(self.run.done)
        if self.run.done < len(self.run):
            self.progress.setLabelText(f"Writing {self.run.tasks[self.run.done].path.name} "
                                       f"({self.run.done + 1} of {len(self.run)})…")  # fmt: skip
        if not more:
            self._end(cancelled=False)

    def _end(self, cancelled: bool) -> None:
        self.timer.stop()
        self.progress.close()
        try:
            self.result = self.run.finish(cancelled=cancelled)
        except UserError as exc:
            self._fail(str(exc))
            return
        _tell(self.window, self.result.summary())
        self.finished.emit(self.result)

    def _fail(self, text: str) -> None:
        self.timer.stop()
        self.progress.close()
        self.error = text
        _tell(self.window, text, error=True)
        self.failed.emit(text)


def _start(window, run: ExportRun, label: str) -> ChunkedExport:
    previous = getattr(window, "_export_job", None)
    if previous is not None and previous.running:
        raise UserError("An export is already running; wait for it or cancel it first.")
    job = ChunkedExport(window, run, label)
    window._export_job = job  # keep it alive while the timer runs
    job.start()
    return job


__all__ = ["KINDS", "ChunkedExport", "handle", "render_bytes"]
