"""What a patching sweep measures at the last decoder position: the logit difference of two tokens (the default),
or the log-probability of one.

    logit difference   m = logit[answer] − logit[wrong]
    log-probability    m = log softmax(logits)[answer]

The logits are the model's own (its output scale, logits bias and soft-cap included), but only the rows of the
output layer the metric reads are multiplied for the logit difference: a sweep evaluates the metric once per
patched run, and the whole vocabulary would cost more than the patched layers themselves in a small model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UserError

KINDS = ("logit-diff", "logprob")


@dataclass(frozen=True)
class Metric:
    """m at the last decoder position: logit[answer] − logit[wrong] ("logit-diff") or log P(answer) ("logprob")."""

    answer: int
    answer_token: str
    wrong: int | None = None  # None for "logprob"
    wrong_token: str | None = None
    kind: str = "logit-diff"

    def values(self, model, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (B, d_model): the decoder's last position after its final norm → m (B,)."""
        gen = model.generator
        x = hidden.to(gen.proj.weight.dtype)
        if gen.scale is not None:
            x = x * gen.scale  # T5 v1.0: d_model^-0.5 before the output layer
        if self.kind == "logprob":
            logits = gen.cap(gen.logits(x[:, None]))[:, 0]  # (B, vocab)
            return _wide(logits).log_softmax(-1)[:, self.answer]  # (B,)
        rows = torch.tensor([self.answer, self.wrong], device=x.device)
        # (B, 2): the answer's and the wrong token's logits, as products summed row by row: a matrix product's
        # rounding may depend on how many rows it is given, and a patched batch must give what one run gives
        two = (x[:, None, :] * gen.proj.weight[rows][None]).sum(-1)
        if gen.final_logits_bias is not None:
            two = two + gen.final_logits_bias[rows]
        two = _wide(gen.cap(two))  # soft-capping acts on each logit alone
        return two[:, 0] - two[:, 1]  # (B,)

    def describe(self) -> str:
        """'logit of ' Mary' minus logit of ' John'' — for the output and the explanation."""
        if self.kind == "logprob":
            return f"log-probability of {self.answer_token!r}"
        return f"logit of {self.answer_token!r} minus logit of {self.wrong_token!r}"

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "answer": {"id": self.answer, "token": self.answer_token},
               "position": "last decoder position", "description": self.describe()}  # fmt: skip
        if self.kind == "logit-diff":
            out["wrong"] = {"id": self.wrong, "token": self.wrong_token}
        return out


def _wide(t: torch.Tensor) -> torch.Tensor:
    """float32 for half-precision logits; float64 stays float64 (the tests' finite differences need it)."""
    return t if t.dtype == torch.float64 else t.float()


def read_token(text: str, tokenizer, option: str) -> int:
    """A metric token typed by a person: 'id:N', or a text the tokenizer reads as exactly one known token (mind
    GPT-2's leading space: ' Mary'). One UserError sentence otherwise."""
    vocab = tokenizer.vocab_size
    if text.startswith("id:"):
        try:
            tid = int(text[3:])
        except ValueError:
            raise UserError(f"{option} {text!r}: write id:N with a whole number N from 0 to {vocab - 1}.") from None
        if not 0 <= tid < vocab:
            raise UserError(f"{option} {text!r}: this vocabulary has ids 0 to {vocab - 1}.")
        return tid
    ids = tokenizer.encode(text)
    unknown = tokenizer.unknown_words(text) if tokenizer.unk_id is not None else []
    if unknown or (len(ids) == 1 and ids[0] == tokenizer.unk_id and text != tokenizer.hf.unk_token):
        raise UserError(f"{option} {text!r} is not in this model's vocabulary; give a token it knows, or id:N.")
    if len(ids) != 1:
        pieces = " + ".join(repr(t) for t in tokenizer.token_strings(ids)) or "no token at all"
        raise UserError(f"{option} {text!r} is not one token for this model (it reads {pieces}); give a single "
                        "token (GPT-2 tokens often start with a space, ' Mary'), or id:N.")  # fmt: skip
    return ids[0]


# How the sentences name the metric's inputs: the command line's options by default; the window passes its fields'.
OPTION_NAMES = {"answer": "--answer", "wrong": "--wrong", "logprob": "--metric logprob",
                "tokens": "other --answer/--wrong tokens"}  # fmt: skip


def choose(tokenizer, clean_logits: torch.Tensor, corrupt_logits: torch.Tensor, answer: str | None = None,
           wrong: str | None = None, kind: str = "logit-diff",
           names: dict[str, str] = OPTION_NAMES) -> Metric:  # fmt: skip
    """The sweep's metric: `answer` defaults to the clean run's top token at the last decoder position and
    `wrong` to the corrupted run's (clean_logits, corrupt_logits: (vocab,) there). `names`: what the sentences call
    the inputs (OPTION_NAMES' keys)."""
    if kind not in KINDS:
        raise UserError(f"The metric is one of {', '.join(KINDS)}, not {kind!r}.")
    a = read_token(answer, tokenizer, names["answer"]) if answer else int(clean_logits.argmax())
    name = lambda i: tokenizer.token_strings([i])[0]  # noqa: E731
    if kind == "logprob":
        if wrong:
            raise UserError(f"{names['wrong']} goes with the logit-difference metric, not with {names['logprob']}.")
        return Metric(a, name(a), kind=kind)
    w = read_token(wrong, tokenizer, names["wrong"]) if wrong else int(corrupt_logits.argmax())
    if w == a and not wrong:  # both runs put the same token first: take the corrupted run's best other token
        w = int(corrupt_logits.topk(2).indices[1])
    if w == a:
        raise UserError(f"{names['answer']} and {names['wrong']} are the same token ({name(a)!r}); the logit "
                        "difference needs two.")
    return Metric(a, name(a), w, name(w), kind)
