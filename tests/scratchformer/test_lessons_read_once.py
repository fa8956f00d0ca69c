"""The bundled lessons are parsed once and kept while their files stay the same (the window asks for them on a
lesson's last page, for its "Next lesson ›"), and read again when a file changes."""

from __future__ import annotations

import os
import shutil

import scratchformer.lessons.loading as loading
from scratchformer.lessons import bundled_lessons, lessons_dir


def test_bundled_lessons_are_parsed_once_and_again_after_a_file_changes(tmp_path, monkeypatch):
    folder = tmp_path / "lessons"
    folder.mkdir()
    files = sorted(lessons_dir().glob("*.toml"))[:2]
    for f in files:
        shutil.copy(f, folder / f.name)
    monkeypatch.setattr(loading, "lessons_dir", lambda: folder)
    parsed = []
    real = loading.load_lesson
    monkeypatch.setattr(loading, "load_lesson", lambda p: parsed.append(p.name) or real(p))

    first = bundled_lessons()
    again = bundled_lessons()
    assert [x.id for x in first] == [x.id for x in again] and len(first) == 2
    assert parsed == [f.name for f in files]  # the second call parsed nothing
    again.pop()  # a caller's list is its own
    assert len(bundled_lessons()) == 2

    edited = folder / files[0].name
    text = edited.read_text(encoding="utf-8")
    edited.write_text(text + "\n# edited by a teacher\n", encoding="utf-8")
    stat = edited.stat()
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later change time, whatever the clock
    parsed.clear()
    assert [x.id for x in bundled_lessons()] == [x.id for x in first]
    assert parsed == [f.name for f in files]  # read again
