"""`scratchformer` command line: no arguments opens the window; subcommands work headless.

Each subcommand lives in scratchformer/commands/<name>.py with `add_parser(subparsers)` and `run(args) -> int`.
User mistakes raise UserError and end here as one sentence on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .analyses import ANALYSES
from .errors import UserError

COMMANDS = ("gui", "trace", "export", "train", "translate", "evaluate", "features", "graph", "install_desktop")


def command_modules() -> dict[str, str]:
    """Subcommand → module: the commands, then every analysis of the registry (scratchformer.analyses)."""
    return {**{name: f"scratchformer.commands.{name}" for name in COMMANDS}, **ANALYSES}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scratchformer",
        description="Step a sentence through the 2017 encoder-decoder Transformer. With no command, opens the window.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in command_modules().values():
        importlib.import_module(module).add_parser(sub)
    return parser


def gui_parser() -> argparse.ArgumentParser:
    """A parser of the `gui` command alone: opening the window imports no other command (and so no PyTorch)
    before the window shows (app/startup/launch.py loads the model library behind it)."""
    parser = argparse.ArgumentParser(prog="scratchformer")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    importlib.import_module(command_modules()["gui"]).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    opens_window = not argv or (argv[0] == "gui" and not {"-h", "--help"} & set(argv))
    parser = gui_parser() if opens_window else build_parser()
    args = parser.parse_args(argv or ["gui"])
    module = importlib.import_module(command_modules()[args.command.replace("-", "_")])
    try:
        return int(module.run(args) or 0)
    except UserError as exc:
        print(f"scratchformer: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scratchformer: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
