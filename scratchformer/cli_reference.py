"""docs/cli-reference.md, written from the parser itself: every command with its one line of help, its
description and a table of its options (flags, what they take, default, help). A test keeps the file equal to
what the code says, so the reference never drifts from `--help`.

    python -m scratchformer.cli_reference            # rewrite docs/cli-reference.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli import build_parser

PATH = Path(__file__).resolve().parent.parent / "docs" / "cli-reference.md"
HEADER = """# Command-line reference

Every command and option of `scratchformer`, as `scratchformer COMMAND --help` prints them. This page is written
from the parser (`python -m scratchformer.cli_reference`), and a test fails when it differs from the code.
[cli.md](cli.md) explains what the commands are for, with examples.
"""


def _cell(text: str) -> str:
    """One Markdown table cell: the text on one line, '|' escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _takes(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    return f"`{action.metavar or action.dest.upper()}`".replace("|", "\\|")


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, "", [], argparse.SUPPRESS) or action.required:
        return ""
    return f"`{action.default}`"


def command_parsers() -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Command name → (its line in `scratchformer --help`, its parser), in the order the help lists them."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = {choice.dest: choice.help for choice in sub._choices_actions}
    return {name: (lines.get(name) or "", command) for name, command in sub.choices.items()}


def reference() -> str:
    """The whole page."""
    out = [HEADER]
    for name, (line, command) in command_parsers().items():
        line = _cell(line[:1].upper() + line[1:])
        out += [f"## `scratchformer {name}`", "", line if line.endswith(".") else line + "."]
        if command.description:
            out += ["", " ".join(command.description.split())]
        rows = [a for a in command._actions if not isinstance(a, argparse._HelpAction)]
        if rows:
            out += ["", "| option | takes | default | what it does |", "|---|---|---|---|"]
            for a in rows:
                flags = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.dest}` (positional)"
                required = " (required)" if a.required and a.option_strings else ""
                out.append(f"| {flags}{required} | {_takes(a)} | {_default(a)} | {_cell(a.help or '')} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    PATH.write_text(reference(), encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
