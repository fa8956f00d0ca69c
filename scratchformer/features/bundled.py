"""The dictionaries a bundled model ships with (resources/models/<name>/dictionaries/), so the Features view, the
lesson on superposition and the graphs work on first launch, offline:

    dictionaries/<step>/                 an SAE of that step
    dictionaries/transcoders/<ffn step>/ a transcoder set: one per feed-forward
"""

from __future__ import annotations

from pathlib import Path

from ..loading.bundle import bundled_models, split_snapshot
from .folder import CFG


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / CFG).is_file()) if root.is_dir() else []


def bundled_saes(model: str) -> list[Path]:
    """The SAE folders shipped with bundled model `model` (a snapshot name reads its model's), [] for others."""
    home = bundled_models().get(split_snapshot(model)[0])
    return _folders(home / "dictionaries") if home is not None else []


def bundled_transcoders(model: str) -> Path | None:
    """The transcoder set shipped with bundled model `model`, or None."""
    home = bundled_models().get(split_snapshot(model)[0])
    found = home / "dictionaries" / "transcoders" if home is not None else None
    return found if found is not None and _folders(found) else None
