"""The output softmax at a temperature T: P(token) = softmax(logits / T). T < 1 sharpens the distribution toward
the most likely token (T → 0 is greedy decoding); T > 1 flattens it toward uniform. Greedy decoding always takes
the most likely token; sampling draws one from the tempered distribution (seeded here, so the same seed gives the
same text), which at high T wanders off.

Measured on one decoder position's next-token distribution (the decoder input is the typed target or the
model's own greedy output), and on a greedy and a sampled translation.
"""

from __future__ import annotations

import math

import torch

from ..errors import UserError
from ..running.decoding import greedy
from ..running.generation import Continuation, continue_ids, pick
from .inputs import encoded, read_text
from .measures import entropy

TITLE = "Temperature"
CLAIM = ("Dividing the logits by a temperature T sharpens the next-token distribution below 1 and flattens it "
         "above: entropy grows with T, and sampled text drifts from the greedy one.")  # fmt: skip
CONTROLS = {"temperature": 1.0, "seed": 0, "position": 0}
CURVE_T = tuple(round(0.1 * 10 ** (i / 10), 4) for i in range(21))  # 0.1 … 10, log-spaced
TOP = 8
MAX_T = 100.0


def applies(bundle) -> str | None:
    if not bundle.config.has_decoder:
        return (f"The temperature experiment needs an output softmax over next tokens, and {bundle.name} has no "
                "decoder to produce one.")  # fmt: skip
    return None


def distribution(logits: torch.Tensor, temperature: float) -> dict:
    """Entropy (nats) and top probability of softmax(logits / T) for one row of logits (vocab,)."""
    p = (logits.double() / temperature).softmax(-1)
    return {"temperature": temperature, "entropy": float(entropy(p)), "top_probability": float(p.max())}


def sampled_translation(bundle, src: torch.Tensor, how: Continuation) -> list[int]:
    """An encoder-decoder's translation (1, S) → ids, drawn token by token from softmax(logits / T) with a seeded
    generator on the model's device: greedy decoding's loop with a draw in place of the argmax (a decoder-only
    model continues its text with scratchformer.running.generation instead)."""
    model, prefix = bundle.model, bundle.target_prefix()
    gen = torch.Generator(device=model.device).manual_seed(how.seed)
    limit = bundle.generation_limit(src.shape[1]) - len(prefix)  # start + prefix + draws fit the positions
    return greedy(bundle, src[0], limit, prefix=prefix, choose=lambda logits: pick(logits, how, gen))


def run(bundle, source: str, target: str | None = None, temperature: float = 1.0, seed: int = 0,
        position: int = 0) -> dict:  # fmt: skip
    temperature = float(temperature)
    if not 0 < temperature <= MAX_T or math.isnan(temperature):
        raise UserError(f"The temperature must be above 0 and at most {MAX_T:g}, not {temperature:g}.")
    text = read_text(bundle, source, target)
    model, c = bundle.model, bundle.config
    n = text.tgt.shape[1]
    position = int(position)
    if not 0 <= position < n:
        raise UserError(f"Position {position} is outside the decoder input (positions 0 to {n - 1}).")
    memory = encoded(model, text.src)
    with torch.inference_mode():
        logits = model.generator(model.decode(text.tgt, memory))[0, position]  # (vocab,)
    p = (logits.double() / temperature).softmax(-1)
    top = p.topk(min(TOP, p.numel()))
    tok = bundle.tgt_tokenizer
    greedy_top = int(logits.argmax())
    # a decoder-only model continues its text into the positions left (at most 20 tokens); with none left,
    # continue_ids says so in one sentence
    how = Continuation(max_new=min(20, max(1, c.max_len - n)), sample=True, temperature=temperature,
                       seed=int(seed))  # fmt: skip
    if c.has_encoder:
        greedy_ids = bundle.prepare_run(source).generated
        sampled_ids = sampled_translation(bundle, text.src, how)
    else:
        prompt = tok.encode(source.strip())
        greedy_ids = continue_ids(bundle, prompt, Continuation(max_new=how.max_new))
        sampled_ids = continue_ids(bundle, prompt, how)
    at_t = distribution(logits, temperature)
    at_t["top"] = [{"token": tok.token_strings([int(i)])[0], "p": float(v)} for v, i in zip(top.values, top.indices)]
    result = {
        "temperature": temperature,
        "position": position,
        "context_tokens": text.target_tokens[: position + 1],
        "next_token": at_t,
        "at_1": distribution(logits, 1.0),
        "greedy_token": tok.token_strings([greedy_top])[0],
        "curve": [distribution(logits, t) for t in CURVE_T],
        "greedy": {"text": tok.decode(greedy_ids)},
        "sampled": {"text": tok.decode(sampled_ids), "seed": int(seed)},
        "uniform_entropy": math.log(logits.numel()),
    }
    sampled = result["sampled"]["text"]
    at_one = f" (at T = 1: {result['at_1']['entropy']:.2f})" if temperature != 1.0 else ""
    result["summary"] = (f"At T = {temperature:g} the next token after “{result['context_tokens'][-1]}” has entropy "
                         f"{at_t['entropy']:.2f} nats{at_one} and top probability "
                         f"{at_t['top_probability']:.2f}; sampled with seed {int(seed)}: “{sampled}”.")
    return result
