"""Autoregressive decoding: greedy and beam search with a key/value cache, and the step-by-step timeline.

The decoder is run one token at a time. With the cache (model.new_cache()) each step feeds only the newest
token: self-attention appends its key and value to those of earlier positions, cross-attention computes the
encoder's keys and values once. Without the cache every step re-runs the whole prefix — the same numbers,
because the causal mask already hides later positions from earlier ones (paper §3.2.3).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import UserError
from ..recording.trace import tracing
from ..transformer.masks import pad_from_ids
from ..transformer.model import Transformer


@dataclass
class DecodeStep:
    """One decoder position: what went in, what came out, and where it looked."""

    position: int  # 0-based decoder position (0 = the start token goes in)
    input_token: str  # the token fed to the decoder at this position
    token_id: int  # the token emitted (free-running) or forced (teacher forcing) at this step
    token: str
    top_k: list[tuple[str, float]]  # the k most probable next tokens with their probabilities
    cross_attention: np.ndarray | None  # (layers, heads, src_len) — the new row of every cross-attention
    self_attention: np.ndarray  # (layers, heads, position + 1) — the new row of every masked self-attention
    hidden: np.ndarray  # (d_model,) the decoder's final output for this position


@dataclass
class Timeline:
    """A whole decode, one DecodeStep per generated (or forced) token."""

    source_tokens: list[str]
    steps: list[DecodeStep] = field(default_factory=list)
    mode: str = "free"  # "teacher" (the typed target is forced) or "free" (the model's argmax is fed back)
    unknown_words: list[str] = field(default_factory=list)

    @property
    def output_tokens(self) -> list[str]:
        return [s.token for s in self.steps]


# --------------------------------------------------------------------------------------------- helpers


def _unpack(bundle_or_model) -> tuple[Transformer, int, int | None]:
    """(model, start id, end id) from a ModelBundle or a bare Transformer."""
    model = getattr(bundle_or_model, "model", bundle_or_model)
    if not isinstance(model, Transformer):
        raise TypeError(f"expected a ModelBundle or Transformer, got {type(bundle_or_model).__name__}")
    if not model.config.has_decoder:
        raise UserError("This model has no decoder, so it cannot generate text.")
    if hasattr(bundle_or_model, "start_id"):
        start = bundle_or_model.start_id()
        end = bundle_or_model.end_id()
    else:
        start, end = model.config.bos_id, model.config.eos_id
        if start is None:
            raise UserError("This model's config has no bos_id, so decoding has no start token.")
    return model, start, end


@contextlib.contextmanager
def _evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Dropout off and no autograd while decoding; the model's train/eval mode is restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def _as_src(model: Transformer, src_ids) -> torch.Tensor | None:
    if not model.config.has_encoder:
        return None
    src = torch.as_tensor(src_ids, dtype=torch.long, device=model.device)
    if src.dim() == 1:
        src = src[None]  # (1, S)
    if src.shape[0] != 1:
        raise ValueError("decode one sentence at a time: src_ids must be (S,) or (1, S)")
    return src


def _encode(model: Transformer, src: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    if src is None:
        return None, None
    src_pad = pad_from_ids(src, model.config.pad_id)
    return model.encode(src, src_pad), src_pad


def _step_budget(model: Transformer, max_len: int, n_prefix: int) -> int:
    """Tokens that may still be generated: positions run up to the model's max_len."""
    return max(0, min(max_len, model.config.max_len - n_prefix))


# ---------------------------------------------------------------------------------------------- greedy


def greedy(
    bundle_or_model,
    src_ids: Sequence[int] | torch.Tensor,
    max_len: int,
    cache: bool = True,
    stop_at_eos: bool = True,
    prefix: Sequence[int] = (),
    choose: Callable[[torch.Tensor], int] | None = None,
) -> list[int]:
    """Generated token ids (without the start token, and without the end token if one was produced).

    src_ids: (S,) source ids (ignored by decoder-only models); `prefix`: target ids to force first (a prompt).
    With stop_at_eos=False exactly max_len tokens are generated (what the benchmark needs). `choose` picks the
    next id from one row of logits (vocab,) instead of the argmax: a seeded draw (generation.pick) samples.
    """
    model, start, end = _unpack(bundle_or_model)
    with _evaluating(model):
        src = _as_src(model, src_ids)
        memory, src_pad = _encode(model, src)
        ys = [start, *prefix]
        out: list[int] = []
        kv = model.new_cache() if cache else None
        fed = 0  # positions already in the cache
        for _ in range(_step_budget(model, max_len, len(ys))):
            if cache:
                new = torch.tensor([ys[fed:]], device=model.device)  # (1, T_new)
                hidden = model.decode(new, memory, src_pad, cache=kv, offset=fed)  # (1, T_new, d)
                fed = len(ys)
            else:
                hidden = model.decode(torch.tensor([ys], device=model.device), memory, src_pad)  # (1, T, d)
            logits = model.generator(hidden[:, -1:])  # (1, 1, vocab)
            next_id = int(logits[0, -1].argmax()) if choose is None else choose(logits[0, -1])
            if stop_at_eos and next_id == end:
                break
            ys.append(next_id)
            out.append(next_id)
        return out


# ------------------------------------------------------------------------------------------ beam search


def _reorder(kv: list[dict], index: torch.Tensor) -> None:
    """Keep only the beams in `index` (with repeats) in every layer's self-attention cache."""
    for layer in kv:
        self_cache = layer.get("self", {})
        for name in ("k", "v"):
            if name in self_cache:
                self_cache[name] = self_cache[name].index_select(0, index)  # (n, h, T, d_k)
        cross = layer.get("cross", {})
        for name in ("k", "v"):
            if name in cross and cross[name].shape[0] != len(index):
                cross[name] = cross[name][:1].expand(len(index), -1, -1, -1)  # one source for all beams
        for part in (self_cache, cross):  # a mean-ablated head's running sum (scratchformer.patching.interventions)
            for name in [n for n in part if n.startswith("mean_sum")]:
                part[name] = part[name].index_select(0, index)  # (n, d_k)


def beam_search(
    bundle_or_model,
    src_ids: Sequence[int] | torch.Tensor,
    max_len: int,
    k: int = 4,
    cache: bool = True,
    length_penalty: float = 0.6,
) -> list[int]:
    """The best of k beams by log-probability / lp(length), lp = ((5 + len) / 6)^α (Wu et al. 2016, α = 0.6
    as in the paper §6.1). Returns ids without the start and end tokens. k = 1 is greedy search."""
    if k < 1:
        raise UserError(f"The beam size must be at least 1, not {k}.")
    model, start, end = _unpack(bundle_or_model)

    def normalised(score: float, length: int) -> float:
        return score / (((5 + length) / 6) ** length_penalty)

    with _evaluating(model):
        src = _as_src(model, src_ids)
        memory, src_pad = _encode(model, src)
        beams: list[list[int]] = [[start]]  # active hypotheses, each starting with the start token
        scores = torch.zeros(1, device=model.device)  # (n,) summed log-probabilities
        finished: list[tuple[float, list[int]]] = []
        kv = model.new_cache() if cache else None
        for step in range(_step_budget(model, max_len, 1)):
            n = len(beams)
            if cache:
                new = torch.tensor([[b[-1]] for b in beams], device=model.device)  # (n, 1)
                mem = memory.expand(n, -1, -1) if memory is not None else None
                pad = src_pad.expand(n, -1) if src_pad is not None else None
                hidden = model.decode(new, mem, pad, cache=kv, offset=step)  # (n, 1, d)
            else:
                ys = torch.tensor(beams, device=model.device)  # (n, T)
                mem = memory.expand(n, -1, -1) if memory is not None else None
                pad = src_pad.expand(n, -1) if src_pad is not None else None
                hidden = model.decode(ys, mem, pad)  # (n, T, d)
            logp = model.generator(hidden[:, -1]).float().log_softmax(-1)  # (n, vocab)
            total = (scores[:, None] + logp).flatten()  # (n·vocab,)
            top_scores, top_index = total.topk(min(2 * k, total.numel()))
            vocab = logp.shape[-1]
            new_beams, new_scores, parents = [], [], []
            for s, i in zip(top_scores.tolist(), top_index.tolist()):
                parent, token = divmod(i, vocab)
                if token == end:  # |Y| = its tokens + the end token = len(beams[parent]) (which holds the start)
                    finished.append((normalised(s, len(beams[parent])), beams[parent][1:]))
                else:
                    new_beams.append(beams[parent] + [token])
                    new_scores.append(s)
                    parents.append(parent)
                if len(new_beams) == k:
                    break
            best_active = normalised(max(new_scores), len(new_beams[0])) if new_beams else float("-inf")
            if not new_beams or (len(finished) >= k and max(f[0] for f in finished) >= best_active):
                break
            beams = new_beams
            scores = torch.tensor(new_scores, device=model.device)
            if cache:
                _reorder(kv, torch.tensor(parents, device=model.device))
        else:  # the budget cut these off: |Y| is their tokens (no end token; b[0] is the start token)
            finished.extend((normalised(float(s), len(b) - 1), b[1:]) for s, b in zip(scores.tolist(), beams))
        if not finished:
            finished.extend((normalised(float(s), len(b) - 1), b[1:]) for s, b in zip(scores.tolist(), beams))
        return max(finished, key=lambda f: f[0])[1]


# --------------------------------------------------------------------------------------------- timeline


def timeline(
    bundle,
    source: str,
    target: str | None = None,
    k: int = 5,
    max_steps: int | None = None,
) -> Timeline:
    """Decode `source` one token at a time with the KV cache, recording each step's new attention rows.

    With a `target` the typed target is forced (teacher forcing: its tokens, then the end token); without
    one the model's own most probable token is fed back (free-running) until the end token or `max_steps`.
    For a decoder-only model the source is the prompt: its tokens are forced first, then the target's or
    generation; an encoder-decoder's target prefix (mBART's language code) is forced first likewise
    (`forced_ids`).
    """
    model, start, end = _unpack(bundle)
    c = model.config
    source = (source or "").strip()
    target = (target or "").strip()
    if not source:
        raise UserError("The source text is empty; type a sentence first.")
    src_tok, tgt_tok = bundle.src_tokenizer, bundle.tgt_tokenizer
    unknown = src_tok.unknown_words(source) + (tgt_tok.unknown_words(target) if target else [])
    src_ids, lead, forced = forced_ids(bundle, source, target)
    source_tokens = src_tok.token_strings(src_ids) if c.has_encoder else tgt_tok.token_strings(lead)
    mode = "teacher" if target else "free"
    limit = c.max_len - 1  # the start token takes position 0
    if max_steps is None:
        max_steps = len(forced) if target else min(limit, 2 * len(source_tokens) + 10 + len(lead))
    if target and len(forced) > limit + 1:
        raise UserError(
            f"The target has {len(forced)} tokens but this model reads at most {c.max_len}; shorten it."
        )
    n_steps = min(max_steps, limit + 1)

    steps: list[DecodeStep] = []
    with _evaluating(model):
        src = _as_src(model, src_ids) if c.has_encoder else None
        memory, src_pad = _encode(model, src)
        kv = model.new_cache()
        current = start
        for pos in range(n_steps):
            with tracing() as tracer:
                hidden = model.decode(torch.tensor([[current]], device=model.device), memory, src_pad,
                                      cache=kv, offset=pos)  # (1, 1, d_model)
            probs = model.generator(hidden)[0, -1].float().softmax(-1)  # (vocab,)
            top_p, top_i = probs.topk(min(k, probs.numel()))
            top_names = tgt_tok.token_strings(top_i.tolist())
            chosen = forced[pos] if pos < len(forced) else int(top_i[0])
            rows = {s.name: s.tensor for s in tracer.steps if s.kind == "attention_weights"}
            self_rows = [rows[f"decoder.{i}.self_attn.weights"][0, :, -1] for i in range(c.n_decoder_layers)]
            cross = None
            if c.has_encoder:
                cross_rows = [rows[f"decoder.{i}.cross_attn.weights"][0, :, -1]
                              for i in range(c.n_decoder_layers)]
                cross = torch.stack(cross_rows).numpy()  # (layers, heads, src_len)
            steps.append(DecodeStep(
                position=pos,
                input_token=tgt_tok.token_strings([current])[0],
                token_id=chosen,
                token=tgt_tok.token_strings([chosen])[0],
                top_k=[(name, float(p)) for name, p in zip(top_names, top_p.tolist())],
                cross_attention=cross,
                self_attention=torch.stack(self_rows).numpy(),  # (layers, heads, pos + 1)
                hidden=hidden[0, -1].float().cpu().numpy(),
            ))
            if pos >= len(forced) and chosen == end:
                break
            if target and pos + 1 >= len(forced):
                break
            current = chosen
    return Timeline(source_tokens, steps, mode, unknown)


def forced_ids(bundle, source: str, target: str) -> tuple[list[int], list[int], list[int]]:
    """(source ids, lead, forced): what step-by-step decoding of `source` forces after the start token. The lead
    comes first — a decoder-only model's text (its prompt), or an encoder-decoder's target prefix — then, when a
    target is typed, its tokens and the end token. Source ids are empty for a decoder-only model."""
    end = bundle.end_id()
    if bundle.config.has_encoder:
        src_ids, lead = bundle.encode_source(source), bundle.target_prefix()
    else:
        src_ids, lead = [], bundle.tgt_tokenizer.encode(source)
    typed = bundle.tgt_tokenizer.encode(target) + ([end] if end is not None else []) if target else []
    return src_ids, lead, lead + typed


def teacher_forced_hidden(bundle, source: str, target: str) -> np.ndarray:
    """(T, d_model) decoder outputs of one full teacher-forced pass over what `timeline` feeds one token at a
    time — [start] + the lead (prompt or target prefix) + the typed target — the reference the step-by-step
    timeline must reproduce row by row (the causal mask at work)."""
    source, target = (source or "").strip(), (target or "").strip()
    src_ids, lead, forced = forced_ids(bundle, source, target)
    fed = forced[: len(forced) - 1] if target else forced  # the end token is predicted, never fed
    model = bundle.model
    dev = model.device
    src = torch.tensor([src_ids]) if model.config.has_encoder else None  # (1, S)
    src_pad = pad_from_ids(src, model.config.pad_id)  # (1, S) or None, read on the CPU
    src_pad = src_pad.to(dev) if src_pad is not None else None
    with _evaluating(model):
        memory = model.encode(src.to(dev), src_pad) if src is not None else None
        tgt = torch.tensor([[bundle.start_id(), *fed]], device=dev)  # (1, T)
        hidden = model.decode(tgt, memory, src_pad)  # (1, T, d_model)
    return hidden[0].float().cpu().numpy()


def greedy_batch(
    bundle_or_model,
    src: torch.Tensor | None,
    src_pad: torch.Tensor | None,
    max_len: int,
    batch: int | None = None,
    cache: bool = True,
    stop_at_eos: bool = True,
) -> list[list[int]]:
    """Greedy decoding of a padded batch at once: src (B, S), src_pad (B, S) True at padding.

    Returns one id list per row, cut before its end token. For a decoder-only model pass src=None and `batch`.
    """
    model, start, end = _unpack(bundle_or_model)
    with _evaluating(model):
        b = src.shape[0] if src is not None else int(batch or 1)
        memory = model.encode(src, src_pad) if src is not None else None
        kv = model.new_cache() if cache else None
        ys = torch.full((b, 1), start, dtype=torch.long, device=model.device)  # (B, 1)
        done = torch.zeros(b, dtype=torch.bool, device=model.device)
        for step in range(_step_budget(model, max_len, 1)):
            if cache:
                hidden = model.decode(ys[:, -1:], memory, src_pad, cache=kv, offset=step)  # (B, 1, d)
            else:
                hidden = model.decode(ys, memory, src_pad)  # (B, step + 1, d)
            current = model.generator(hidden[:, -1:]).argmax(-1)  # (B, 1)
            ys = torch.cat([ys, current], dim=1)  # (B, step + 2)
            done |= current[:, 0] == end
            if stop_at_eos and bool(done.all()):
                break
        rows = []
        for row in ys[:, 1:].tolist():
            rows.append(row[: row.index(end)] if stop_at_eos and end in row else row)
        return rows
