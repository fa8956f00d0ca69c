"""Logit lens: what the model would predict if its decoder stopped early, at every point of the residual stream.

Each point — after the embeddings and after every sublayer (self-attention, cross-attention, feed-forward) of
every decoder layer — is read through the model's own final norm (if it has one) and output layer, exactly as
the model reads its last point:  P_point = softmax(W_vocab · norm(x_point)). The last point read this way *is*
the model's output. For every decoder position the lens reports the top tokens of each point, and the
probability and rank that each point gives the token the model finally emits there.

An encoder-only model with a masked-language-model head (BERT, RoBERTa, DistilBERT imported with theirs) is read
the same way over its encoder: every point of the encoder's stream goes through the head,
P_point = softmax(MLMHead(x_point)), per source position; the last point is the head's own output, its guess for
the token at each position. An encoder without such a head has no lens.

    compute(bundle, trace) → Lens;  `scratchformer lens --model M --source S [--json]`

The points are the trace's own steps (scratchformer.analyses.stream), so a lens reads the same numbers the window
shows for those steps, interventions included.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import torch

from ..commands.common import print_result, traced_run
from ..errors import UserError
from ..recording.trace import Trace
from .stream import add_run_args, point_label, residual_points

TOP_K = 5


@dataclass
class Lens:
    """The lens of one batch item: for each point (step) × decoder position, its top tokens, and the probability
    and rank (1 = its first choice) of the token the model emits at that position."""

    steps: list[str]  # residual-stream step names, in order
    labels: list[str]  # 'embeddings', 'layer 1 self-attention', …
    positions: list[str]  # the decoder-input tokens (what each position reads); the source tokens for an encoder
    emitted_ids: list[int]  # per position: the model's own most likely token (the last point's first choice): the
    # next token for a decoder, the token at the position itself for an encoder's masked-LM head
    emitted: list[str]
    top_ids: torch.Tensor  # (points, positions, k) int64, most likely first
    top_probs: torch.Tensor  # (points, positions, k)
    top_tokens: list[list[list[str]]]  # points × positions × k
    final_probs: torch.Tensor  # (points, positions): P(emitted token) at each point
    final_ranks: torch.Tensor  # (points, positions) int64, 1 = the point's most likely token
    notes: list[str] = field(default_factory=list)
    stack: str = "decoder"  # whose stream: "decoder", or "encoder" (read through its masked-LM head)

    def to_dict(self) -> dict:
        points = []
        for i, step in enumerate(self.steps):
            top = [[{"id": int(t), "token": s, "p": float(p)} for t, s, p in
                    zip(self.top_ids[i, j].tolist(), self.top_tokens[i][j], self.top_probs[i, j].tolist())]
                   for j in range(len(self.positions))]  # fmt: skip
            final = [{"id": self.emitted_ids[j], "token": self.emitted[j], "p": float(self.final_probs[i, j]),
                      "rank": int(self.final_ranks[i, j])} for j in range(len(self.positions))]  # fmt: skip
            points.append({"step": step, "label": self.labels[i], "top": top, "final": final})
        return {"stack": self.stack, "positions": self.positions, "emitted": [{"id": i, "token": t} for i, t in
                                                         zip(self.emitted_ids, self.emitted)],
                "points": points, "notes": self.notes}  # fmt: skip


def no_output_layer(bundle) -> str | None:
    """Why this model has no lens (one sentence), or None."""
    if bundle.config.has_decoder and bundle.model.generator is not None:
        return None
    if not bundle.config.has_decoder and bundle.model.mlm_head is not None:
        return None
    return ("This model is an encoder alone without an output layer: its folder has no masked-language-model head, "
            "so its residual stream cannot be read as predicted tokens (open a folder with one, such as "
            "BertForMaskedLM's, or a model with a decoder).")  # fmt: skip


def lens_stack(config) -> str:
    """Whose residual stream the lens reads: the decoder's, or an encoder-only model's encoder."""
    return "decoder" if config.has_decoder else "encoder"


@torch.inference_mode()
def read_out(model, x: torch.Tensor) -> torch.Tensor:
    """x (…, d_model), points of the decoder's residual stream → log-probabilities (…, vocab) through the model's
    final norm (if any) and output layer, as the model reads its last point. For an encoder-only model: points of
    the encoder's stream through its final norm (if any) and masked-LM head."""
    if lens_stack(model.config) == "encoder":
        norm, head = model.encoder_norm, model.mlm_head
    else:
        norm, head = model.decoder_norm, model.generator
    param = head.proj.weight
    h = x.to(param.device, param.dtype)
    if norm is not None:
        h = norm(h)  # (…, d_model)
    return head(h).float().log_softmax(-1)  # (…, vocab)


def _sae_at(trace: Trace, point: str) -> bool:
    """Whether an SAE attached to the run reads this point (scratchformer.features.attach)."""
    found = trace.dictionaries.get(point)
    return found is not None and found[1] == found[2] and trace.find(f"{point}.dict.recon") is not None


def compute(bundle, trace: Trace, batch: int = 0, k: int = TOP_K) -> Lens:
    """The lens of batch item `batch` of a traced run. UserError (one sentence) for a model with no output layer."""
    why = no_output_layer(bundle)
    if why is not None:
        raise UserError(why)
    model, c = bundle.model, bundle.config
    stack = lens_stack(c)
    points = residual_points(trace, stack, c.norm_first)
    # an SAE attached at a point of the stream is read too, right after it: what its reconstruction predicts
    steps = [x for p in points for x in (p, *([f"{p}.dict.recon"] if _sae_at(trace, p) else []))]
    labels = [f"{point_label(s.removesuffix('.dict.recon'))} (SAE reconstruction)" if s.endswith(".dict.recon")
              else point_label(s) for s in steps]  # fmt: skip
    read = trace.target_tokens if stack == "decoder" else trace.source_tokens
    positions = list(read[batch]) if read else []
    last = read_out(model, trace[steps[-1]].item(batch))  # (T, vocab)
    emitted_ids = last.argmax(-1)  # (T,)
    k = min(k, last.shape[-1])
    top_ids, top_probs, final_p, final_rank = [], [], [], []
    for name in steps:  # one point at a time: (T, vocab) each, never (points, T, vocab)
        logp = last if name == steps[-1] else read_out(model, trace[name].item(batch))  # (T, vocab)
        top = logp.topk(k, dim=-1)
        top_ids.append(top.indices.cpu())
        top_probs.append(top.values.exp().cpu())
        mine = logp.gather(-1, emitted_ids[:, None])  # (T, 1)
        final_p.append(mine[:, 0].exp().cpu())
        final_rank.append((logp > mine).sum(-1).cpu() + 1)
    tok = bundle.tgt_tokenizer if stack == "decoder" else bundle.src_tokenizer
    top_ids_t = torch.stack(top_ids)  # (points, T, k)
    top_tokens = [[tok.token_strings(row) for row in point.tolist()] for point in top_ids_t]
    ids = emitted_ids.cpu().tolist()
    notes = []
    if trace.interventions:
        notes.append("This run changed the model on purpose (" + "; ".join(i.spec() for i in trace.interventions)
                     + "), and the lens reads the changed run.")  # fmt: skip
    return Lens(steps, labels, positions or tok.token_strings(ids), ids,
                tok.token_strings(ids), top_ids_t, torch.stack(top_probs), top_tokens, torch.stack(final_p),
                torch.stack(final_rank), notes, stack)  # fmt: skip


# --- command line ------------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    p = sub.add_parser("lens", help="logit lens: what each point of the decoder's residual stream would predict",
                       description="Read every point of the decoder's residual stream (after the embeddings and "
                       "after each sublayer) through the model's final norm and output layer; for an "
                       "encoder-only model with a masked-LM head, every point of the encoder's stream through that "
                       "head.")  # fmt: skip
    add_run_args(p)
    from ..commands.common import add_dictionary_args

    add_dictionary_args(p)  # a clamped feature steers the stream the lens reads
    p.add_argument("--top", type=int, default=TOP_K, help=f"tokens listed per point and position (default {TOP_K})")


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UserError(f"--top must be at least 1, not {args.top}.")
    bundle, _, trace, item = traced_run(args)
    lens = compute(bundle, trace, item, args.top)
    return print_result(args.json, lens.to_dict(), lambda: text_report(lens))


def text_report(lens: Lens) -> str:
    """Per position: each point's first choice and the probability (rank) of the token finally emitted (for an
    encoder, the token its masked-LM head finally predicts at the position)."""
    lines = []
    width = max(len(label) for label in lens.labels)
    for j, reads in enumerate(lens.positions):
        if lens.stack == "encoder":
            lines.append(f"source position {j} holds “{reads}” → the masked-LM head predicts “{lens.emitted[j]}”")
        else:
            lines.append(f"position {j} reads “{reads}” → the model emits “{lens.emitted[j]}”")
        for i, label in enumerate(lens.labels):
            first = lens.top_tokens[i][j][0]
            lines.append(f"  {label:<{width}}  first choice “{first}” {float(lens.top_probs[i, j, 0]):.3f}   "
                         f"“{lens.emitted[j]}”: p {float(lens.final_probs[i, j]):.3f}, rank "
                         f"{int(lens.final_ranks[i, j])}")  # fmt: skip
    lines += [f"note: {n}" for n in lens.notes]
    return "\n".join(lines)
