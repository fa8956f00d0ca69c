"""A sweep's cell replayed as a whole traced run (scratchformer.patching.replay): the corrupted inputs with the
cell's single Patch give, read from that run's own logits, the effect the batched sweep put on the map — for a
head, a head at one position, a residual point and a feed-forward output, of an encoder-decoder and a decoder-only
model."""

from __future__ import annotations

import pytest
import torch

from scratchformer.analyses.sweep import sweep_pair
from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import intervene
from scratchformer.patching.pair import make_pair
from scratchformer.patching.replay import cell_patch, corrupted_inputs, logits_step, metric_from_logits
from scratchformer.plotdata.sweep import head_maps, point_maps
from tests.scratchformer.test_derive import FAMILIES, family_bundle


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def replayed(bundle, pair, clean, corrupt, cell) -> float:
    """The effect of one cell measured on a full traced run of the corrupted inputs with the cell's Patch."""
    with intervene(bundle.model, [cell_patch(pair, cell)]):
        _, trace = bundle.run(corrupted_inputs(bundle, clean, corrupt), keep_output=False)
    m = metric_from_logits(pair.metric, trace[logits_step(trace)].tensor[0, -1])
    return float(pair.effect(torch.tensor([m]))[0])


def check(bundle, clean, corrupt, per_position, least_gap=1.0):
    pair = make_pair(bundle, clean, corrupt)
    sweep = sweep_pair(pair, per_position=per_position)
    maps = head_maps(sweep) + point_maps(sweep, "resid") + point_maps(sweep, "mlp")
    checked = 0
    for hm in maps:  # the largest cell of each map, and its first filled cell
        values = torch.tensor(hm.values).nan_to_num(0.0)
        r, c = divmod(int(values.abs().argmax()), values.shape[1])
        first = next((i, j) for i, row in enumerate(hm.extra["cells"]) for j, cell in enumerate(row) if cell)
        for i, j in {(r, c), first}:
            cell = hm.extra["cells"][i][j]
            if cell is None:
                continue
            assert abs(replayed(bundle, pair, clean, corrupt, cell) - float(hm.values[i, j])) <= 1e-4, cell
            checked += 1
    assert checked >= len(maps) and abs(pair.gap) > least_gap  # every map checked; the corruption matters


def test_an_encoder_decoders_cells_replay_as_their_patched_runs(en_hi):
    clean = en_hi.prepare_run("the girl eats an apple", start_only=True)
    check(en_hi, clean, en_hi.prepare("the boy eats an apple"), per_position=False)
    check(en_hi, clean, en_hi.prepare("the boy eats an apple"), per_position=True)


def test_a_decoder_only_models_cells_replay_as_their_patched_runs(en_hi):
    bundle = family_bundle(en_hi, FAMILIES["gpt2_like"])
    clean = bundle.prepare_run("वह लड़की किताब पढ़ती है")
    check(bundle, clean, bundle.prepare("वह लड़का किताब पढ़ती है"), per_position=True, least_gap=0.01)  # random weights
