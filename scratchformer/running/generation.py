"""Continuing a decoder-only model's text (GPT-2 and the like): greedy or sampled, and its step-by-step timeline.

The text goes in behind the start token in one decoder call, which fills the key/value cache; then each new token
goes in alone (paper §3.2.3: the causal mask makes this equal to re-running the whole prefix). The next token is
the argmax of the last row's logits (greedy), or a draw from softmax(logits / T) over the k most likely tokens
(sampling), drawn with a torch.Generator seeded by the caller, so the same seed gives the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ..errors import UserError
from ..recording.trace import tracing
from .decoding import DecodeStep, Timeline, _evaluating, _unpack

DEFAULT_NEW_TOKENS = 20  # the window's and `trace`'s default length of a continuation


@dataclass(frozen=True)
class Continuation:
    """How to continue a text: up to `max_new` tokens, greedy, or sampled at `temperature` from the `top_k`
    most likely tokens (None: the whole vocabulary) with a generator seeded by `seed`."""

    max_new: int = DEFAULT_NEW_TOKENS
    sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    seed: int = 0

    def check(self) -> None:
        """One sentence for a setting no continuation can have."""
        if self.max_new < 1:
            raise UserError(f"The number of new tokens must be at least 1, not {self.max_new}.")
        if not self.temperature > 0:
            raise UserError(f"The temperature must be above 0, not {self.temperature:g}.")
        if self.top_k is not None and self.top_k < 1:
            raise UserError(f"top-k must be at least 1, not {self.top_k}.")

    def describe(self) -> str:
        """'greedy' or 'sampled at temperature 0.8 from the top 40, seed 3' (what the window says it did)."""
        if not self.sample:
            return "greedy"
        pool = f"the top {self.top_k}" if self.top_k is not None else "the whole vocabulary"
        return f"sampled at temperature {self.temperature:g} from {pool}, seed {self.seed}"


def room(config, n_prompt: int) -> int:
    """New tokens that still fit: the start token and the text take 1 + n_prompt of the max_len positions."""
    return max(0, config.max_len - 1 - n_prompt)


def check_fits(config, n_prompt: int, max_new: int) -> None:
    """A continuation that would run past the model's positions, refused in one sentence."""
    free = room(config, n_prompt)
    if max_new > free:
        if free == 0:
            raise UserError(f"The text has {n_prompt} tokens and already fills this model's {config.max_len} "
                            "positions (with the start token); shorten it to leave room for new tokens.")
        raise UserError(f"{max_new} new tokens do not fit: the text has {n_prompt} tokens and this model reads at "
                        f"most {config.max_len} positions (with the start token), so ask for at most {free}.")


def pick(logits: torch.Tensor, how: Continuation, generator: torch.Generator | None) -> int:
    """The next token from one row of logits (vocab,): its argmax, or a seeded draw from the tempered top-k."""
    if not how.sample:
        return int(logits.argmax())
    scores = logits.float() / how.temperature  # (vocab,)
    if how.top_k is not None and how.top_k < scores.numel():
        kth = scores.topk(how.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))  # ties with the k-th stay in, as transformers does
    return int(torch.multinomial(scores.softmax(-1), 1, generator=generator))


def _generator(model, how: Continuation) -> torch.Generator | None:
    return torch.Generator(device=model.device).manual_seed(how.seed) if how.sample else None


def _decoder_only(bundle_or_model):
    model, start, end = _unpack(bundle_or_model)
    if model.config.has_encoder:
        raise UserError("This model has an encoder; it translates its source rather than continuing a text.")
    return model, start, end


def continue_ids(bundle_or_model, prompt: Sequence[int], how: Continuation, stop_at_eos: bool = True) -> list[int]:
    """The new token ids after [start] + prompt (without the end token, where the model chose it)."""
    how.check()
    model, start, end = _decoder_only(bundle_or_model)
    check_fits(model.config, len(prompt), how.max_new)
    generator = _generator(model, how)
    out: list[int] = []
    with _evaluating(model):
        kv = model.new_cache()
        new = torch.tensor([[start, *prompt]], device=model.device)  # (1, 1 + P): the whole text at once
        fed = 0  # positions already in the cache
        for _ in range(how.max_new):
            hidden = model.decode(new, None, None, cache=kv, offset=fed)  # (1, T_new, d_model)
            fed += new.shape[1]
            token = pick(model.generator(hidden[:, -1])[0], how, generator)  # logits (vocab,) → id
            if stop_at_eos and token == end:
                break
            out.append(token)
            new = torch.tensor([[token]], device=model.device)  # (1, 1)
    return out


def continuation_timeline(
    bundle,
    prompt: Sequence[int],
    how: Continuation,
    forced: Sequence[int] | None = None,
    k: int = 8,
) -> Timeline:
    """The continuation one new token per step: what went in, what came out, each self-attention's new row over
    everything read so far (the start token, the text, the new tokens before it) and the top-k next tokens.

    `forced`: the tokens a run already generated (continue_ids' output); they are shown as they were drawn, and
    when they stop short of `how.max_new` the model had chosen its end token there, so a last step shows that.
    Without `forced` the tokens are chosen here, as continue_ids chooses them. The top-k are the model's own
    probabilities, softmax(logits), before any temperature.
    """
    how.check()
    model, start, end = _decoder_only(bundle)
    c, tok = model.config, bundle.tgt_tokenizer
    check_fits(c, len(prompt), how.max_new)
    if forced is not None:
        forced = list(forced)[: how.max_new]
        if len(forced) < how.max_new and end is not None:
            forced.append(end)
    generator = _generator(model, how)
    reads = [start, *prompt]  # what the decoder has read so far
    steps: list[DecodeStep] = []
    with _evaluating(model):
        kv = model.new_cache()
        new = torch.tensor([reads], device=model.device)  # (1, 1 + P)
        fed = 0
        for t in range(how.max_new if forced is None else len(forced)):
            with tracing() as tracer:
                hidden = model.decode(new, None, None, cache=kv, offset=fed)  # (1, T_new, d_model)
            fed += new.shape[1]
            logits = model.generator(hidden[:, -1])[0]  # (vocab,)
            probs = logits.float().softmax(-1)
            top_p, top_i = probs.topk(min(k, probs.numel()))
            chosen = forced[t] if forced is not None else pick(logits, how, generator)
            rows = {s.name: s.tensor for s in tracer.steps if s.kind == "attention_weights"}
            self_rows = [rows[f"decoder.{i}.self_attn.weights"][0, :, -1] for i in range(c.n_decoder_layers)]
            steps.append(DecodeStep(
                position=fed - 1,
                input_token=tok.token_strings([reads[-1]])[0],
                token_id=chosen,
                token=tok.token_strings([chosen])[0],
                top_k=list(zip(tok.token_strings(top_i.tolist()), top_p.tolist())),
                cross_attention=None,
                self_attention=torch.stack(self_rows).float().numpy(),  # (layers, heads, fed)
                hidden=hidden[0, -1].float().cpu().numpy(),
            ))  # fmt: skip
            if chosen == end:
                break
            reads.append(chosen)
            new = torch.tensor([[chosen]], device=model.device)  # (1, 1)
    return Timeline(tok.token_strings([start, *prompt]), steps, "sampled" if how.sample else "free")


def fitted(how: Continuation, config, n_prompt: int) -> tuple[Continuation | None, str]:
    """For the window and `trace`: the continuation cut to the positions left, and a note when it was cut (None
    when no position is left)."""
    free = room(config, n_prompt)
    if free == 0:
        return None, (f"The text fills this model's {config.max_len} positions, so nothing was generated after it.")
    if how.max_new > free:
        return replace(how, max_new=free), (f"Only {free} new tokens fit after the text (this model reads at most "
                                             f"{config.max_len} positions), not {how.max_new}.")
    return how, ""
