"""Test-wide settings: headless Qt, deterministic torch, few threads on the 2-core CI machine."""

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

# Under pytest-xdist (`-n 2`, scripts/test.sh) the cores are shared among the workers: one thread each.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1) // WORKERS))


@pytest.fixture
def model_never_opened(monkeypatch):
    """Any command that opens a model fails the test. Every command module is imported first: one imported for
    the first time while the stand-in is in place would bind it for good (`from .common import open_model`) and
    fail a later test that runs that command for real."""
    import scratchformer.commands.common as common
    from scratchformer.cli import build_parser

    build_parser()  # imports every command's module
    monkeypatch.setattr(common, "open_model", lambda args: pytest.fail("the model was opened"))


def pytest_collection_modifyitems(config, items):
    """SCRATCHFORMER_TEST_ORDER=reverse runs the collected tests backwards, =N (a number) shuffled with seed N, so
    that a test which only passes after another has set something up (the Qt application, a cache) shows itself
    (tests/test_test_order.py runs the Qt tests so)."""
    order = os.environ.get("SCRATCHFORMER_TEST_ORDER")
    if order == "reverse":
        items.reverse()
    elif order:
        import random

        random.Random(int(order)).shuffle(items)


# A hang's Python stacks (pytest-timeout's dump) show where Python waited, not what held it there: a C++ destructor
# run by the garbage collector, a lock inside Qt. So shortly before pytest-timeout ends a test, the native stack of
# every thread is written too (gdb, where it is installed and may attach), to stderr and to NATIVE_DUMP_DIR.
NATIVE_DUMP_AFTER_S = float(os.environ.get("SCRATCHFORMER_NATIVE_DUMP_AFTER_S", "240"))
NATIVE_DUMP_DIR = os.environ.get("SCRATCHFORMER_HANG_DIR", "/tmp/scratchformer-hangs")


def _dump_native_stacks(test_id: str) -> None:
    import shutil
    import subprocess
    import tempfile
    import time

    gdb = shutil.which("gdb")
    if gdb is None:
        sys.__stderr__.write(f"\n{test_id} seems to hang; install gdb to have its native stacks written.\n")
        return
    # gdb writes into a file, never a pipe: while it holds this process stopped, nothing here could read a pipe,
    # and gdb would wait on a full one for ever (seen: the hang it was to report, held a second time by gdb)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        try:
            subprocess.run([gdb, "-p", str(os.getpid()), "-batch", "-iex", "set debuginfod enabled off",
                            "-ex", "thread apply all bt"], stdout=out, stderr=subprocess.STDOUT,
                           timeout=180)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            sys.__stderr__.write(f"\n{test_id} seems to hang; gdb could not read its stacks: {exc}\n")
            return
        out.seek(0)
        text = f"{test_id} seems to hang; the native stacks of its threads:\n{out.read()}\n"
    sys.__stderr__.write("\n" + text)
    try:
        os.makedirs(NATIVE_DUMP_DIR, exist_ok=True)
        path = os.path.join(NATIVE_DUMP_DIR, f"{os.getpid()}-{time.time_ns()}.txt")
        with open(path + ".part", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".part", path)  # whole or not at all
    except OSError:
        pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import threading

    watch = threading.Timer(NATIVE_DUMP_AFTER_S, _dump_native_stacks, args=(item.nodeid,))
    watch.daemon = True
    watch.start()
    try:
        yield
    finally:
        watch.cancel()
    # Between tests is a safe point for the collector: once a window was built in this process, automatic collection
    # is off (app/work/gc_guard.py) and only a running event loop collects; tests that spin none collect here.
    guard = sys.modules.get("app.work.gc_guard")
    if guard is not None and guard.collecting_at_safe_points():
        guard.collect_due()
