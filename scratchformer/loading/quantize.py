"""Weights stored in 8 bits, one scale per row: how training snapshots are kept small (`--snapshot-dtype int8`).

A snapshot is there to be looked at — its attention maps and its decoded output at one point of training — not to
be trained on. So each weight matrix W (out × in) is stored as int8 with one float32 scale per row,

    s_i = max_j |W_ij| / 127,      q_ij = round(W_ij / s_i) ∈ [-127, 127],      W'_ij = q_ij · s_i,

a quarter of float32's size and half of float16's. Every weight lands within s_i / 2 of its value (0.4 % of its
row's largest). Vectors (biases, LayerNorm gains) are tiny and stay float16; buffers are kept as they are. The
file is still safetensors: the int8 tensor keeps the parameter's name, its scales sit beside it as
`<name>.int8_scale`, and the header's metadata says `"scratchformer.weights": "int8-rows"`. load_checkpoint reads
it back into the float32 model.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

FORMAT_KEY, INT8_ROWS = "scratchformer.weights", "int8-rows"
SCALE = ".int8_scale"


def _unique_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with tied tensors (one storage under several names) kept once, under their first name."""
    seen, unique = set(), {}
    for name, tensor in model.state_dict().items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            unique[name] = tensor
    return unique


def quantize(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 values, float32 scale per row) of a floating tensor with 2 or more dims; rows are its first dim."""
    rows = tensor.detach().float().cpu().reshape(tensor.shape[0], -1)  # (out, in)
    scale = rows.abs().amax(dim=1) / 127  # (out,)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
    q = torch.round(rows / scale[:, None]).clamp_(-127, 127).to(torch.int8)  # (out, in)
    return q.reshape(tensor.shape).contiguous(), scale.contiguous()


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q · s row by row, as float32 of q's shape."""
    return (q.reshape(q.shape[0], -1).float() * scale.float()[:, None]).reshape(q.shape)


def save_int8(model: torch.nn.Module, path: str | Path) -> None:
    """Write `model`'s weights to the safetensors file `path`: matrices as int8 rows, the rest float16."""
    tensors = {}
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    for name, tensor in _unique_state(model).items():
        if name not in params:  # a buffer (fixed tables, counters): kept exactly as it is
            tensors[name] = tensor.detach().cpu().contiguous()
        elif tensor.is_floating_point() and tensor.dim() >= 2:
            tensors[name], tensors[name + SCALE] = quantize(tensor)
        elif tensor.is_floating_point():
            tensors[name] = tensor.detach().to("cpu", torch.float16).contiguous()
        else:
            tensors[name] = tensor.detach().cpu().contiguous()
    save_file(tensors, str(path), metadata={"format": "pt", FORMAT_KEY: INT8_ROWS})


def is_int8(path: str | Path) -> bool:
    """Whether the safetensors file at `path` was written by save_int8 (raises what safe_open raises)."""
    with safe_open(str(path), framework="pt") as f:
        return (f.metadata() or {}).get(FORMAT_KEY) == INT8_ROWS


def load_int8(model: torch.nn.Module, path: str | Path) -> tuple[list[str], list[str]]:
    """Read a save_int8 file into `model` (float32); (missing, unexpected) names as safetensors' load_model gives.

    A name the file lacks is not missing when it is tied to one the file holds (the same storage)."""
    stored = load_file(str(path))
    state = {}
    for name, tensor in stored.items():
        if name.endswith(SCALE) and name[: -len(SCALE)] in stored:
            continue
        if tensor.dtype == torch.int8 and name + SCALE not in stored:
            raise ValueError(f"{name} is stored in 8 bits without its scales")
        state[name] = dequantize(tensor, stored[name + SCALE]) if name + SCALE in stored else tensor
    missing, unexpected = model.load_state_dict(state, strict=False)
    own = model.state_dict()
    loaded = {(own[n].untyped_storage().data_ptr(), own[n].storage_offset()) for n in state if n in own}
    missing = [n for n in missing if (own[n].untyped_storage().data_ptr(), own[n].storage_offset()) not in loaded]
    return missing, list(unexpected)
