"""`torchrun --nproc-per-node 2 -m scratchformer sweep --pairs FILE`: two ranks (gloo on the CPU) each sweep half
the pairs' chunks (and, with --dictionary, half the pairs' feature sweeps), and rank 0 prints exactly the JSON one
process prints; the other rank prints nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from scratchformer.analyses.sweep_pairs import _layer_groups
from scratchformer.cli import main
from scratchformer.features.bundled import bundled_saes
from scratchformer.loading.bundle import load_model
from scratchformer.patching import components
from scratchformer.patching.batched import bytes_per_item
from scratchformer.patching.many import MAX_ITEMS, recorded_bytes
from scratchformer.patching.pair import make_pair
from tests.scratchformer.test_distributed import ENV, _free_port
from tests.scratchformer.test_sweep_pairs import PAIRS, write


def one_pair_a_chunk(bundle) -> str:
    """A --memory-budget (GB) with room for one full pass but for the recorded runs of one pair only: every
    chunk is one pair, so the two ranks share four chunks."""
    first = bundle.prepare_run(PAIRS[0]["source"], "", start_only=True)
    pair = make_pair(bundle, first, bundle.prepare("the boy eats an apple"))
    t, s = pair.n_positions("tgt"), pair.n_positions("src")
    every = (components.head_components(bundle.model, t, s, False) + components.residual_components(bundle.model, t, s)
             + components.mlp_components(bundle.model, t, s))  # fmt: skip
    largest = max(_layer_groups(pair, every))
    one_pass = min(MAX_ITEMS, largest * min(len(PAIRS), MAX_ITEMS // largest))  # the items of a full pass
    weights = sum(p.numel() * p.element_size() for p in bundle.model.parameters())
    budget = weights + one_pass * bytes_per_item(pair) + 1.5 * recorded_bytes(pair)
    return repr(budget / 2**30)


def test_two_ranks_print_exactly_what_one_process_prints(tmp_path, capsys):
    f = write(tmp_path / "p.jsonl", PAIRS)
    args = ["sweep", "--model", "en-hi", "--pairs", f, "--start-only", "--per-pair", "--json",
            "--memory-budget", one_pair_a_chunk(load_model("en-hi")), "--dictionary",
            str(bundled_saes("en-hi")[0])]  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank runs (OMP_NUM_THREADS=1): bit for bit needs the same sums' order
    try:
        assert main(args) == 0
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    one = json.loads(captured.out)
    assert any("Patched 1 pair at a time" in n for n in one["notes"])  # four chunks: two for each rank
    assert one["features"] and max(r["pairs_differing"] for r in one["features"]) > 1
    cmd = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node=2", f"--master-port={_free_port()}",
           "-m", "scratchformer", *args]  # fmt: skip
    done = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1  # rank 1 prints nothing
    two = json.loads(lines[0])
    assert two == one  # every mean, std and per-pair effect bit for bit
    assert done.stderr.count("note: Patched 1 pair at a time") == 1  # rank 0 alone says it
