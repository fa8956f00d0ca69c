"""`scratchformer export` — being built (see its issue); registered so the command line lists it."""

from __future__ import annotations

from ..errors import UserError


def add_parser(sub) -> None:
    sub.add_parser("export", help="(not available yet)")


def run(args) -> int:
    raise UserError("'scratchformer export' is not available in this build yet.")
