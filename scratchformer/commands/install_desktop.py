"""`scratchformer install-desktop [--uninstall]`: add scratchformer to the current user's application menu.

Writes a freedesktop Desktop Entry, $XDG_DATA_HOME/applications/scratchformer.desktop (XDG_DATA_HOME defaults to
~/.local/share), whose Exec= is the installed `scratchformer` executable, and installs the application icon as
$XDG_DATA_HOME/icons/hicolor/scalable/apps/scratchformer.svg. `--uninstall` removes both. Nothing here needs root,
torch or Qt.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import UserError

APP_ID = "scratchformer"  # the .desktop file's name, the icon's theme name and the Qt app's window class (app/main.py)
DESKTOP_NAME = f"{APP_ID}.desktop"
ICON_NAME = f"{APP_ID}.svg"

# Desktop Entry spec, "The Exec key": an argument with any of these characters must be double-quoted, and inside the
# quotes ", `, $ and \ are escaped with a backslash.
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_ESCAPED_IN_QUOTES = set('"`$\\')


def add_parser(sub) -> None:
    p = sub.add_parser(
        "install-desktop",
        help="add scratchformer to your desktop's application menu (a .desktop entry and an icon, for this user)",
        description="Write ~/.local/share/applications/scratchformer.desktop (under $XDG_DATA_HOME when set) "
        "pointing at this installation's scratchformer, and install its icon in the hicolor theme.",
    )
    p.add_argument("--uninstall", action="store_true", help="remove the entry and the icon again")
    # cli.main imports scratchformer.commands.<args.command>: name the module, not the hyphenated command.
    p.set_defaults(command="install_desktop")


def data_home() -> Path:
    """$XDG_DATA_HOME, or ~/.local/share when it is unset, empty or relative (the Base Directory spec)."""
    value = os.environ.get("XDG_DATA_HOME", "")
    if value and os.path.isabs(value):
        return Path(value)
    try:
        return Path.home() / ".local" / "share"
    except RuntimeError as exc:  # no HOME and no password-database entry
        raise UserError("Cannot find your home folder; set HOME or XDG_DATA_HOME.") from exc


def desktop_path(data: Path | None = None) -> Path:
    return (data or data_home()) / "applications" / DESKTOP_NAME


def icon_path(data: Path | None = None) -> Path:
    return (data or data_home()) / "icons" / "hicolor" / "scalable" / "apps" / ICON_NAME


def bundled_icon() -> Path:
    return Path(str(importlib.resources.files("resources"))) / "icons" / ICON_NAME


def command() -> list[str]:
    """How to start this installation: the `scratchformer` console script that is running (or the one next to this
    Python), else this Python with `-m scratchformer`. Absolute paths; symlinks are kept, not resolved (a venv's
    python is a symlink to the base interpreter, which would lose the venv)."""
    running = sys.argv[0] if sys.argv else ""
    candidates = []
    if os.path.basename(running) == APP_ID:
        candidates.append(os.path.abspath(running))
    if sys.executable:
        found = shutil.which(APP_ID, path=os.path.dirname(os.path.abspath(sys.executable)))
        if found:
            candidates.append(os.path.abspath(found))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return [path]
    if not sys.executable:
        raise UserError("Cannot tell which Python runs scratchformer, so the entry would have no command to run.")
    return [os.path.abspath(sys.executable), "-m", APP_ID]


def quote_exec_arg(arg: str) -> str:
    """One argument of Exec= as the Desktop Entry spec wants it: quoted when it has a reserved character, `%`
    doubled (it starts field codes), and, since Exec= is a string value, each backslash written twice."""
    if any(ch in arg for ch in "\n\r\x00"):
        raise UserError(f"The path {arg!r} has a line break in it, which a .desktop entry cannot hold.")
    arg = arg.replace("%", "%%")
    if arg and not any(ch in _RESERVED for ch in arg):
        return arg
    quoted = "".join("\\" + ch if ch in _ESCAPED_IN_QUOTES else ch for ch in arg)
    return '"' + quoted.replace("\\", "\\\\") + '"'


def _string_value(text: str) -> str:
    """A plain string value (TryExec=): backslashes doubled, control characters as the spec's escapes."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def desktop_entry(argv: list[str]) -> str:
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.1",
        "Name=scratchformer",
        "GenericName=Transformer Visualizer",
        "Comment=Step a sentence through the encoder-decoder Transformer, one operation at a time",
        f"TryExec={_string_value(argv[0])}",
        "Exec=" + " ".join(quote_exec_arg(a) for a in argv),
        f"Icon={APP_ID}",
        "Terminal=false",
        "StartupNotify=true",
        f"StartupWMClass={APP_ID}",
        "Categories=Education;Science;Development;",
        "Keywords=transformer;attention;neural network;deep learning;machine translation;",
        "",
    ])


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _refresh_menu(applications: Path) -> None:
    """Let menus that read the desktop database see the change at once; without the tool they notice anyway."""
    tool = shutil.which("update-desktop-database")
    if not tool or not applications.is_dir():
        return
    try:
        subprocess.run([tool, "-q", str(applications)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).rstrip(".").lower()


def install() -> str:
    entry, icon = desktop_path(), icon_path()
    source = bundled_icon()
    if not source.is_file():
        raise UserError(f"This installation has no icon at {source}; reinstall scratchformer.")
    argv = command()
    for target, data in ((icon, source.read_bytes()), (entry, desktop_entry(argv).encode("utf-8"))):
        try:
            _write_atomically(target, data)
        except OSError as exc:
            raise UserError(f"Could not write {target}: {_reason(exc)}.") from exc
    _refresh_menu(entry.parent)
    return f"Installed {entry} (running {' '.join(argv)}) and its icon {icon}."


def uninstall() -> str:
    entry, icon = desktop_path(), icon_path()
    removed = []
    for target in (entry, icon):
        try:
            target.unlink()
            removed.append(target)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UserError(f"Could not remove {target}: {_reason(exc)}.") from exc
    if not removed:
        return f"Nothing to remove: there is no {entry} and no {icon}."
    _refresh_menu(entry.parent)
    return f"Removed {' and '.join(str(p) for p in removed)}."


def run(args: argparse.Namespace) -> int:
    print(uninstall() if args.uninstall else install())
    return 0
