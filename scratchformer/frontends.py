"""What the model core asks of a front end without depending on it: the Qt renderer that draws PNG, SVG, PDF and
animation frames, and the window itself. The front end (the `app` package of this project) registers them as
entry points in the group "scratchformer.frontend" (pyproject.toml); the core finds them by name and never imports
the front end's package, so `scratchformer/` runs, and its npz/csv exports work, with no GUI installed.

    renderer(scale)  → the renderer ExportRun calls for image formats (its Qt application made if needed)
    frames(scale)    → the renderer of animation frames
    gui(args)        → opens the window (`scratchformer gui`), returns the exit status
"""

from __future__ import annotations

from importlib.metadata import entry_points

from .errors import UserError

GROUP = "scratchformer.frontend"


def load(name: str, what: str):
    """The front end's `name` entry point, or one sentence saying that `what` needs the window's package."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        raise UserError(f"{what} needs scratchformer's window package (app), which is not installed here; install "
                        "scratchformer with its GUI (pip install .) or export npz and csv only.")  # fmt: skip
    return found[0].load()
