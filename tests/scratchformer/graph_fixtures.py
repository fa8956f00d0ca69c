"""Fixtures the attribution-graph tests share (import them into a test module to use them there)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """PyTorch on one thread for the module, as build_graph runs a small model (two threads on a busy two-core
    machine are many times slower for its many small products)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
