"""Head importance: how much the model's confidence in its chosen output falls when one head is zeroed.

For one input (a source and a decoder input), the chosen output tokens are the decoder input shifted by one —
the token that follows each position, as in teacher forcing. Each head of every attention is zero-ablated in turn
(scratchformer.patching.interventions) and the mean probability the model gives those tokens is compared with the
untouched pass: drop = P(chosen) before − P(chosen) with the head zeroed, one number per head, laid out as
layers × heads for each attention type. Untraced forward passes only: the untouched attentions keep the fused
kernel, the ablated one takes the written-out path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import UserError
from ..transformer.masks import pad_from_ids
from .interventions import HeadChange, attention_names, head_name, intervene


@dataclass
class HeadImportance:
    base: float  # mean probability of the chosen tokens with nothing ablated
    drops: dict[str, np.ndarray]  # "encoder.self_attn" / "decoder.self_attn" / "decoder.cross_attn" → (layers, heads)
    n_tokens: int  # chosen tokens averaged over

    def ranking(self, kind: str) -> list[tuple[int, int, float]]:
        """(layer, head, drop) of one attention type, largest drop first (layers and heads from 0)."""
        arr = self.drops[kind]
        order = np.argsort(-arr, axis=None, kind="stable")
        return [(int(i // arr.shape[1]), int(i % arr.shape[1]), float(arr.flat[i])) for i in order]


def _chosen_probability(model, src, tgt, src_pad, tgt_pad) -> tuple[float, int]:
    """Mean P(tgt[t + 1]) at positions t that are not padding, over the batch; and how many there are."""
    logits = model(src, tgt, src_pad, tgt_pad)  # (B, T, vocab)
    probs = logits[:, :-1].float().softmax(-1).gather(-1, tgt[:, 1:, None])[..., 0]  # (B, T − 1)
    keep = torch.ones_like(probs, dtype=torch.bool) if tgt_pad is None else ~tgt_pad[:, 1:]
    return float(probs[keep].mean()), int(keep.sum())


def head_importance(
    model,
    src: torch.Tensor | None,
    tgt: torch.Tensor,
    src_pad: torch.Tensor | None = None,
    tgt_pad: torch.Tensor | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> HeadImportance | None:
    """Zero each head in turn; src (B, S) (None for a decoder-only model) and tgt (B, T) ids on the model's
    device. progress(done, total) is called after every head; when cancelled() turns true the work stops and
    the result is None. Pads default to the model's pad id (as in ModelBundle.run)."""
    c = model.config
    if not c.has_decoder:
        raise UserError("Head importance needs a model with a decoder: it measures the output tokens' probability.")
    if tgt is None or tgt.shape[1] < 2:
        raise UserError("Head importance needs a decoder input of at least one token after the start token.")
    src_pad = src_pad if src_pad is not None else pad_from_ids(src, c.pad_id)
    tgt_pad = tgt_pad if tgt_pad is not None else pad_from_ids(tgt, c.pad_id, start=True)
    names = attention_names(model)
    total = len(names) * c.n_heads
    kinds = {f"{n.split('.')[0]}.{n.split('.')[2]}" for n in names}
    drops = {k: np.zeros((c.n_encoder_layers if k.startswith("encoder") else c.n_decoder_layers, c.n_heads))
             for k in sorted(kinds)}  # fmt: skip
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            base, n_tokens = _chosen_probability(model, src, tgt, src_pad, tgt_pad)
            done = 0
            for name in names:
                stack, layer, attn = name.split(".")
                for head in range(c.n_heads):
                    if cancelled is not None and cancelled():
                        return None
                    with intervene(model, [HeadChange(name, head, "zero")]):
                        ablated, _ = _chosen_probability(model, src, tgt, src_pad, tgt_pad)
                    drops[f"{stack}.{attn}"][int(layer), head] = base - ablated
                    done += 1
                    if progress is not None:
                        progress(done, total)
    finally:
        model.train(was_training)
    return HeadImportance(base, drops, n_tokens)


def head_importance_on_pairs(bundle, pairs, batch_size: int = 128) -> HeadImportance:
    """Head importance over many (source, target) pairs, teacher-forced on the gold target: each batch's drops
    weighted by its number of chosen tokens (what `evaluate --head-importance` prints)."""
    from ..running.batching import collate
    from ..training.evaluation import _examples

    model = bundle.model
    if not pairs:
        raise UserError("There are no pairs to measure head importance on.")
    examples = [e for e, _ in _examples(bundle, pairs)]
    total, base, drops = 0, 0.0, None
    for start in range(0, len(examples), batch_size):
        batch = collate(examples[start : start + batch_size], model.device, pad_id=model.config.pad_id or 0)
        part = head_importance(model, batch.src, batch.tgt_in, batch.src_pad, batch.tgt_pad)
        w = part.n_tokens
        base += part.base * w
        drops = {k: v * w for k, v in part.drops.items()} if drops is None else {
            k: drops[k] + v * w for k, v in part.drops.items()}
        total += w
    return HeadImportance(base / total, {k: v / total for k, v in drops.items()}, total)


def format_importance(result: HeadImportance) -> str:
    """A layers × heads table per attention type (layers and heads from 1, as in the window), then each type's
    ranking by the names --ablate takes (from 0, as step names are)."""
    lines = [f"head importance: drop in the mean probability of the chosen tokens ({result.n_tokens} tokens, "
             f"{result.base:.2%} with nothing ablated) when one head is zeroed"]
    for kind, arr in result.drops.items():
        heads = "  ".join(f"head {h + 1:<3}" for h in range(arr.shape[1]))
        lines.append(f"  {kind}:  layer  {heads}")
        for layer, row in enumerate(arr):
            lines.append(f"  {'':<{len(kind) + 1}}  {layer + 1:<5}  " + "  ".join(f"{v:>+8.2%}" for v in row))
        top = ", ".join(f"{head_name(kind, layer, head)} {drop:+.2%}"
                        for layer, head, drop in result.ranking(kind)[:3])
        lines.append(f"  {'':<{len(kind) + 1}}  most important: {top}")
    return "\n".join(lines)
