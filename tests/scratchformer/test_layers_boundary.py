"""scratchformer/ is the headless core: importing any of it never loads Qt."""

import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import scratchformer

QT = re.compile(r"^\s*(from|import)\s+(PySide6|PyQt5|PyQt6|pyqtgraph|qtpy|shiboken6)\b", re.M)


def test_no_module_in_the_core_imports_qt():
    root = Path(scratchformer.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py") if QT.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_importing_every_core_module_loads_no_qt():
    names = [m.name for m in pkgutil.walk_packages(scratchformer.__path__, "scratchformer.")
             if not m.name.endswith("__main__")]  # __main__ runs the program
    assert "scratchformer.transformer.model" in names
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'shiboken6', 'app')]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
