"""Launch to a window, the way a user launches (`scratchformer` → scratchformer.cli.main(["gui"])).

Run as a script, it prints one line of JSON: the seconds from argv[1] (a time.time() taken just before this
process was started) to the launch window shown and to the main window shown, and whether PyTorch had been imported
when the first window showed; the main window closes as soon as it shows. `measure(n)` runs it in n fresh
processes (bench_stalls.py, bench_gui.py); tests/app/test_launch.py runs it once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(n: int) -> list[dict]:
    """n fresh launches (in this environment); a failed one is reported on stderr and left out."""
    out = []
    for _ in range(n):
        proc = subprocess.run([sys.executable, __file__, str(time.time())], capture_output=True, text=True,
                              env=os.environ, cwd=ROOT)
        try:
            out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (IndexError, json.JSONDecodeError):
            print(f"launch probe failed: {proc.stderr.strip()[-400:]}", file=sys.stderr)
    return out


def probe(t0: float) -> dict:
    from PySide6.QtCore import QEvent, QObject, QTimer

    from app.main import _application

    qt_app = _application()  # run_gui reuses this application
    marks: dict[str, float] = {}
    torch_loaded: list[bool] = []

    class Shown(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 (Qt name)
            if event.type() == QEvent.Type.Show and obj.isWidgetType() and obj.isWindow():
                name = type(obj).__name__
                if not marks:
                    torch_loaded.append("torch" in sys.modules)
                marks.setdefault(name, time.time() - t0)
                if name == "MainWindow":
                    QTimer.singleShot(0, qt_app.quit)
            return False

    shown = Shown()
    qt_app.installEventFilter(shown)
    from scratchformer.cli import main

    status = main(["gui"])
    return {"launch_window_s": marks.get("LaunchWindow"), "main_window_s": marks.get("MainWindow"),
            "torch_at_first_window": torch_loaded[0] if torch_loaded else None, "status": status}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(json.dumps(probe(float(sys.argv[1]) if len(sys.argv) > 1 else time.time())))
