"""Path patching (Wang et al. 2022, the IOI paper's method): how much of a sender head's effect runs through one
receiver — another head's query, key or value input — rather than through everything else.

1. Pass A, on the corrupted input: the sender head's output (before W^O) takes its clean value, and every other
   head's output and every feed-forward output is frozen at its value in the corrupted run. Norms and the
   embeddings are computed. So whatever changes downstream of the sender changes by the sender's write alone,
   carried by the residual stream, and nothing else: in a pre-LN model the receiver reads the corrupted stream
   plus the sender's clean − corrupted write, as TransformerLens's direct path patching has it. The receiver's
   q, k or v is recorded.
2. Pass B, on the corrupted input: only the receiver head's q, k or v takes its value from pass A; everything
   else is computed. m of that pass, normalised, is the path's effect.

Beside it: the sender's direct effect — pass A's own m, the sender's write read by the output layer with every
head and feed-forward between frozen (the path sender → logits) — and its total effect, plain activation patching
of the sender. A receiver that runs before the sender (or in the same attention) cannot read it: its path is 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from ..errors import UserError
from .batched import patched_metrics
from .components import Component, attention_modules, input_component, mlp_steps, stacks
from .interventions import Patch, intervene
from .pair import Pair, final_hidden, recorders

PARTS = ("q", "k", "v")
_HEAD = r"(?P<att>(?:encoder|decoder)\.\d+\.(?:self_attn|cross_attn))\.head(?P<head>\d+)"


@dataclass(frozen=True)
class Path:
    """The effects of one sender head: through the receiver (`path`), straight to the logits (`direct`), and in
    all (`total`), each as (m − m_corrupt) / (m_clean − m_corrupt)."""

    sender: str  # 'decoder.0.self_attn.head1'
    receiver: str  # 'decoder.1.self_attn.head0.q' or 'logits'
    possible: bool  # False: the receiver cannot read the sender, and `path` is 0
    path: float
    direct: float
    total: float
    m_path: float  # m of pass B (of pass A for the logits)

    def to_dict(self) -> dict:
        return {"sender": self.sender, "receiver": self.receiver, "possible": self.possible, "effect": self.path,
                "direct_effect": self.direct, "total_effect": self.total, "m_patched": self.m_path}  # fmt: skip


def _valid(model) -> str:
    names = list(attention_modules(model))
    return (f"heads are written ATTENTION.headN with ATTENTION one of {', '.join(names)} and N from 0 to "
            f"{model.config.n_heads - 1}; a receiver adds .q, .k or .v, or is logits")  # fmt: skip


def parse_head(text: str, model, what: str = "sender") -> tuple[str, int]:
    m = re.fullmatch(_HEAD, text.strip())
    if m is None or m["att"] not in attention_modules(model) or int(m["head"]) >= model.config.n_heads:
        raise UserError(f"This model has no {what} head {text!r}: {_valid(model)}.")
    return m["att"], int(m["head"])


def parse_receiver(text: str, model) -> tuple[str, int, str] | None:
    """'decoder.1.self_attn.head0.q' → (attention, head, part); 'logits' → None."""
    if text.strip() == "logits":
        return None
    m = re.fullmatch(_HEAD + r"\.(?P<part>q|k|v)", text.strip())
    if m is None or m["att"] not in attention_modules(model) or int(m["head"]) >= model.config.n_heads:
        raise UserError(f"This model has no receiver {text!r}: {_valid(model)}.")
    module = attention_modules(model)[m["att"]]
    if m["part"] != "q" and module.n_kv_heads != module.n_heads:
        group = module.n_heads // module.n_kv_heads
        raise UserError(f"{text}: this attention shares each key and value head among {group} query heads, so one "
                        "head's k or v cannot be patched alone; take its q.")  # fmt: skip
    return m["att"], int(m["head"]), m["part"]


def possible(model, sender: str, receiver: tuple[str, int, str] | None) -> bool:
    """Whether the receiver reads the sender's write along the residual stream (no other head in between)."""
    order = list(attention_modules(model))
    s_stack = sender.split(".")[0]
    if receiver is None:  # the logits read the decoder's stream; an encoder head reaches it only through heads
        return s_stack == "decoder"
    att, _, part = receiver
    module = attention_modules(model)[att]
    if order.index(att) <= order.index(sender):
        return False
    if s_stack == "encoder":  # the memory reaches the decoder only as cross-attention keys and values
        return att.startswith("encoder.") or (module.cross and part != "q")
    return not (module.cross and part != "q")


def _frozen(pair: Pair, sender: str, head: int) -> list[Patch]:
    """Pass A's patches: every head and feed-forward at its corrupted value, the sender head at its clean one."""
    patches = []
    for name in attention_modules(pair.model):
        values = pair.corrupt[f"{name}.context"]
        if name == sender:
            values = values.clone()
            values[:, head] = pair.clean[f"{name}.context"][:, head]
        patches.append(Patch(f"{name}.context", values, "the corrupted run (frozen)"))
    for stack in stacks(pair.model):
        patches += [Patch(s, pair.corrupt[s], "the corrupted run (frozen)") for s in mlp_steps(pair.model, stack)]
    return patches


def pass_a(pair: Pair, sender: str, head: int, steps: list[str]) -> tuple[float, dict[str, torch.Tensor]]:
    """(m with only the sender's write changed, step → what `steps` read in that pass)."""
    kept, recording = recorders(steps)
    items = recording + _frozen(pair, sender, head)
    with torch.inference_mode(), intervene(pair.model, items):
        m = pair.metric.values(pair.model, final_hidden(pair.model, pair.src_corrupt, pair.tgt_corrupt))
    return float(m[0]), kept


def path_patch(pair: Pair, sender_text: str, receiver_text: str, budget: int | None = None) -> Path:
    """The path sender → receiver (see the module doc). Names as --ablate writes heads: 'decoder.0.self_attn.head1';
    a receiver adds '.q', '.k' or '.v', or is 'logits'."""
    model = pair.model
    sender, head = parse_head(sender_text, model)
    receiver = parse_receiver(receiver_text, model)
    comp = None if receiver is None else input_component(model, *receiver)
    m_a, kept = pass_a(pair, sender, head, [] if comp is None else [comp.step])
    if comp is None:
        m_path = m_a
    else:
        m_path = float(patched_metrics(pair, [comp], source={comp.step: kept[comp.step]}, budget=budget)[0])
    total = patched_metrics(pair, [Component("head", f"{sender}.context", sender.split(".")[0],
                                             int(sender.split(".")[1]), head)], budget=budget)  # fmt: skip
    effect = lambda m: float(pair.effect(torch.tensor([m]))[0])  # noqa: E731
    return Path(sender_text.strip(), receiver_text.strip(), possible(model, sender, receiver), effect(m_path),
                effect(m_a), effect(float(total[0])), m_path)  # fmt: skip


def path_sweep(pair: Pair, sender_text: str, part: str = "q", budget: int | None = None
               ) -> tuple[list[Component], torch.Tensor]:  # fmt: skip
    """The path from one sender into every head's q, k or v (batched): (receivers, effects (n,)). Receivers
    that cannot read the sender are computed too; their effects come out 0 (up to rounding)."""
    if part not in PARTS:
        raise UserError(f"A receiver's input is q, k or v, not {part!r}.")
    model = pair.model
    sender, head = parse_head(sender_text, model)
    receivers = [input_component(model, att, h, part) for att, module in attention_modules(model).items()
                 if part == "q" or module.n_kv_heads == module.n_heads for h in range(module.n_heads)]  # fmt: skip
    _, kept = pass_a(pair, sender, head, list(dict.fromkeys(c.step for c in receivers)))
    m = patched_metrics(pair, receivers, source=kept, budget=budget)
    return receivers, pair.effect(m)
