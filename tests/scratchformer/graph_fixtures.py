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


def assert_exact(result, every: int = 7, tolerance: float = 1e-4) -> None:
    """The graph is exact where it claims to be: each target's incoming edges plus its bias are its value in the
    model (a feature's pre-activation, the logit), and removing a node (every `every`-th) moves the replacement's
    logit in the linear regime by what influence.total_effects says."""
    from scratchformer.graph.attribution import logit_without
    from scratchformer.graph.influence import total_effects

    g, rep = result.graph, result.replacement_model
    targets = [*range(g.n_features), g.logit_index]
    sums = g.adjacency.sum(dim=1) + g.bias
    assert float((sums[targets] - g.real[targets]).abs().max()) < tolerance
    logit, effects = float(g.totals[g.logit_index]), total_effects(g)
    for i in range(0, g.logit_index, every):
        assert abs(logit - logit_without(rep, g, i, linear=True) - float(effects[i])) < tolerance
