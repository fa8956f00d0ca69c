"""Choosing CPU or CUDA, with a clear sentence when CUDA is asked for and absent."""

from __future__ import annotations

import torch

from ..errors import UserError


def available_devices() -> list[str]:
    """The devices a user may pick here: always 'cpu', then 'cuda' (and 'cuda:N') where CUDA works."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        devices.append("cuda")
        devices.extend(f"cuda:{i}" for i in range(1, count))
    return devices


def resolve_device(name: str | torch.device | None) -> torch.device:
    """'cpu', 'cuda', 'cuda:N' or 'auto' → torch.device; UserError if CUDA is asked for but missing."""
    if isinstance(name, torch.device):
        name = str(name)
    name = (name or "cpu").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError("CUDA was asked for, but PyTorch finds no CUDA device on this machine; use --device cpu.")
        try:
            device = torch.device(name)
        except RuntimeError:
            raise UserError(f"{name!r} is not a device name; use cpu, cuda or cuda:N.") from None
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise UserError(f"There is no {name}: this machine has {torch.cuda.device_count()} CUDA device(s).")
        return device
    raise UserError(f"Unknown device {name!r}; use cpu or cuda.")
