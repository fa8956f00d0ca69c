"""Training on several processes (torch.distributed, DDP, gloo on the CPU) gives what one process gives.

A tiny copy-task TSV and a tiny model (d_model 16, 1 + 1 layers, dropout 0). Runs of 12 Adam steps, crossing
an epoch boundary (so validation's all-reduce runs too): one plain process; two ranks started with
torch.multiprocessing.spawn through the same command line torchrun runs (the environment torchrun sets up);
two ranks stopped after 5 steps and resumed with two ranks by the real `torchrun`, and with one plain process.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from scratchformer.cli import main
from scratchformer.loading.checkpoint import load_checkpoint

STEPS, STOP_AT = 12, 5
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--dropout", "0", "--warmup", "4",
        "--seed", "3", "--threads", "1", "--quiet"]
ENV = {"OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, argv: list[str], log: str | None, hang_rank: int | None,
          dying_rank: int | None = None) -> None:
    """One rank, in the environment torchrun gives its workers; runs the train command as torchrun would.
    `hang_rank` freezes in its third step; `dying_rank` dies after training, before writing its last files."""
    os.environ.update(ENV, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_PORT=str(port),
                      LOCAL_WORLD_SIZE=str(world))
    import scratchformer.training.trainer as trainer_module

    if log:  # record which rank writes files
        real_save, real_state = trainer_module.save_checkpoint, trainer_module.Trainer.save_state

        def note(what):
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{rank} {what}\n")

        def save_checkpoint(*a, **k):
            note("checkpoint")
            return real_save(*a, **k)

        def save_state(self, *a, **k):
            note("state")
            return real_state(self, *a, **k)

        trainer_module.save_checkpoint, trainer_module.Trainer.save_state = save_checkpoint, save_state
        real_final = trainer_module._write_final

        def write_final(*a, **k):  # rank 0's last files, slow on purpose: the other rank must wait for them
            time.sleep(1.0)
            result = real_final(*a, **k)
            note("final")
            return result

        trainer_module._write_final = write_final
    if hang_rank == rank:  # this rank stops answering in its third step, as if its machine froze
        real_step = trainer_module.Trainer.train_step

        def train_step(self, *a, **k):
            if self.step == 2:
                time.sleep(600)
            return real_step(self, *a, **k)

        trainer_module.Trainer.train_step = train_step
    if dying_rank == rank:
        trainer_module._write_final = lambda *a, **k: os._exit(3)
    code = main(["train", *argv])
    if log:
        note("left")
    if code:
        sys.exit(code)


def _six_pairs(path: Path) -> Path:
    """A copy-task TSV of six three-letter sentences: a run of a few steps."""
    path.write_text("".join(f"{s}\t{s}\n" for s in ("a b c", "b c a", "c a b", "a a b", "b b a", "c c b")),
                    encoding="utf-8")
    return path


def _spawn(world: int, argv: list[str], log: str | None = None) -> None:
    mp.spawn(_rank, args=(world, _free_port(), argv, log, None), nprocs=world, join=True)


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "resume" / "model.safetensors"))  # the weights where training stopped


def _state(out: Path) -> dict:
    return json.loads((out / "resume" / "trainer_state.json").read_text(encoding="utf-8"))


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _without_key_bias(weights: dict, d_model: int = 16) -> dict:
    """The weights with the key projections' biases zeroed.

    The key bias b_k is the one parameter whose gradient is exactly zero in exact arithmetic: it adds q_i·b_k to
    every score of row i, and softmax ignores a constant added to a row. So all it ever receives is rounding
    noise, which Adam (ε = 1e-9) scales up to full learning-rate steps. Any other order of summation — two ranks,
    or one process with another batch size — draws other noise, so b_k differs between such runs by up to a few
    learning rates, while it changes no output (checked by _outputs). Every other weight must agree.
    """
    out = dict(weights)
    for name, value in weights.items():
        if name.endswith("self_attn.qkv.bias"):
            out[name] = torch.cat([value[:d_model], torch.zeros(d_model), value[2 * d_model :]])
        elif name.endswith("cross_attn.kv_proj.bias"):
            out[name] = torch.cat([torch.zeros(d_model), value[d_model:]])
    return out


def _outputs(out: Path) -> torch.Tensor:
    """Log-probabilities of the model where training stopped, on a fixed random batch."""
    model, _, _ = load_checkpoint(out / "resume")
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, model.config.src_vocab_size, (4, 7), generator=g)
    tgt = torch.randint(3, model.config.tgt_vocab_size, (4, 6), generator=g)
    with torch.no_grad():
        return model(src, tgt).log_softmax(-1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    rng = random.Random(0)
    lines = {" ".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 7))) for _ in range(80)}
    tsv = root / "copy.tsv"
    tsv.write_text("".join(f"{s}\t{s}\n" for s in sorted(lines)), encoding="utf-8")
    data = ["--data", str(tsv), "--epochs", "5", "--batch-tokens", "48", *TINY]
    t0, threads = time.perf_counter(), torch.get_num_threads()
    assert "WORLD_SIZE" not in os.environ
    assert main(["train", *data, "--out", str(root / "one"), "--max-steps", str(STEPS)]) == 0
    _spawn(2, [*data, "--out", str(root / "two"), "--max-steps", str(STEPS)], log=str(root / "writes.log"))
    _spawn(2, [*data, "--out", str(root / "part"), "--max-steps", str(STOP_AT)])
    for name in ("resumed-two", "resumed-one"):
        shutil.copytree(root / "part", root / name)
    # the real torchrun (its agent, its environment) resumes with two processes ...
    port = _free_port()
    cmd = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node=2", f"--master-port={port}",
           "-m", "scratchformer", "train", "--resume", str(root / "resumed-two"), "--max-steps", str(STEPS),
           "--quiet"]
    done = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # ... and a plain process resumes the two-process run alone
    assert main(["train", "--resume", str(root / "resumed-one"), "--max-steps", str(STEPS), "--quiet"]) == 0
    torch.set_num_threads(threads)  # the in-process runs set --threads 1 for this whole process
    print(f"distributed runs: {time.perf_counter() - t0:.1f} s")
    return root, done


def test_two_ranks_with_half_the_batch_each_equal_one_process_with_all_of_it(runs):
    root, _ = runs
    one, two = _state(root / "one"), _state(root / "two")
    assert one["step"] == two["step"] == STEPS and one["epoch"] == two["epoch"] >= 1  # validated at least once
    assert _max_diff(_without_key_bias(_weights(root / "one")), _without_key_bias(_weights(root / "two"))) < 1e-5
    assert float((_outputs(root / "one") - _outputs(root / "two")).abs().max()) < 1e-5
    for a, b in zip(one["history"], two["history"]):  # validation metrics summed over the ranks
        assert b["valid_loss"] == pytest.approx(a["valid_loss"], abs=1e-5)
        assert b["valid_token_accuracy"] == pytest.approx(a["valid_token_accuracy"], abs=1e-9)
        assert b["train_loss"] == pytest.approx(a["train_loss"], abs=1e-5)
    summary = json.loads((root / "two" / "training.json").read_text(encoding="utf-8"))
    assert summary["processes"] == 2 and summary["steps"] == STEPS


def test_a_resumed_run_equals_an_uninterrupted_one_with_two_processes_or_one(runs):
    root, done = runs
    part = _state(root / "part")
    assert part["step"] == STOP_AT and part["options"]["max_steps"] == STOP_AT
    for name in ("resumed-two", "resumed-one"):
        assert _state(root / name)["step"] == STEPS
    assert _max_diff(_weights(root / "two"), _weights(root / "resumed-two")) == 0  # the same sums: bit for bit
    for a, b in (("two", "resumed-one"), ("one", "resumed-one")):  # other sums: see _without_key_bias
        assert _max_diff(_without_key_bias(_weights(root / a)), _without_key_bias(_weights(root / b))) < 1e-5
        assert float((_outputs(root / a) - _outputs(root / b)).abs().max()) < 1e-5
    assert done.stdout.count("saved ") == 1  # only rank 0 speaks


def test_only_rank_zero_writes_the_checkpoints(runs):
    root, _ = runs
    writes = (root / "writes.log").read_text(encoding="utf-8").split("\n")
    writes = [w for w in writes if w]
    files = [w for w in writes if not w.endswith(" left")]
    assert {w.split()[0] for w in files} == {"0"}
    assert {"0 checkpoint", "0 state", "0 final"} <= set(files)


def test_no_rank_leaves_the_process_group_while_rank_zero_still_writes(runs):
    """A rank that shut gloo down and exited while rank 0 was still writing its last files died with SIGABRT
    about one run in ten ("terminate called without an active exception"). Every rank now waits for the others
    before the process group is destroyed: rank 1 leaves only after rank 0's (slowed) final write."""
    root, _ = runs
    writes = [w for w in (root / "writes.log").read_text(encoding="utf-8").split("\n") if w]
    assert sorted(w for w in writes if w.endswith(" left")) == ["0 left", "1 left"]
    assert writes.index("1 left") > writes.index("0 final")


def test_a_rank_that_stops_answering_does_not_leave_the_others_hanging(tmp_path):
    """A rank that dies closes its sockets and gloo fails the others at once; one that freezes is caught by the
    process group's timeout (--dist-timeout, here 12 s): the waiting rank gives up with an error."""
    tsv = _six_pairs(tmp_path / "copy.tsv")
    argv = ["--data", str(tsv), "--out", str(tmp_path / "out"), "--batch-tokens", "12", "--dist-timeout", "0.2",
            *TINY]
    ctx = mp.start_processes(_rank, args=(2, _free_port(), argv, None, 1), nprocs=2, join=False,
                             start_method="spawn")
    waiting, frozen = ctx.processes
    try:
        waiting.join(timeout=100)
        assert not waiting.is_alive(), "rank 0 still waits for the frozen rank"
        assert waiting.exitcode not in (0, None)
        assert "timed out" in Path(ctx.error_files[0]).read_text(encoding="utf-8", errors="replace").lower()
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()


def test_a_rank_that_dies_at_the_end_is_reported_by_the_others_in_one_sentence(tmp_path, capfd):
    tsv = _six_pairs(tmp_path / "copy.tsv")
    argv = ["--data", str(tsv), "--out", str(tmp_path / "out"), "--batch-tokens", "12", "--max-steps", "2", *TINY]
    ctx = mp.start_processes(_rank, args=(2, _free_port(), argv, None, None, 0), nprocs=2, join=False,
                             start_method="spawn")
    dying, waiting = ctx.processes
    try:
        waiting.join(timeout=100)
        assert not waiting.is_alive(), "rank 1 still waits for rank 0, which died"
        assert dying.exitcode == 3 and waiting.exitcode == 2  # the CLI's exit code for a user-facing error
        err = capfd.readouterr().err
        assert "scratchformer: another rank stopped before the end of training (Connection closed by peer" in err
        assert "Traceback" not in err and "pair.cc" not in err
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()
