"""Which steps and maps an export writes: `--steps attention|all|NAME...` and the per-head attention maps."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UserError
from ..plotdata import Heatmap, head_count, step_heatmap
from ..recording.trace import Step, Trace

ATTENTION = "attention"
ALL = "all"


@dataclass
class ExportItem:
    """One attention map to write: file stem, what to draw, where it sits in the model (counted from 1)."""

    filename: str  # stem without extension, e.g. "decoder_cross_attn_layer02_head05"
    make: Callable[[], Heatmap]  # builds what to draw when the file is written (see `heatmap`)
    step: str  # the trace step's name, e.g. "decoder.1.cross_attn.weights" (layers from 0 there)
    layer: int  # 1-based, as in titles ("Decoder 2")
    head: int  # 1-based, as in titles ("Head 5")
    attention_type: str  # "encoder.self_attn", "decoder.self_attn" or "decoder.cross_attn"
    shape: tuple[int, int]  # (query positions, key positions)
    batch: int = 0  # 0-based batch item
    row_dim: str = ""
    col_dim: str = ""

    @property
    def heatmap(self) -> Heatmap:
        """Built on each access, never kept: an export of every map of a long run streams map by map (a lazy
        trace recomputes each sublayer as it comes), so at most one map is in memory at a time."""
        return self.make()


def _width(n: int) -> int:
    return max(2, len(str(n)))


def attention_maps(trace: Trace, batch: int = 0) -> list[ExportItem]:
    """Every attention map of a run: each attention-weights step × each head, in trace order."""
    steps = trace.attention_steps()
    layer_w = _width(max((s.layer or 0) + 1 for s in steps)) if steps else 2
    items = []
    for step in steps:
        n_heads = head_count(step)
        head_w = _width(n_heads)
        kind = (step.attention_type or step.sublayer).replace(".", "_")
        layer = (step.layer or 0) + 1
        row_dim, col_dim = [d for d in step.dims if d not in ("batch", "head")]
        shape = (step.shape[-2], step.shape[-1])
        for h in range(n_heads):
            make = lambda step=step, h=h: step_heatmap(trace, step, batch, h)  # noqa: E731
            stem = f"{kind}_layer{layer:0{layer_w}d}_head{h + 1:0{head_w}d}"
            items.append(ExportItem(stem, make, step.name, layer, h + 1, step.attention_type or "", shape, batch,
                                    row_dim, col_dim))  # fmt: skip
    return items


def steps_for(trace: Trace, spec: str | list[str] | tuple[str, ...]) -> list[Step]:
    """The steps named by `attention` (the softmax weights), `all`, or names and shell patterns
    ("encoder.0.self_attn.weights", "decoder.*.cross_attn.weights"), in trace order without repeats."""
    parts = [spec] if isinstance(spec, str) else list(spec)
    words = [w for part in parts for w in part.replace(",", " ").split()]
    if not words:
        raise UserError("Name the steps to export: attention, all, or step names (`scratchformer trace`).")
    chosen: set[str] = set()
    for word in words:
        if word == ALL:
            chosen.update(trace.names())
        elif word == ATTENTION:
            chosen.update(s.name for s in trace.attention_steps())
        else:
            hits = [n for n in trace.names() if fnmatch.fnmatchcase(n, word)]
            if not hits:
                raise UserError(
                    f"No step of this run is called {word!r}; use attention, all, or a name listed by "
                    "`scratchformer trace` (for example encoder.0.self_attn.weights)."
                )
            chosen.update(hits)
    return [s for s in trace if s.name in chosen]
