"""Reading another implementation's weights safely, and handing them out by name with a shape check.

Nothing here executes code from a file: safetensors holds only tensors, and a `pytorch_model.bin` is read
with `torch.load(weights_only=True)`, whose unpickler accepts tensors and plain containers only.
"""

from __future__ import annotations

import json
import pickle
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from ...errors import UserError
from ...transformer.config import TransformerConfig
from ...transformer.model import Transformer
from ..memory import available_memory

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE = "pytorch_model.bin"


def read_weights(directory: Path) -> tuple[dict[str, torch.Tensor], str]:
    """All tensors of a Hugging Face model folder on the CPU, and the file name they came from.

    model.safetensors (or its shards) is preferred; pytorch_model.bin is read with weights_only=True.
    """
    if (directory / SAFETENSORS).is_file():
        return _read_safetensors(directory / SAFETENSORS), SAFETENSORS
    if (directory / SAFETENSORS_INDEX).is_file():
        return _read_shards(directory), SAFETENSORS_INDEX
    if (directory / PICKLE).is_file():
        return _read_pickle(directory / PICKLE), PICKLE
    others = sorted(p.name for p in directory.iterdir() if p.suffix in (".h5", ".msgpack", ".ckpt", ".pt"))
    hint = f" (it has {', '.join(others)}, which scratchformer does not read)" if others else ""
    raise UserError(f"{directory} has no model.safetensors (nor pytorch_model.bin){hint}, so there are no weights.")


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"{path} cannot be read as safetensors (the file is damaged or incomplete): {exc}.") from exc


def _read_shards(directory: Path) -> dict[str, torch.Tensor]:
    index_path = directory / SAFETENSORS_INDEX
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{index_path} is not a valid safetensors index: {exc}.") from exc
    if not all(isinstance(shard, str) for shard in shards):  # each tensor's shard is a file name
        raise UserError(f"{index_path} is not a valid safetensors index: its weight_map names shards that are not "
                        "file names.")
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        shard_path = directory / shard
        if Path(shard).name != shard or not shard_path.is_file():
            raise UserError(f"{directory} lacks the weight file {shard} named in {SAFETENSORS_INDEX}.")
        tensors.update(_read_safetensors(shard_path))
    return tensors


def _read_pickle(path: Path) -> dict[str, torch.Tensor]:
    try:
        with warnings.catch_warnings():  # its note on the pickle protocol is not the user's to act on
            warnings.simplefilter("ignore", UserWarning)
            data = torch.load(str(path), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, OSError, EOFError, ValueError) as exc:
        # PyTorch explains a refused pickle in a paragraph about trusting the file; one sentence says what matters.
        if isinstance(exc, pickle.UnpicklingError) or "weights only load failed" in str(exc).lower():
            raise UserError(f"{path} cannot be read safely: it holds Python objects besides tensors, which could run "
                            "code, so it was not opened; save the model as model.safetensors instead.") from exc
        raise UserError(f"{path} cannot be read: it is damaged or not a PyTorch weights file.") from exc
    if not isinstance(data, Mapping) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise UserError(f"{path} does not hold a plain dictionary of named tensors.")
    return dict(data)


class Weights:
    """A checkpoint's tensors by name; `take` finds one (under any of the model's name prefixes) and checks its shape.

    Errors name the tensor, its shape and the shape config.json implies, in one sentence.
    """

    def __init__(self, tensors: Mapping[str, torch.Tensor], origin: str, prefixes: Sequence[str] = ("",),
                 sizes_from: str = "config.json") -> None:
        self.tensors = dict(tensors)
        self.origin = origin  # the file, for messages
        self.prefixes = tuple(prefixes)
        self.sizes_from = sizes_from  # where the expected shapes come from, for messages

    def find(self, *names: str) -> str | None:
        """The stored key of the first of `names` present (each tried under every prefix), or None."""
        for name in names:
            for prefix in self.prefixes:
                if prefix + name in self.tensors:
                    return prefix + name
        return None

    def has(self, *names: str) -> bool:
        return self.find(*names) is not None

    def take(self, shape: Sequence[int], *names: str) -> torch.Tensor:
        """The tensor stored under the first of `names` found; UserError if none is there or its shape is off."""
        key = self.find(*names)
        if key is None:
            raise UserError(f"{self.origin} has no weight {names[0]}, which {self.sizes_from} says the model has.")
        tensor = self.tensors[key]
        if tuple(tensor.shape) != tuple(shape):
            raise UserError(
                f"In {self.origin}, weight {key} has shape {_shape(tensor.shape)} but {self.sizes_from} says "
                f"{_shape(shape)}."
            )
        if not tensor.is_floating_point():
            raise UserError(f"In {self.origin}, weight {key} holds {tensor.dtype} values, not floating-point ones.")
        return tensor

    def linear(self, d_out: int, d_in: int, name: str, bias: bool = True) -> dict[str, torch.Tensor]:
        """{"weight", "bias"} of an nn.Linear stored as `name`.weight / `name`.bias."""
        out = {"weight": self.take((d_out, d_in), f"{name}.weight")}
        if bias:
            out["bias"] = self.take((d_out,), f"{name}.bias")
        return out

    def fused_linear(self, d_out: int, d_in: int, names: Sequence[str]) -> dict[str, torch.Tensor]:
        """Separate projections (e.g. query, key, value) stacked into one fused matrix and bias, in that order."""
        parts = [self.linear(d_out, d_in, n) for n in names]
        return {
            "weight": torch.cat([p["weight"] for p in parts], dim=0),  # (k·d_out, d_in)
            "bias": torch.cat([p["bias"] for p in parts], dim=0),  # (k·d_out,)
        }

    def layer_norm(self, d: int, name: str) -> dict[str, torch.Tensor]:
        """LayerNorm weight/bias; old BERT conversions call them gamma/beta."""
        return {
            "weight": self.take((d,), f"{name}.weight", f"{name}.gamma"),
            "bias": self.take((d,), f"{name}.bias", f"{name}.beta"),
        }


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ")"


def put(state: dict[str, torch.Tensor], ours: str, parts: Mapping[str, torch.Tensor]) -> None:
    """Store {"weight": …, "bias": …} under our module path `ours`."""
    for leaf, tensor in parts.items():
        state[f"{ours}.{leaf}"] = tensor


def put_token_ends(state: dict[str, torch.Tensor], w, c: TransformerConfig, embedding: str, head: str) -> None:
    """A decoder-only model's two vocabulary matrices: the token embedding (`embedding`, their name) and the
    output layer (`head`), which is the same tensor when the model ties them."""
    tokens = w.take((c.tgt_vocab_size, c.d_model), embedding)
    state["tgt_embed.tokens.weight"] = tokens
    state["generator.proj.weight"] = tokens if c.tie_output else w.take((c.tgt_vocab_size, c.d_model), head)


def load_state(model: nn.Module, state: Mapping[str, torch.Tensor], origin: str) -> None:
    """Copy `state` into `model`, which must receive every parameter and persistent buffer it has."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:  # a mistake in an importer's mapping, not in the user's files
        raise RuntimeError(f"importer mapping for {origin} is incomplete: missing {missing}, unexpected {unexpected}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise UserError(
                f"In {origin}, the weights for {name} have shape {_shape(tensor.shape)} but the model needs "
                f"{_shape(expected[name].shape)}."
            )
    dtype = torch.float32 if PRECISION.get() == "float32" else _stored_dtype(state)
    with torch.no_grad():  # the file's tensors become the parameters (no second copy); shared ones tied again
        model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    model.tie_weights()
    model.fill_computed_buffers()


# The precision a model folder opens in: "float32" (the default: every number as the window and the checks expect
# them) or "stored" (the folder's own, bfloat16 say: half the memory, the published model's own rounding).
PRECISIONS = ("float32", "stored")
PRECISION: ContextVar[str] = ContextVar("precision", default="float32")


@contextmanager
def precision(name: str):
    """Open model folders inside this block in `name`'s precision (PRECISIONS)."""
    if name not in PRECISIONS:
        raise UserError(f"Unknown precision {name!r}; choose {' or '.join(PRECISIONS)}.")
    token = PRECISION.set(name)
    try:
        yield
    finally:
        PRECISION.reset(token)


def _stored_dtype(state: Mapping[str, torch.Tensor]) -> torch.dtype:
    """The floating-point type most of a folder's numbers are stored in."""
    sizes: dict[torch.dtype, int] = {}
    for t in state.values():
        if t.is_floating_point():
            sizes[t.dtype] = sizes.get(t.dtype, 0) + t.numel()
    return max(sizes, key=sizes.get) if sizes else torch.float32


def check_fits(directory: Path, config: TransformerConfig, n_params: int) -> None:
    """UserError before any weight is read when the model would not fit in memory: its parameters in float32,
    plus the file's narrower copy while it is converted (bfloat16 folders)."""
    files = [p for p in directory.iterdir() if p.suffix in (".safetensors", ".bin")]
    file_bytes = sum(p.stat().st_size for p in files)
    if PRECISION.get() == "stored":  # the file's tensors become the parameters as they are
        params = need = file_bytes
    else:
        params = 4 * n_params
        need = params + (file_bytes if file_bytes < 0.9 * params else 0)
    have = available_memory()
    if have is not None and need > have:
        size = lambda n: f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"  # noqa: E731
        count = f"{n_params / 1e9:.2f} billion" if n_params >= 1e9 else f"{n_params / 1e6:.1f} million"
        converting = f", plus {size(file_bytes)} of narrower weights while they are widened" if need > params else ""
        kind = "float32" if PRECISION.get() == "float32" else "their stored precision"
        raise UserError(f"{config.name} needs about {size(need)} of memory to open ({count} parameters in "
                        f"{kind}{converting}) and this machine has {size(have)} free; close other programs or "
                        "choose a smaller model.")  # fmt: skip


def build_model(
    directory: Path,
    config: TransformerConfig,
    state_for: Callable[[Weights, TransformerConfig], dict[str, torch.Tensor]],
    prefixes: tuple[str, ...],
    configure: Callable[[Weights, TransformerConfig], TransformerConfig] | None = None,
) -> Transformer:
    """Read a folder's weights, map them with `state_for(weights, config)` and load them into a fresh model.
    `configure(weights, config)`, if given, first returns the config that the stored tensors call for (an
    optional head found among them)."""
    with torch.device("meta"):  # shapes only: no memory and no random initialisation for a model of billions
        model = Transformer(config)
    check_fits(directory, config, sum(p.numel() for p in model.parameters()))
    tensors, filename = read_weights(directory)
    weights = Weights(tensors, str(directory / filename), prefixes=prefixes)
    if configure is not None:
        config = configure(weights, config)
        with torch.device("meta"):
            model = Transformer(config)
    load_state(model, state_for(weights, config), str(directory / filename))
    return model
