"""Exporting plots and tensors, headless and Qt-free: what to export, file names, safe writes, index files.

The window (app/export/) and `scratchformer export` both go through `plan_export` / `ExportRun`; only the
drawing of image formats (PNG, SVG, PDF) lives in app/export/render.py and is passed in as
a `renderer` callable.
"""

from .figure import Figure, figure_for_view, single_figure, step_figure
from .files import atomic_write, check_name, explain_os_error, prepare_folder
from .job import ExportResult, ExportRun, FileTask, plan_attention_maps, plan_export, plan_tensors
from .selection import ExportItem, attention_maps, steps_for

__all__ = [
    "ExportItem", "ExportResult", "ExportRun", "FileTask", "Figure", "atomic_write", "attention_maps",
    "check_name", "explain_os_error", "figure_for_view", "plan_attention_maps", "plan_export", "plan_tensors",
    "prepare_folder", "single_figure", "step_figure", "steps_for",
]  # fmt: skip
