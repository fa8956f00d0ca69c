"""benchmarks/bench_cuda.py, the prepared GPU check, on a machine without one: its CPU dry run (--device cpu
--small) passes, a CUDA device that is not there is one sentence and exit status 2, and its comparisons do see a
difference (a dry run alone only ever meets zeros)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_cuda.py"
CHECKS = ["open en-hi", "greedy en-hi (KV cache)", "trace en-hi", "sweep en-hi", "open qwen", "trace qwen",
          "sweep qwen", "training step reverse", "page export en-hi"]  # fmt: skip


def _bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_cuda", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_cuda", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess:
    # this worker's share of the cores (tests/conftest.py), not all of them
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads()), "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=280)  # fmt: skip


def test_the_cpu_dry_run_passes_every_check():
    proc = _run("--device", "cpu", "--small")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1].startswith("PASS: all 9 checks on cpu agree"), lines[-1]
    rows = {line[:24].strip(): line for line in lines if line[:24].strip() in CHECKS}
    assert list(rows) == CHECKS, proc.stdout
    assert all("  yes  " in row and "every one equal" in row or "greedy" in name for name, row in rows.items())


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run for real")
def test_cuda_asked_for_without_one_is_one_sentence():
    proc = _run("--device", "cuda")
    assert proc.returncode == 2 and proc.stdout == ""
    message = proc.stderr.strip()
    assert "\n" not in message and message.endswith(".") and "no CUDA device" in message and "--device cpu" in message


def test_the_comparisons_see_a_difference(monkeypatch):
    bench = _bench(monkeypatch)
    a = np.array([[1.0, -np.inf, 4.0]])
    assert bench.relative_difference(a, a) == 0.0
    assert bench.relative_difference(a + [[0.004, 0, 0]], a) == pytest.approx(0.001)  # of the largest |value|, 4
    assert bench.relative_difference(np.array([[1.0, 0.0, 4.0]]), a) == float("inf")  # −∞ lost
    assert bench.relative_difference(a[:, :2], a) == float("inf")  # another shape
    assert bench.worst_of({"x": (a, a), "y": (a * 1.01, a)}) == (pytest.approx(0.01), "y")
    cpu = torch.device("cpu")
    ref, dev = bench.Side(cpu), bench.Side(cpu)
    with torch.no_grad():  # one weight of the second copy off by 1 %: the first step that reads it says so
        dev.get("en-hi").model.decoder[1].ffn.w_2.weight.mul_(1.01)
    inputs = ref.get("en-hi").prepare("the girl eats an apple", "लड़की सेब खाती है")
    row = bench.compare_traces("trace en-hi", "en-hi", ref, dev, inputs)
    assert not row.ok and row.worst > 1e-3
    assert bench.compare_opened("open en-hi", "en-hi", ref, dev).where == "decoder.1.ffn.w_2.weight"
