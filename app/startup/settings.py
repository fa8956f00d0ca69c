"""What the window remembers between runs: last inputs, model, device, detail level and layout (QSettings)."""

from __future__ import annotations

import os

from PySide6.QtCore import QByteArray, QSettings

DEFAULTS = {
    "source": "",  # empty: the first launch fills in the model's first example
    "target": "",
    "start_only": False,
    "history": [],  # "source\ttarget" of the last inputs run, most recent first
    "model": "",
    "device": "cpu",
    "detail": "all",
    "speed_ms": 800,
    "tab": 0,
    "opened_models": [],
}


class AppSettings:
    """Typed access to QSettings. SCRATCHFORMER_SETTINGS=<file.ini> (or `path`) keeps tests away from the user's."""

    def __init__(self, path: str | None = None) -> None:
        path = path or os.environ.get("SCRATCHFORMER_SETTINGS")
        if path:
            self.qs = QSettings(path, QSettings.Format.IniFormat)
        else:
            self.qs = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "scratchformer", "scratchformer")

    def get(self, key: str):
        default = DEFAULTS.get(key)
        value = self.qs.value(key, default)
        if isinstance(default, bool):
            return str(value).lower() in ("1", "true", "yes")
        if isinstance(default, int):
            try:
                return int(value)
            except (TypeError, ValueError):
                return default
        if isinstance(default, list):
            if value in (None, ""):
                return []
            return [str(v) for v in (value if isinstance(value, list) else [value])]
        return "" if value is None else str(value)

    def set(self, key: str, value) -> None:
        self.qs.setValue(key, value)

    def get_bytes(self, key: str) -> QByteArray | None:
        value = self.qs.value(key)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def sync(self) -> None:
        self.qs.sync()
