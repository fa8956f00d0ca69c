"""Finding and reading lesson files: the bundled ones in resources/lessons/ (in file-name order, which is the
curriculum's order) and any other TOML file a teacher gives."""

from __future__ import annotations

import sys
from pathlib import Path

from .schema import Lesson, LessonError, read_lesson

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with tomli, tomllib's original
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None


def lessons_dir() -> Path:
    from ..loading.bundle import resources_dir

    return resources_dir() / "lessons"


def lesson_files() -> list[Path]:
    folder = lessons_dir()
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


def shown_path(path: Path) -> str:
    """The file as an error names it: relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_lesson(path: str | Path) -> Lesson:
    """Read and check one lesson file; LessonError (file, page, problem) when it is wrong."""
    path = Path(path).expanduser()
    name = shown_path(path)
    if tomllib is None:
        raise LessonError(name, 0, "reading lessons on Python 3.10 needs the tomli package (pip install tomli)")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LessonError(name, 0, "there is no such file") from None
    except OSError as exc:
        raise LessonError(name, 0, f"it cannot be read ({exc.strerror or exc})") from None
    try:
        table = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise LessonError(name, 0, "it is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise LessonError(name, 0, f"it is not valid TOML: {exc}") from None
    return read_lesson(table, name)


_READ: dict[tuple, list[Lesson]] = {}  # the bundled lessons as last read, by their files' names and change times


def bundled_lessons() -> list[Lesson]:
    """Every bundled lesson, in order (a broken bundled file raises: `lesson check` and the tests catch it).
    Read once and kept while no file changes: parsing them all takes ~40 ms, and the window asks on a page turn
    (the last page's "Next lesson ›")."""
    files = lesson_files()
    key = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    if key not in _READ:
        _READ.clear()
        _READ[key] = [load_lesson(p) for p in files]
    return list(_READ[key])


def find_lesson(spec: str) -> Lesson:
    """A lesson by its id (bundled) or by a file path."""
    path = Path(spec).expanduser()
    if spec.endswith(".toml") or path.is_file():
        return load_lesson(path)
    for p in lesson_files():
        lesson = load_lesson(p)
        if lesson.id == spec:
            return lesson
    from ..errors import UserError

    ids = ", ".join(load_lesson(p).id for p in lesson_files())
    raise UserError(f"There is no lesson {spec!r}; the lessons are {ids or 'none'} (or give a .toml file).")
