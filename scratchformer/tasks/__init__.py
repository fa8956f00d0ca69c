"""Training tasks for the bundled models: toy English→Hindi translation and copy/reverse/sort.

Every task yields `Pair`s (source, target, gold alignment) and has deterministic, disjoint splits:
``load_task_splits("en-hi")`` → {"train": [...], "valid": [...], "test": [...]}.
"""

from __future__ import annotations

from .splits import Pair, read_pairs_tsv, read_tsv, write_tsv

TASKS = ("en-hi", "copy", "reverse", "sort")

__all__ = [
    "TASKS", "Pair", "generate_pairs", "generate_task", "load_task_splits", "make_splits", "make_task_splits",
    "read_pairs_tsv", "read_tsv", "write_tsv",
]  # fmt: skip


def load_task_splits(name: str, seed: int = 0) -> dict[str, list[Pair]]:
    """The train/valid/test splits of task `name` (one of TASKS) with default sizes."""
    if name == "en-hi":
        from .en_hi import make_splits

        return make_splits(seed)
    if name in TASKS:
        from .algorithmic import make_task_splits

        return make_task_splits(name, seed)
    raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")


def __getattr__(name: str):
    # Imported lazily so that `python -m scratchformer.tasks.en_hi` does not import the module twice.
    if name in ("generate_pairs", "make_splits"):
        from . import en_hi

        return getattr(en_hi, name)
    if name in ("generate_task", "make_task_splits"):
        from . import algorithmic

        return getattr(algorithmic, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
