"""The clean run and the corrupted run a sweep compares: their inputs, every activation the sweeps read, and the
metric at both ends (m_clean, m_corrupt).

The activations are recorded with StepEdits that hand each tensor on unchanged (interventions), in an ordinary
untraced forward pass: a trace would keep far more than a sweep reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import UserError
from .components import recorded_steps
from .interventions import StepEdit, intervene
from .metric import OPTION_NAMES, Metric, choose


@dataclass
class Pair:
    """Two runs of the same token length: `clean` and `corrupt` map step name → tensor (1, …) of that run."""

    bundle: object  # scratchformer.loading.model_bundle.ModelBundle
    src_clean: torch.Tensor | None  # (1, S) ids, or None for a decoder-only model
    src_corrupt: torch.Tensor | None
    tgt_clean: torch.Tensor  # (1, T): the decoder input (a decoder-only model: the text behind the start token)
    tgt_corrupt: torch.Tensor
    clean: dict[str, torch.Tensor]
    corrupt: dict[str, torch.Tensor]
    metric: Metric
    m_clean: float
    m_corrupt: float
    source_tokens: list[str] = field(default_factory=list)  # the clean source (decoder-only: the text)
    corrupt_tokens: list[str] = field(default_factory=list)
    target_tokens: list[str] = field(default_factory=list)  # the decoder input
    names: dict[str, str] = field(default_factory=lambda: OPTION_NAMES)  # what sentences call the metric's inputs

    @property
    def model(self):
        return self.bundle.model

    @property
    def gap(self) -> float:
        """m_clean − m_corrupt: what a patch can restore (0: nothing to restore, every effect is 0)."""
        return self.m_clean - self.m_corrupt

    def effect(self, m_patched: torch.Tensor) -> torch.Tensor:
        """(m_patched − m_corrupt) / (m_clean − m_corrupt), 0 where m_clean = m_corrupt."""
        if self.gap == 0:
            return torch.zeros_like(m_patched)
        return (m_patched - self.m_corrupt) / self.gap

    def share(self, change: torch.Tensor) -> torch.Tensor:
        """A change of m (m_patched − m_corrupt, or an estimate of it) as a share of m_clean − m_corrupt."""
        return torch.zeros_like(change) if self.gap == 0 else change / self.gap

    def n_positions(self, axis: str) -> int:
        return self.tgt_clean.shape[1] if axis == "tgt" else self.src_clean.shape[1]


def final_hidden(model, src: torch.Tensor | None, tgt: torch.Tensor) -> torch.Tensor:
    """The decoder's last position after its final norm, (B, d_model), for these inputs (interventions apply)."""
    memory = model.encode(src) if model.config.has_encoder else None
    return model.decode(tgt, memory)[:, -1]  # (B, d_model)


def record(model, src: torch.Tensor | None, tgt: torch.Tensor, steps: list[str]
           ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
    """One forward pass that keeps a copy of every step in `steps` (those it passes through): (the last
    position's hidden (1, d_model), step → tensor)."""
    kept, edits = recorders(steps)
    with torch.inference_mode(), intervene(model, edits):
        hidden = final_hidden(model, src, tgt)
    return hidden, kept


def recorders(steps: list[str]) -> tuple[dict[str, torch.Tensor], list[StepEdit]]:
    """(an empty dict, edits that copy each step of `steps` into it as a pass goes through, changing nothing)."""
    kept: dict[str, torch.Tensor] = {}

    def keeper(step: str):
        def keep(t: torch.Tensor) -> torch.Tensor:
            kept[step] = t.detach().clone()
            return t
        return keep

    return kept, [StepEdit(s, keeper(s), "recorded") for s in steps]


def same_length(side: str, clean: torch.Tensor | None, corrupt: torch.Tensor | None, clean_tokens: list[str],
                corrupt_tokens: list[str]) -> None:  # fmt: skip
    if clean is not None and corrupt is not None and clean.shape != corrupt.shape:
        raise UserError(f"The corrupted {side} has {corrupt.shape[-1]} tokens ({' '.join(corrupt_tokens)}) and the "
                        f"clean one {clean.shape[-1]} ({' '.join(clean_tokens)}); patching needs inputs of the same "
                        "token length: change a word for one that the tokenizer also reads as the same number of "
                        "tokens.")  # fmt: skip


def make_pair(bundle, clean, corrupt, answer: str | None = None, wrong: str | None = None,
              kind: str = "logit-diff", names: dict[str, str] = OPTION_NAMES) -> Pair:  # fmt: skip
    """The two runs of `clean` and `corrupt` (scratchformer.loading.model_bundle.Inputs, one sentence each). An
    encoder-decoder's corrupted run reads the clean run's decoder input, so that only the source differs. `names`:
    what its sentences call the metric's inputs (metric.OPTION_NAMES: the command line's options)."""
    model, c = bundle.model, bundle.config
    if not c.has_decoder or model.generator is None:
        raise UserError("A patching sweep measures the output at the last decoder position, and this model has no "
                        "decoder; open a decoder-only or encoder-decoder model.")  # fmt: skip
    dev = bundle.device
    src_clean = clean.src.to(dev) if c.has_encoder else None
    src_corrupt = corrupt.src.to(dev) if c.has_encoder else None
    tgt_clean = clean.tgt.to(dev)
    tgt_corrupt = tgt_clean if c.has_encoder else corrupt.tgt.to(dev)
    if c.has_encoder:
        same_length("source", src_clean, src_corrupt, clean.source_tokens[0], corrupt.source_tokens[0])
    else:
        same_length("text", tgt_clean, tgt_corrupt, clean.target_tokens[0], corrupt.target_tokens[0])
    steps = recorded_steps(model)
    h_clean, acts_clean = record(model, src_clean, tgt_clean, steps)
    h_corrupt, acts_corrupt = record(model, src_corrupt, tgt_corrupt, steps)
    with torch.inference_mode():
        logits = model.generator(torch.cat([h_clean, h_corrupt])[:, None])[:, 0]  # (2, vocab)
    metric = choose(bundle.tgt_tokenizer, logits[0], logits[1], answer, wrong, kind, names)
    with torch.inference_mode():
        m = [metric.values(model, h) for h in (h_clean, h_corrupt)]  # each (1,), one run at a time
    corrupt_tokens = corrupt.source_tokens[0] if corrupt.source_tokens else []
    return Pair(bundle, src_clean, src_corrupt, tgt_clean, tgt_corrupt, acts_clean, acts_corrupt, metric,
                float(m[0]), float(m[1]), list(clean.source_tokens[0]) if clean.source_tokens else [],
                list(corrupt_tokens), list(clean.target_tokens[0]), names)  # fmt: skip
