"""`.venv/bin/pytest tests/app/…`, the plain command (not only `python -m pytest`), collects the tests that import
the shared fixtures of tests/ (`from tests.app.conftest import …`) instead of failing with "No module named
'tests'"."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_plain_pytest_command_collects_tests_that_import_shared_fixtures():
    pytest_bin = Path(sys.executable).with_name("pytest")
    target = Path("tests") / "app" / "test_lost_text_window.py"  # imports tests.app.conftest
    defined = len(re.findall(r"^def test_", (REPO / target).read_text(encoding="utf-8"), flags=re.M))
    done = subprocess.run([str(pytest_bin), "--collect-only", "-q", "-p", "no:cacheprovider", str(target)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "No module named 'tests'" not in done.stdout
    assert f"{defined} test{'s' if defined != 1 else ''} collected" in done.stdout
