"""The index of an export: one row per file written, as index.csv and index.json side by side."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .files import atomic_write_bytes

COLUMNS = (
    "file", "format", "step", "kind", "attention_type", "layer", "head", "batch_item", "rows", "cols",
    "row_dim", "col_dim", "explanation",
)  # fmt: skip
INDEX_NAMES = ("index.csv", "index.json")


def index_paths(folder: Path) -> list[Path]:
    return [folder / n for n in INDEX_NAMES]


def write_index(folder: Path, rows: list[dict], overwrite: bool = True) -> list[Path]:
    """Write index.csv and index.json; layer, head and batch_item count from 1 (empty if not applicable)."""
    clean = [{c: row.get(c, "") for c in COLUMNS} for row in rows]
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(clean)
    csv_path, json_path = index_paths(folder)
    atomic_write_bytes(csv_path, text.getvalue().encode("utf-8"), overwrite)
    payload = json.dumps({"columns": list(COLUMNS), "files": clean}, ensure_ascii=False, indent=1)
    atomic_write_bytes(json_path, payload.encode("utf-8"), overwrite)
    return [csv_path, json_path]
