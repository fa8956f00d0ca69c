"""Test-wide settings: headless Qt, deterministic torch, few threads on the 2-core CI machine."""

import os

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
