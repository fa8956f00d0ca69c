"""File › Export › Interactive page…: the run shown as one self-contained HTML page (scratchformer.page), the
same page `scratchformer export --format html` writes.

The file is chosen first; then a job (app/work/jobs.py) on the window's page runner builds the page — explanations,
maps, derivations made ahead, the lens, all model work — and writes it atomically, off the UI thread. When the Graph
view has built the run's attribution graph, the page carries it too, opening at the view's Nodes threshold. The
status line says what was written, or in one sentence why not.

The file dialog's check box "Live" (remembered) asks for a live page, which carries the model and reruns it in the
browser on the sentence the reader types (scratchformer.page.live.part). It is a preference: a run the page cannot
rerun (live_page_refusal: the model, a batch, dictionaries, interventions) is written as a recorded page, and the
status line gives the sentence why it is not live.
"""

from __future__ import annotations

from pathlib import Path

from scratchformer.errors import UserError
from scratchformer.page import live_page_refusal, live_text, page_data, page_graph, run_arguments, write_page

from . import actions

FILTERS = "Web page (*.html *.htm)"
LIVE_LABEL = "Live: the page carries the model and reruns it on the sentence the reader types"
LIVE_SETTING = "export/live_page"


def suggested_name(window) -> str:
    """'en-hi-the_girl_eats_an_apple.html': the model and the first words of the input."""
    request = window.current_result().request
    words = "_".join(request.source.split()[:6])
    return f"{actions._slug(Path(request.model).name)}-{actions._slug(words)}.html"


def page_job(window, path: Path, live: bool = False):
    """The job's work: build the page of the window's run (with the Graph view's graph of it, if built; live when
    asked and the run allows) and write it; returns (path, bytes, steps, whether it carries a graph, None for a
    live page or a recorded one not asked to be live, else the sentence why it is not live)."""
    result, batch = window.current_result(), window.current_batch()
    shown = next((g for v in window.views if hasattr(v, "graph_of") and (g := v.graph_of(result)) is not None), None)
    request = result.request
    # the options that repeat this run, for the page's `scratchformer derive` hint (none for windows of a text)
    run_args = "" if request.windows else run_arguments(request.model, request.source, request.target,
                                                        request.start_only)  # fmt: skip

    def work(job):
        graph = page_graph(shown[0], default=shown[1], edge_threshold=shown[2]) if shown is not None else None
        refused = live_page_refusal(result.bundle, result.trace) if live else None
        text = live_text(request.model, request.source, request.target or "") if live and refused is None else None
        data = page_data(result.bundle, result.trace, result.inputs, item=batch, run_args=run_args,
                         progress=lambda text: job.progress(text), cancelled=job.cancelled, graph=graph,
                         live=text)  # fmt: skip
        size = write_page(path, data, overwrite=True)  # replacing was confirmed in the dialog
        return path, size, len(result.trace), graph is not None, live, refused

    return work


def handle(window, kind: str = "page"):
    """The menu's entry (MainWindow.request_export): the page of the run shown; UserError (one sentence) when
    there is none yet."""
    if window.current_trace() is None:
        raise UserError("Run the model first; there is nothing to export yet.")
    return export_page(window)


def export_page(window, path: str | Path | None = None, live: bool = False):
    """Ask for the file and whether the page is live (unless `path` is given: then `live` says) and start the job;
    returns it, or None if cancelled. Raises UserError (one sentence) when the name or folder cannot be used."""
    if path is None:
        suggested = str(Path(actions.last_folder()) / suggested_name(window))
        checks = {LIVE_LABEL: _live_default()}
        raw = actions.ask_save_path(window, "Export an interactive page", suggested, FILTERS, checks)
        if not raw:
            return None
        live = checks[LIVE_LABEL]
        _remember_live(live)
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
        written, size, steps, graph, live, refused = answer
        also = ", with the Graph view's attribution graph" if graph else ""
        what = "the live page, which reruns the model in the browser," if live and refused is None else \
            "the interactive page"  # fmt: skip
        text = f"Wrote {written} ({size / 1e6:.1f} MB): {what} of {steps} steps{also}."
        actions._tell(window, text if refused is None else f"{text} It is not live: {refused}")

    def progress(text: str) -> None:
        actions._tell(window, f"Writing the interactive page {target.name}: {text}…")

    return runner.start(page_job(window, target, live), on_result=done, on_progress=progress,
                        on_error=lambda sentence: actions._tell(window, sentence, error=True),
                        doing="Writing the page")  # fmt: skip


def _live_default() -> bool:
    """Whether the Live check box starts checked: as the reader left it last time (off at first)."""
    value = actions._settings().value(LIVE_SETTING, False)
    return value in (True, "true", "1", 1)


def _remember_live(live: bool) -> None:
    qs = actions._settings()
    qs.setValue(LIVE_SETTING, bool(live))
    qs.sync()
