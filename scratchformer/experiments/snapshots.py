"""Training snapshots for the teacher-forcing experiment: which snapshots a loaded model has, and the snapshots
themselves, loaded once and kept (a few small models; the window asks again on every slider move)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from ..loading.bundle import Snapshot, load_model, snapshots_of, split_snapshot

KEEP = 8  # loaded snapshots kept
_loaded: OrderedDict[tuple[str, str], object] = OrderedDict()
_lock = threading.Lock()


def trained_spec(bundle) -> str | None:
    """The spec of the trained model a bundle is (or is a snapshot of): a bundled name or a folder; None for
    presets and imported models."""
    if bundle.origin == "bundled":
        return split_snapshot(bundle.name)[0]
    if bundle.origin != "preset" and Path(bundle.origin).is_dir():
        return bundle.origin
    return None


def snapshots_for(bundle) -> list[Snapshot]:
    spec = trained_spec(bundle)
    return snapshots_of(spec) if spec is not None else []


def is_snapshot(bundle) -> bool:
    return "@step-" in bundle.name


def load(spec: str, device) -> object:
    """load_model(spec) on this device, kept for later calls."""
    key = (spec, str(device))
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
    bundle = load_model(spec, device)
    with _lock:
        _loaded[key] = bundle
        while len(_loaded) > KEEP:
            _loaded.popitem(last=False)
    return bundle
