"""What every explanation needs to look up: the step, its siblings, one batch item's tensor, token labels."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..recording.trace import Step, Trace, step_breadcrumb
from ..transformer.config import TransformerConfig
from .format import Count, Num
from .texts import PHRASES

POSITION_DIMS = ("src_pos", "tgt_pos")


@dataclass
class Ctx:
    trace: Trace
    step: Step
    config: TransformerConfig
    batch: int = 0
    vocab_labels: object = None  # optional ids → token strings (the target tokenizer), to name predicted tokens
    item_stats: object = None  # optional plotdata.TensorStats of this step's batch item, already computed

    @property
    def text_only(self) -> bool:
        """A decoder-only model (GPT-2): its one input is the text, not a target; texts say so (TEXTS' "@text")."""
        return self.config.has_decoder and not self.config.has_encoder

    def noun(self, dim: str) -> str:
        """The counted noun of a position axis: 'src_pos', 'tgt_pos', or 'text' for a decoder-only model's."""
        return "text" if self.text_only and dim == "tgt_pos" else dim

    # ---------------------------------------------------------------- finding other steps
    @property
    def prefix(self) -> str:
        """'decoder.1.cross_attn.scaled_scores' → 'decoder.1.cross_attn'."""
        return self.step.name.rsplit(".", 1)[0]

    @property
    def suffix(self) -> str:
        return self.step.name.rsplit(".", 1)[-1]

    def earlier(self, name: str) -> Step | None:
        """The step called `name` if it comes before this one."""
        found = self.trace.find(name)
        return found if found is not None and found.index < self.step.index else None

    def sibling(self, last: str) -> Step | None:
        """A step of the same block by its last name part: for '….self_attn.scaled_scores', 'scores'."""
        return self.earlier(f"{self.prefix}.{last}")

    def previous(self) -> Step | None:
        return self.trace[self.step.index - 1] if self.step.index > 0 else None

    def sublayer_input(self, sublayer: str) -> Step | None:
        """The x a sublayer reads: the step just before its first step (the previous Add & Norm, or the embeddings)."""
        first = next((s for s in self.trace if s.sublayer == sublayer), None)
        if first is None or first.index == 0 or first.index > self.step.index:
            return None
        before = self.trace[first.index - 1]
        return before if before.dims and before.dims[-1] == "d_model" else None

    def memory(self) -> Step | None:
        """The encoder's output: its last step before this one."""
        steps = [s for s in self.trace.steps[: self.step.index] if s.stack == "encoder"]
        return steps[-1] if steps else None

    # ---------------------------------------------------------------- tensors and labels
    def item(self, step: Step | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The step's tensor for the chosen batch item (the batch axis dropped), in float64 (or `dtype`)."""
        step = step or self.step
        if step.dims and step.dims[0] == "batch" and step.shape[0] > 0:
            return step.item(self.batch).to(dtype)  # one item: a lazy trace recomputes just that one
        return step.tensor.to(dtype)

    def pos_dims(self, step: Step | None = None) -> list[str]:
        return [d for d in (step or self.step).dims if d in POSITION_DIMS]

    def label(self, dim: str, i: int) -> str:
        """The token at position i (0-based) of a position axis, quoted: 'girl' — or 'token 3' without labels."""
        labels = self.trace.labels(dim, self.batch)
        if labels and 0 <= i < len(labels):
            return PHRASES["token"].format(text=labels[i])
        return PHRASES["token_unknown"].format(n=i + 1)

    def id_label(self, token_id: int) -> str:
        """A target-vocabulary id as people read it: a token this run shows, a special token, or just the id."""
        known: dict[int, str] = {}
        sides = [("tgt_embed.tokens", "tgt_pos")]
        if self.config.share_embeddings:
            sides.append(("src_embed.tokens", "src_pos"))
        for name, dim in sides:
            step = self.trace.find(name)
            for row, labels in zip(step.tensor.tolist() if step is not None else [], self.trace_rows(dim)):
                for tid, text in zip(row, labels):
                    known.setdefault(int(tid), text)
        if token_id in known:
            return PHRASES["token"].format(text=known[token_id])
        c = self.config
        for key, special in (("eos", c.eos_id), ("bos", c.bos_id), ("pad", c.pad_id)):
            if special == token_id:
                return PHRASES[f"special.{key}"].format(id=token_id)
        if self.vocab_labels is not None:
            return PHRASES["token"].format(text=self.vocab_labels([token_id])[0])
        return PHRASES["token_id"].format(id=token_id)

    def trace_rows(self, dim: str) -> list[list[str]]:
        return {"src_pos": self.trace.source_tokens, "tgt_pos": self.trace.target_tokens}.get(dim) or []

    # ---------------------------------------------------------------- what every step can say
    def common(self) -> dict:
        step, c = self.step, self.config
        pos = self.pos_dims()
        n_pos = step.shape[step.dims.index(pos[0])] if pos else 0
        side = pos[0] if pos else "src_pos" if step.stack in ("src_embed", "encoder") else "tgt_pos"
        values = {
            "d_model": Count(c.d_model), "h": Count(c.n_heads), "d_k": Count(c.d_head), "d_ff": Count(c.d_ff),
            "max_len": Count(c.max_len), "shape": step.shape_text(), "formula": step.formula, "title": step.title,
            "n_pos": Count(n_pos), "side": PHRASES[f"side.{self.noun(side)}"],
            "block": " › ".join(step_breadcrumb(step)),
            "vocab": Count(c.src_vocab_size if side == "src_pos" else c.tgt_vocab_size),
            "batch_no": Count(min(max(self.batch, 0), self._n_batch() - 1) + 1), "b_note": "",
        }  # fmt: skip
        values.update(
            n_tokens=counted("token", n_pos), positions=counted("position", n_pos),
            side_positions=counted(self.noun(side), n_pos), each_position=one_or_many("each", n_pos),
            all_positions=one_or_many("all", n_pos),
        )  # fmt: skip
        bias = getattr(c, "linear_bias", True)
        values.update(
            d_attn=Count(c.d_attn), norm_name=PHRASES[f"norm.{getattr(c, 'norm', 'layernorm')}"],
            plus_b=" + b" if bias else "", w1_b1="W_1 and b_1" if bias else "W_1", and_b2=" and b_2" if bias else "",
            plus_b2=" + b_2" if bias else "", wo_b="W^O and b" if bias else "W^O", s_bring="" if bias else "s",
        )  # fmt: skip
        if self._n_batch() > 1:
            values["b_note"] = PHRASES["b_note"].format(n=values["batch_no"], total=self._n_batch())
        known = self.item_stats
        if known is not None and known.mean == known.mean:  # the inspector's numbers of this very item
            values.update(min=Num(known.minimum), max=Num(known.maximum), mean=Num(known.mean), std=Num(known.std))
        else:
            values.update(stats(self.item(dtype=torch.float32)))  # 3 significant figures: float32 is plenty
        return values

    def _n_batch(self) -> int:
        step = self.step
        return step.shape[0] if step.dims and step.dims[0] == "batch" and step.shape[0] > 0 else 1


def counted(noun: str, n: int) -> str:
    """'1 token', '6 tokens', '5 target positions' (nouns: token, position, src_pos, tgt_pos)."""
    return PHRASES[f"count.{noun}" + ("" if n == 1 else "s")].format(n=Count(n))


def one_or_many(key: str, n: int) -> str:
    """'each of the 5 positions' or 'the single position'."""
    return PHRASES[f"{key}.one" if n == 1 else f"{key}.many"].format(n=Count(n))


def stats(t: torch.Tensor) -> dict[str, Num]:
    """min, max, mean and (population) std of the finite values; {} when there are none."""
    t = t.float()  # float32 is exact enough for 3 significant figures, and fast on a 512 × 512 × 8 map
    mask = torch.isfinite(t)
    finite = t if bool(mask.all()) else t[mask]  # masking copies: only when something is −∞ or NaN
    if finite.numel() == 0:
        return {}
    lo, hi = torch.aminmax(finite)
    std, mean = torch.std_mean(finite, correction=0)
    return {"min": Num(lo.item()), "max": Num(hi.item()), "mean": Num(mean.item()), "std": Num(std.item())}


def finite_std(t: torch.Tensor) -> Num | None:
    values = stats(t)
    return values.get("std")


def row_std(t: torch.Tensor) -> torch.Tensor:
    """Per-position std over the last axis (what LayerNorm divides by, without ε)."""
    return t.double().std(dim=-1, unbiased=False)


def sqrt(x: float) -> Num:
    return Num(math.sqrt(x))
