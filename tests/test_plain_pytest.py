"""`pytest tests/app/…` run as the plain command from anywhere (not only `python -m pytest` from the checkout)
collects the tests that import the shared fixtures of tests/ (`from tests.app.conftest import …`)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_plain_pytest_command_collects_tests_that_import_shared_fixtures(tmp_path):
    pytest_bin = Path(sys.executable).with_name("pytest")
    target = REPO / "tests" / "app" / "test_neuron_window.py"  # imports tests.app.conftest and tests.app.…
    done = subprocess.run([str(pytest_bin), "--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO),
                           "-c", str(REPO / "pyproject.toml"), str(target)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "No module named 'tests'" not in done.stdout and "3 tests collected" in done.stdout
