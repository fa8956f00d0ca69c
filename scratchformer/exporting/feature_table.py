"""This run's strongest features per token as a CSV table: one row per token (plotdata.feature_cards.token_table)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..features.cards import TokenFeatures
from ..plotdata.feature_cards import token_table
from .files import write_csv


def token_features_csv(rows: list[TokenFeatures]) -> str:
    """The table's text: a header, then position, token and each strongest feature with its activation."""
    header, body = token_table(rows)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(body)
    return out.getvalue()


def write_token_features(path: str | Path, rows: list[TokenFeatures]) -> Path:
    """Write the table at `path` (".csv" added for another suffix); the path written."""
    return write_csv(path, token_features_csv(rows))
