"""What a derivation reads: cells and rows of trace steps and of the model's parameters, each read recorded as
an input (so the window can link to it and the tests can check it holds the trace's value)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ...errors import UserError
from ...recording.trace import Step, Trace

INPUT_LIMIT = 1024  # inputs are listed one by one up to this many cells of each kind (trace cells, parameters)


@dataclass
class Cell:
    """One number a derivation read: a trace cell (`step`) or a parameter entry (`param`, its state_dict name)."""

    index: tuple[int, ...]
    value: float
    step: str | None = None
    param: str | None = None

    def to_dict(self) -> dict:
        where = {"step": self.step} if self.step is not None else {"param": self.param}
        return {**where, "index": list(self.index), "value": json_number(self.value)}


def json_number(x: float) -> float | str:
    """JSON has no infinities or NaN: they become the strings "-inf", "inf", "nan"."""
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x


@dataclass
class Reader:
    """Reads one run (trace + model) for a derivation and records every cell it reads."""

    trace: Trace
    model: torch.nn.Module
    cells: list[Cell] = field(default_factory=list)
    unlisted: int = 0  # cells read but not listed one by one (past INPUT_LIMIT)
    _params: dict | None = None

    @property
    def config(self):
        return self.model.config

    def step(self, name: str) -> Step:
        step = self.trace.find(name)
        if step is None:
            raise UserError(f"This run has no step named {name!r}.")
        return step

    def values(self, step: Step, index: tuple[int, ...]) -> np.ndarray:
        """A cell, row or column of a step (index with the batch axis first when it has one) as float64 —
        indexed before it is converted, so a row of a 512 × 50 257 item costs one row."""
        batch, rest = split_batch(step, index)
        return step.item(batch).detach()[rest].to(torch.float64).numpy()

    def params(self) -> dict[str, torch.Tensor]:
        """Every parameter by name, tied weights under each of theirs (generator.proj.weight too), and each
        attached dictionary's as `<step read>.dict.W_enc` (b_enc, W_dec, b_dec, threshold)."""
        if self._params is None:
            self._params = dict(self.model.state_dict(keep_vars=True))
            for read, (d, _at, _to) in getattr(self.trace, "dictionaries", {}).items():
                self._params.update({f"{read}.dict.{k}": v for k, v in d.state_dict(keep_vars=True).items()})
        return self._params

    def param(self, name: str, index: tuple = ()) -> np.ndarray:
        """A parameter (or buffer) entry, row or whole tensor as float64, indexed before it is converted."""
        return self.params()[name].detach()[index].cpu().to(torch.float64).numpy()

    def has_param(self, name: str) -> bool:
        return name in self.params()

    # --- reading with a record of what was read ------------------------------------------------------------

    def _record(self, n: int, make, listed: bool = True) -> None:
        """List n cells one by one (make() builds them) when there are at most INPUT_LIMIT, else count them."""
        if listed and n <= INPUT_LIMIT:
            self.cells.extend(make())
        else:
            self.unlisted += n

    def cell(self, name: str, index: tuple[int, ...]) -> float:
        """One trace cell; index has one entry per axis of the step (batch first when it has one)."""
        value = float(self.values(self.step(name), tuple(index)))
        self.cells.append(Cell(tuple(index), value, step=name))
        return value

    def row(self, name: str, prefix: tuple[int, ...], listed: bool = True) -> np.ndarray:
        """The last axis of a step at `prefix` (every other axis fixed): e.g. one position's d_model vector."""
        values = self.values(self.step(name), tuple(prefix))
        self._record(len(values), lambda: [Cell((*prefix, j), float(v), step=name) for j, v in enumerate(values)],
                     listed)  # fmt: skip
        return values

    def column(self, name: str, prefix: tuple[int, ...], suffix: tuple[int, ...]) -> np.ndarray:
        """The second-to-last axis at prefix/suffix: e.g. every key's value v[b, h, :, e]."""
        values = self.values(self.step(name), (*prefix, slice(None), *suffix))
        self._record(len(values),
                     lambda: [Cell((*prefix, j, *suffix), float(v), step=name) for j, v in enumerate(values)])
        return values

    def param_cell(self, name: str, index: tuple[int, ...]) -> float:
        value = float(self.param(name, tuple(index)))
        self.cells.append(Cell(tuple(index), value, param=name))
        return value

    def param_row(self, name: str, prefix: tuple[int, ...]) -> np.ndarray:
        values = self.param(name, tuple(prefix))
        self._record(len(values), lambda: [Cell((*prefix, j), float(v), param=name) for j, v in enumerate(values)])
        return values

    def param_column(self, name: str, suffix: tuple[int, ...]) -> np.ndarray:
        """The first axis of a parameter at `suffix` (the other axes fixed): e.g. a dictionary's encoder column
        W_enc[:, i]."""
        values = self.param(name, (slice(None), *suffix))
        self._record(len(values), lambda: [Cell((j, *suffix), float(v), param=name) for j, v in enumerate(values)])
        return values

    def param_entries(self, name: str, rows: np.ndarray, column: int) -> np.ndarray:
        """Entries [rows[k], column] of a 2-D parameter, each listed: e.g. the active features' W_dec[i, u]."""
        values = self.param(name, (torch.as_tensor(rows, dtype=torch.long), column))
        self.cells.extend(Cell((int(j), column), float(v), param=name) for j, v in zip(rows, values))
        return values



def split_batch(step: Step, index: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(batch item, the rest of the index) for reading step.item(batch)."""
    if step.dims and step.dims[0] == "batch":
        return index[0], tuple(index[1:])
    return 0, tuple(index)


def check_index(step: Step, index: tuple[int, ...]) -> None:
    """One sentence naming the valid ranges when the index does not fit the step."""
    dims, shape = step.dims, step.shape
    if len(index) != len(dims):
        axes = " × ".join(f"{d} ({n})" for d, n in zip(dims, shape))
        raise UserError(f"{step.name} has {len(dims)} axes, {axes}: give {len(dims)} indices, one per axis, "
                        f"not {len(index)}.")  # fmt: skip
    for i, (d, n) in enumerate(zip(dims, shape)):
        if not 0 <= index[i] < n:
            raise UserError(f"Index {index[i]} is out of range for axis {i + 1} of {step.name} ({d}), which runs "
                            f"from 0 to {n - 1}.")  # fmt: skip
