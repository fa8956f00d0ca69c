"""Training on several processes, GPUs or machines with PyTorch's own engine: torch.distributed and DDP.

`torchrun` starts one process (a *rank*) per GPU or CPU share and tells each where it stands through the
environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Every rank loads the same data, builds the
same model from the same seed and cuts each epoch into the same token-bucketed batches (the shuffle is seeded by
seed and epoch, never by rank). Each rank then takes every world_size-th sentence of each *global* batch; the loss
is summed over tokens and divided by the global batch's token count, so after DistributedDataParallel has
all-reduced the gradients during backward every rank holds the gradient one process would compute on the whole
batch, and takes the same Adam step. Weights and optimizer state are therefore identical on every rank and rank 0
alone writes checkpoints; what it writes is global (step, epoch, batch within the epoch), so a run can be resumed
with any number of processes.

Without WORLD_SIZE in the environment (no torchrun) nothing here does anything: one process, no process group.
"""

from __future__ import annotations

import inspect
import os
import random
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..errors import UserError
from ..loading.device import resolve_device

_DDP_OPTIONS = inspect.signature(DistributedDataParallel).parameters
_INIT_OPTIONS = inspect.signature(dist.init_process_group).parameters


@dataclass(frozen=True)
class Distributed:
    """Where this process stands among the ranks; the default is the single process of a plain run."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0  # the rank's index on its own machine: which GPU it drives
    backend: str | None = None  # "gloo" (CPU) or "nccl" (CUDA) while a process group is up, else None

    @property
    def active(self) -> bool:
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        """Rank 0 prints the progress and writes the files; the others only compute."""
        return self.rank == 0

    def device(self, name: str) -> torch.device:
        """The device of this rank: with CUDA under torchrun, the GPU numbered LOCAL_RANK."""
        device = resolve_device(name)
        if self.active and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """DDP around the model in a process group (it all-reduces gradients in backward), else the model."""
        if not self.active:
            return model
        # The model's buffers (positional table, logits bias) are constants, the same on every rank: nothing to
        # synchronise before each forward pass (the option's name changed in torch 2.13; pyproject allows 2.2).
        no_sync = "forward_sync_buffers" if "forward_sync_buffers" in _DDP_OPTIONS else "broadcast_buffers"
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                       **{no_sync: False})

    def shard(self, items: list) -> list:
        """This rank's share: every world_size-th item. Batches are sorted by length inside, so striding gives
        every rank sentences of about the same length (the same padding, the same work)."""
        return items[self.rank :: self.world_size]

    def sum(self, values: list[float]) -> list[float]:
        """The values summed over all ranks (float64, so counts and loss sums stay exact)."""
        if not self.active:
            return [float(v) for v in values]
        comm = torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")
        tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=comm)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def gather(self, value):
        """Every rank's `value` (any picklable object), in rank order: [value] in a single process."""
        if not self.active:
            return [value]
        out = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out

    def seed_step(self, seed: int, step: int) -> None:
        """Dropout masks: each rank draws its own, from (seed, step, rank), so that ranks do not repeat each
        other's masks and a resumed run draws the ones the uninterrupted run drew — without keeping per-rank
        random states in the checkpoint. A plain single-process run keeps its one saved random state instead."""
        if self.active:
            torch.manual_seed(random.Random(f"{seed}:{step}:{self.rank}").getrandbits(63))

    @contextmanager
    def shielded(self) -> Iterator[None]:
        """Hold off Ctrl-C and SIGTERM while rank 0 saves after an interruption: under torchrun every rank gets
        SIGINT twice (from the terminal and again from torchrun), and the second must not cut the save short."""
        if not self.active or threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def _first_line(exc: BaseException) -> str:
    """The first line of an error from torch.distributed (its messages run on for pages), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextmanager
def session(device_name: str = "cpu", timeout_minutes: float = 10.0) -> Iterator[Distributed]:
    """The process group torchrun's environment describes, for the duration of the block; shut down always.

    `gloo` when training on the CPU, `nccl` on CUDA (each rank on its LOCAL_RANK's GPU). The timeout bounds how
    long a rank waits for the others in any collective, so a rank that dies does not leave the rest hanging.
    """
    if "WORLD_SIZE" not in os.environ:
        yield Distributed()
        return
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except (KeyError, ValueError) as exc:
        raise UserError(f"WORLD_SIZE is set but the distributed environment is incomplete ({exc}); "
                        "start several processes with torchrun.") from None
    cuda = resolve_device(device_name).type == "cuda"
    if cuda:
        if local >= torch.cuda.device_count():
            raise UserError(f"torchrun started local rank {local}, but this machine has only "
                            f"{torch.cuda.device_count()} CUDA device(s); lower --nproc-per-node.")
        torch.cuda.set_device(local)
    backend = "nccl" if cuda else "gloo"
    # Binding the process group to this rank's GPU (torch ≥ 2.3) lets NCCL connect eagerly, on the right device.
    bind = {"device_id": torch.device("cuda", local)} if cuda and "device_id" in _INIT_OPTIONS else {}
    try:
        dist.init_process_group(backend, timeout=timedelta(minutes=timeout_minutes), **bind)
    except (RuntimeError, ValueError) as exc:
        raise UserError(f"torch.distributed could not start the {backend} process group: {_first_line(exc)}") \
            from None
    # torchrun stops the other ranks with SIGTERM when one fails or on Ctrl-C: make that a KeyboardInterrupt,
    # so training stops the way Ctrl-C stops it (rank 0 saves where it stands) and the finally below runs.
    previous = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        yield Distributed(rank, world, local, backend)
        # Leave together: rank 0 still writes the last files when the others finish training. A rank that shut
        # gloo down and exited meanwhile died now and then with SIGABRT ("terminate called without an active
        # exception"). Only on the normal way out: after an error the others may never get here.
        try:
            dist.barrier()
        except RuntimeError as exc:  # a rank that died while this one waited: gloo reports its closed socket
            first = re.sub(r"^\[[^\]]*\]\s*", "", _first_line(exc)).split(". ")[0]  # no gloo source path, advice
            raise UserError(f"another rank stopped before the end of training ({first}); see its message.") \
                from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        dist.destroy_process_group()
