"""The suite's guard against hangs (pytest-timeout, configured in pyproject.toml): a test that never ends fails
with a readable dump of every thread's stack, so CI says where it hung instead of running until it is killed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_hanging_test_fails_with_the_stack_of_every_thread(tmp_path):
    (tmp_path / "test_hangs.py").write_text(
        "import threading\n\n"
        "def test_waits_for_a_signal_that_never_comes():\n"
        "    threading.Event().wait()\n",
        encoding="utf-8",
    )
    # the project's configuration (rootdir and pyproject.toml) with a 3-second limit instead of the suite's
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                          "-c", str(ROOT / "pyproject.toml"), "--timeout", "3", str(tmp_path / "test_hangs.py")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "Timeout" in out and "test_waits_for_a_signal_that_never_comes" in out
    assert "threading.Event().wait()" in out  # the line it hung on, from the stack dump


def test_the_project_sets_a_limit_for_every_test():
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert 60 <= options["timeout"] <= 600 and options["timeout_method"] == "thread"
    assert options["faulthandler_timeout"] < options["timeout"]


def test_a_hanging_test_also_writes_the_native_stacks_of_its_threads(tmp_path):
    import shutil

    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed here, so no native stacks can be written")
    hangs = tmp_path / "hangs"
    (tmp_path / "test_hangs.py").write_text(
        "import glob, time\n\n"
        "def test_sleeps_in_c():\n"
        f"    while not glob.glob({str(hangs / '*.txt')!r}):  # until the dump is out\n"
        "        time.sleep(0.2)\n",
        encoding="utf-8",
    )
    env = dict(os.environ, SCRATCHFORMER_NATIVE_DUMP_AFTER_S="1", SCRATCHFORMER_HANG_DIR=str(hangs))
    # the suite's conftest (which arms the watch) as a plugin: the test file lies outside tests/
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-p",
                          "tests.conftest", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"),
                          "--timeout", "200", str(tmp_path / "test_hangs.py")],
                         capture_output=True, text=True, timeout=400, cwd=tmp_path, env=env)  # fmt: skip
    dumps = list(hangs.glob("*.txt"))
    assert run.returncode == 0 and len(dumps) == 1, run.stdout[-2000:] + run.stderr[-2000:]
    text = dumps[0].read_text(encoding="utf-8")
    assert "test_sleeps_in_c seems to hang" in text
    assert "sleep" in text or "select" in text  # the C call it waits in (time.sleep)
