"""Writing files safely: atomic replace, checked names and folders, and OS errors as one sentence for people.

A file is first written to a hidden temporary file in the same folder, flushed and fsync'ed, then renamed over
the target with os.replace (atomic on POSIX and Windows). A failure at any point removes the temporary file,
so the target is either the old file, the complete new file, or absent; never half-written.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..errors import UserError

_WINDOWS_RESERVED = set('<>:"|?*\\')
MAX_NAME_BYTES = 255  # ext4, APFS, NTFS (in UTF-16 units there, close enough)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp makes 0600


def check_name(name: str) -> None:
    """Raise UserError unless `name` can be a file name on this system."""
    why = ""
    if not name or name.strip() in ("", ".", ".."):
        why = "it is empty"
    elif "/" in name or "\0" in name:
        why = "it contains '/' or a NUL character"
    elif any(ord(ch) < 32 for ch in name):
        why = "it contains a control character"
    elif os.name == "nt" and (set(name) & _WINDOWS_RESERVED or name.endswith((" ", "."))):
        why = 'Windows does not allow < > : " | ? * \\ or a trailing dot or space'
    elif len(name.encode("utf-8")) > MAX_NAME_BYTES:
        why = f"it is longer than {MAX_NAME_BYTES} bytes"
    if why:
        raise UserError(f"{name!r} is not a valid file name: {why}; choose another name.")


def explain_os_error(exc: OSError, path: Path | str) -> str:
    """One sentence for people about why writing `path` failed."""
    path = Path(path)
    folder = path.parent
    code = exc.errno
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return f"The disk is full; nothing was written to {path}."
    if code == errno.EROFS:
        return f"The folder {folder} is on a read-only disk; choose another folder."
    if code in (errno.EACCES, errno.EPERM):
        return f"Cannot write to the folder {folder} (permission denied); choose another folder."
    if code == errno.ENOENT:
        return f"The folder {folder} does not exist; create it or choose another folder."
    if code == errno.ENOTDIR:
        return f"{folder} is not a folder; choose a folder to export into."
    if code == errno.EISDIR:
        return f"{path} is a folder; choose a file name."
    if code in (errno.ENAMETOOLONG, errno.EINVAL, getattr(errno, "EILSEQ", -1)):
        return f"{path.name!r} is not a valid file name on this disk; choose a shorter or plainer name."
    return f"Could not write {path}: {exc.strerror or exc}."


def prepare_folder(folder: Path | str, create: bool = True) -> Path:
    """The folder to export into, checked to be writable; a missing one is created when its parent exists."""
    folder = Path(folder).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise UserError(f"{folder} is a file, not a folder; choose a folder to export into.")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UserError(explain_os_error(PermissionError(13, "denied"), folder / "x"))
        return folder
    parent = folder.parent
    if not create:
        raise UserError(f"The folder {folder} does not exist; create it or choose another folder.")
    if not parent.is_dir():
        raise UserError(f"Neither the folder {folder} nor its parent {parent} exists; create them first.")
    try:
        folder.mkdir()
    except FileExistsError:
        pass
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # the parent exists (checked above) but takes no new folders, e.g. /proc
            raise UserError(f"Cannot create a folder in {parent}; choose another folder.") from None
        raise UserError(explain_os_error(exc, folder)) from None  # about the parent, where mkdir failed
    return folder


def atomic_write(path: Path | str, write: Callable[[BinaryIO], None], overwrite: bool = False) -> int:
    """Write `path` through `write(file)` atomically; returns its size in bytes. Refuses to replace a file
    unless `overwrite`. OS errors become a UserError with one sentence; other exceptions pass through, and in
    every case no temporary or partial file is left behind."""
    path = Path(path)
    check_name(path.name)
    if not overwrite and path.exists():
        raise UserError(f"{path} already exists; choose another name or allow replacing it.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".part", dir=path.parent)
    except OSError as exc:
        raise UserError(explain_os_error(exc, path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise UserError(explain_os_error(exc, path)) from None
        raise
    _fsync_folder(path.parent)
    return size


def atomic_write_bytes(path: Path | str, data: bytes, overwrite: bool = False) -> int:
    return atomic_write(path, lambda f: f.write(data), overwrite)


def write_csv(path: Path | str, text: str) -> Path:
    """Write a view's numbers as CSV at `path` (".csv" added when it has another suffix), replacing a file there;
    the path written. One sentence (UserError) if it cannot."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        path = path.with_name(path.name + ".csv")
    atomic_write_bytes(path, text.encode("utf-8"), overwrite=True)
    return path


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def conflicts(paths: list[Path]) -> list[Path]:
    """The paths that already exist (the export would replace them)."""
    return [p for p in paths if p.exists()]


def overwrite_refusal(existing: list[Path], folder: Path, hint: str) -> str:
    """'out/ already holds 3 of the files …' — the overwrite policy's one sentence."""
    n = len(existing)
    example = existing[0].name
    what = "a file" if n == 1 else f"{n} of the files"
    return f"The folder {folder} already holds {what} this export would write ({example}); {hint}."
