"""File › Export › Interactive page…: the run shown as one self-contained HTML page (scratchformer.page), the
same page `scratchformer export --format html` writes.

The file is chosen first; then a job (app/work/jobs.py) on the window's page runner builds the page — explanations,
maps, derivations made ahead, the lens, all model work — and writes it atomically, off the UI thread. When the Graph
view has built the run's attribution graph, the page carries it too, opening at the view's Nodes threshold. The
status line says what was written, or in one sentence why not.
"""

from __future__ import annotations

from pathlib import Path

from scratchformer.errors import UserError
from scratchformer.page import page_data, page_graph, run_arguments, write_page

from . import actions

FILTERS = "Web page (*.html *.htm)"


def suggested_name(window) -> str:
    """'en-hi-the_girl_eats_an_apple.html': the model and the first words of the input."""
    request = window.current_result().request
    words = "_".join(request.source.split()[:6])
    return f"{actions._slug(Path(request.model).name)}-{actions._slug(words)}.html"


def page_job(window, path: Path):
    """The job's work: build the page of the window's run (with the Graph view's graph of it, if built) and write
    it; returns (path, bytes, steps, whether it carries a graph)."""
    result, batch = window.current_result(), window.current_batch()
    shown = next((g for v in window.views if hasattr(v, "graph_of") and (g := v.graph_of(result)) is not None), None)
    request = result.request
    # the options that repeat this run, for the page's `scratchformer derive` hint (none for windows of a text)
    run_args = "" if request.windows else run_arguments(request.model, request.source, request.target,
                                                        request.start_only)  # fmt: skip

    def work(job):
        graph = page_graph(shown[0], default=shown[1]) if shown is not None else None
        data = page_data(result.bundle, result.trace, result.inputs, item=batch, run_args=run_args,
                         progress=lambda text: job.progress(text), cancelled=job.cancelled, graph=graph)  # fmt: skip
        size = write_page(path, data, overwrite=True)  # replacing was confirmed in the dialog
        return path, size, len(result.trace), graph is not None

    return work


def handle(window, kind: str = "page"):
    """The menu's entry (MainWindow.request_export): the page of the run shown; UserError (one sentence) when
    there is none yet."""
    if window.current_trace() is None:
        raise UserError("Run the model first; there is nothing to export yet.")
    return export_page(window)


def export_page(window, path: str | Path | None = None):
    """Ask for the file (unless `path` is given) and start the job; returns it, or None if cancelled. Raises
    UserError (one sentence) when the name or folder cannot be used."""
    if path is None:
        suggested = str(Path(actions.last_folder()) / suggested_name(window))
        raw = actions.ask_save_path(window, "Export an interactive page", suggested, FILTERS)
        if not raw:
            return None
        target = actions._checked_target(window, raw, ("html", "htm"), "html")
        if not actions._confirm_replace(window, [target]):
            return None
        actions.remember_folder(target.parent)
    else:
        target = Path(path).expanduser()
        if target.suffix.lower() not in (".html", ".htm"):
            raise UserError(f"{target.name} cannot be saved here; use .html.")
    runner = window.page_jobs
    if runner.busy():
        raise UserError("A page is already being written; wait for it to finish.")
    actions._tell(window, f"Writing the interactive page {target.name}…")

    def done(answer) -> None:
        written, size, steps, graph = answer
        also = ", with the Graph view's attribution graph" if graph else ""
        actions._tell(window, f"Wrote {written} ({size / 1e6:.1f} MB): the interactive page of {steps} steps{also}.")

    def progress(text: str) -> None:
        actions._tell(window, f"Writing the interactive page {target.name}: {text}…")

    return runner.start(page_job(window, target), on_result=done, on_progress=progress,
                        on_error=lambda sentence: actions._tell(window, sentence, error=True),
                        doing="Writing the page")  # fmt: skip
