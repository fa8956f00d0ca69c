"""`scratchformer install-desktop`: a valid freedesktop entry and the icon for the current user, removed again with
--uninstall; and the application icon itself (window, About box) renders from the SVG."""

from __future__ import annotations

import configparser
import os
import re

import pytest

from scratchformer.cli import main
from scratchformer.commands import install_desktop as idesk


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    home = tmp_path / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def run(capsys, *argv):
    code = main(["install-desktop", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def parse_entry(path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def unescape_string(value: str) -> str:
    """Desktop Entry spec: \\s \\n \\t \\r \\\\ in string values."""
    return re.sub(r"\\(.)", lambda m: {"s": " ", "n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), value)


def split_exec(value: str) -> list[str]:
    """Exec= as a launcher reads it: string unescaping, then the spec's quoting rules, then %% → %."""
    text, args, i = unescape_string(value), [], 0
    while i < len(text):
        if text[i] == " ":
            i += 1
            continue
        arg = ""
        if text[i] == '"':
            i += 1
            while text[i] != '"':
                if text[i] == "\\":
                    i += 1
                arg += text[i]
                i += 1
            i += 1
        else:
            while i < len(text) and text[i] != " ":
                arg += text[i]
                i += 1
        args.append(arg.replace("%%", "%"))
    return args


def test_install_writes_a_valid_entry_and_the_icon(capsys, data_home):
    code, out, err = run(capsys)
    assert code == 0, err
    entry_file = data_home / "applications" / "scratchformer.desktop"
    icon_file = data_home / "icons" / "hicolor" / "scalable" / "apps" / "scratchformer.svg"
    assert out.count("\n") == 1 and str(entry_file) in out and err == ""
    entry = parse_entry(entry_file)
    assert entry["Type"] == "Application" and entry["Name"] == "scratchformer"
    assert entry["GenericName"] and entry["Comment"]
    assert entry["Categories"] == "Education;Science;Development;"
    assert entry["Terminal"] == "false" and entry["Icon"] == "scratchformer"
    assert entry["StartupWMClass"] == "scratchformer"
    argv = split_exec(entry["Exec"])
    assert os.path.isabs(argv[0]) and os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK)
    assert argv[1:] in ([], ["-m", "scratchformer"])
    assert icon_file.read_bytes() == idesk.bundled_icon().read_bytes()
    assert b"<svg" in icon_file.read_bytes()


def test_installing_twice_is_idempotent_and_uninstall_removes_both(capsys, data_home):
    assert run(capsys)[0] == 0
    entry_file = data_home / "applications" / "scratchformer.desktop"
    icon_file = data_home / "icons" / "hicolor" / "scalable" / "apps" / "scratchformer.svg"
    first = entry_file.read_bytes(), icon_file.read_bytes()
    assert run(capsys)[0] == 0
    assert (entry_file.read_bytes(), icon_file.read_bytes()) == first
    assert sorted(p.name for p in entry_file.parent.iterdir() if p.name.startswith(".")) == []  # no temp files
    code, out, err = run(capsys, "--uninstall")
    assert code == 0 and err == "" and out.startswith("Removed ") and out.count("\n") == 1
    assert not entry_file.exists() and not icon_file.exists()
    code, out, _ = run(capsys, "--uninstall")
    assert code == 0 and out.startswith("Nothing to remove")


def test_unwritable_data_home_is_one_sentence_and_status_2(capsys, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")  # a file where a folder must go: fails even for root, unlike chmod
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    code, out, err = run(capsys)
    assert code == 2 and out == ""
    assert err.startswith("scratchformer: Could not write ") and err.count("\n") == 1 and "Traceback" not in err


def test_default_data_home_is_local_share(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert idesk.desktop_path() == tmp_path / ".local" / "share" / "applications" / "scratchformer.desktop"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # not absolute: ignored, as the spec says
    assert idesk.data_home() == tmp_path / ".local" / "share"


@pytest.mark.parametrize("path", ["/opt/my apps/bin/scratchformer", '/x/"q"/$HOME/`a`/b\\c/100%/scratchformer'])
def test_exec_paths_with_reserved_characters_are_quoted(path):
    entry = idesk.desktop_entry([path, "-m", "scratchformer"])
    exec_line = next(line for line in entry.splitlines() if line.startswith("Exec="))
    assert exec_line.startswith('Exec="')
    assert split_exec(exec_line[len("Exec="):]) == [path, "-m", "scratchformer"]


def test_command_falls_back_to_python_dash_m(monkeypatch, tmp_path):
    monkeypatch.setattr(idesk.sys, "argv", ["-c"])
    monkeypatch.setattr(idesk.sys, "executable", str(tmp_path / "python3"))  # no scratchformer next to it
    assert idesk.command() == [str(tmp_path / "python3"), "-m", "scratchformer"]


def test_application_icon_and_about_box_show_the_svg(qapp):
    from PySide6.QtGui import QColor

    from app import main as app_main
    from app.panels.menus import ABOUT_ICON_SIZE, about_box

    assert app_main.icon_path() == idesk.bundled_icon()
    assert app_main.APP_ID == idesk.APP_ID  # the window class the entry's StartupWMClass names
    for size in (16, 64, 256):
        assert not app_main.application_icon().pixmap(size, size).isNull()
    drawn = app_main._render_svg(64).toImage()  # the QtSvg fallback for Qt builds without the svg plugin
    assert drawn.pixelColor(32, 32).alpha() == 255 and drawn.pixelColor(0, 0).alpha() == 0
    assert drawn.pixelColor(14, 14) == QColor("#ffd14a")  # the bright top-left cell of the attention map
    box = about_box(None)
    try:
        assert not box.iconPixmap().isNull() and box.iconPixmap().width() >= ABOUT_ICON_SIZE
        assert "scratchformer" in box.text()
    finally:
        box.deleteLater()
