"""The model core never depends on the GUI: no module of scratchformer/ imports app/ or Qt, not even inside a
function; what it needs of the front end (the image renderer, the window) it finds through the entry points the
front end registers (scratchformer/frontends.py), and without them it says so in one sentence."""

import ast
from pathlib import Path

import pytest

from scratchformer import frontends
from scratchformer.errors import UserError

CORE = Path(__file__).resolve().parents[2] / "scratchformer"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args:
            if isinstance(node.args[0], ast.Constant):
                names.add(str(node.args[0].value))
    return names


def test_no_core_module_imports_the_gui_even_inside_a_function():
    offenders = {str(p.relative_to(CORE)): sorted(n for n in imported_modules(p)
                                                  if n.split(".")[0] in ("app", "PySide6", "pyqtgraph"))
                 for p in CORE.rglob("*.py")}  # fmt: skip
    assert not {k: v for k, v in offenders.items() if v}


def test_the_front_end_registers_what_the_core_asks_for():
    from app.export.render import headless_renderer
    from app.main import run_gui

    assert frontends.load("renderer", "x") is headless_renderer and frontends.load("gui", "x") is run_gui
    assert callable(frontends.load("frames", "x"))


def test_without_a_front_end_the_core_says_so_in_one_sentence(monkeypatch):
    monkeypatch.setattr(frontends, "entry_points", lambda group: [])
    with pytest.raises(UserError, match=r"^Drawing PNG needs scratchformer's window package \(app\), which is not "):
        frontends.load("renderer", "Drawing PNG")
