"""A pair task read by a decoder-only model: source and target as one sequence, the target after a separator.

An encoder-decoder reads the source with its encoder and writes the target with its decoder. A decoder-only model
(llama-tiny, GPT) has one stack, so a pair becomes one text that it reads left to right:

    <s> 3 1 4 1 5 <sep> 5 1 4 1 3 </s>

The decoder input is that sequence without its last token, the labels the same sequence shifted one place left,
as in any language model; but only the target and the end token are labels: the source's digits are random, and a
loss on them would teach nothing but the digits' frequencies. So the labels of the start token and the source are
IGNORE, and the first label is the target's first word, predicted at the separator. At test time the prompt is
`<s> source <sep>` and the model continues it greedily until `</s>` (exact match: that continuation equals the
target).

Where the model looks: target word j is predicted at position n + 1 + j (the separator when j = 0, else word j − 1;
n source words at positions 1 … n), and its gold source word alignment[j] sits at position 1 + alignment[j]. For
reversal that is the anti-diagonal of the self-attention map's lower-left block: query n + 1 + j, key n − j.
"""

from __future__ import annotations

from ..loading.tokenizers import TextTokenizer, word_level_tokenizer
from ..running.batching import IGNORE, Example
from .data import TrainData

SEP = "<sep>"  # the separator between source and target: a special token, so the word-level rules keep it whole


def sequence_tokenizer(pairs) -> TextTokenizer:
    """One word-level vocabulary over the training split's sources and targets, plus the separator."""
    tok = word_level_tokenizer((text for p in pairs for text in (p.source, p.target)), "words")
    tok.hf.add_special_tokens({"additional_special_tokens": [SEP]})
    return tok


def separator_id(tok: TextTokenizer) -> int:
    sep = tok.token_id(SEP)
    if sep is None:
        raise ValueError(f"the tokenizer has no {SEP} token")
    return sep


def sequence_example(source_ids: list[int], target_ids: list[int], tok: TextTokenizer) -> Example:
    """<s> source <sep> target </s> as decoder input and labels (IGNORE over the start token and the source).
    The gold alignment stays with the pairs (TrainData.pairs): collate would put it at the source's positions."""
    sequence = [tok.bos_id, *source_ids, separator_id(tok), *target_ids, tok.eos_id]  # (n + m + 3,)
    labels = [IGNORE] * (len(source_ids) + 1) + sequence[len(source_ids) + 2 :]  # (n + m + 2,): the target, </s>
    return Example([], sequence[:-1], labels)


def sequence_examples(pairs, tok: TextTokenizer) -> list[Example]:
    return [sequence_example(tok.encode(p.source), tok.encode(p.target), tok) for p in pairs]


def sequence_data(splits: dict, description: str, tok: TextTokenizer | None = None) -> TrainData:
    """Every split as sequences, with the tokenizer built on the training split (or `tok`, when resuming)."""
    tok = tok or sequence_tokenizer(splits["train"])
    examples = {name: sequence_examples(splits.get(name, []), tok) for name in ("train", "valid", "test")}
    return TrainData(examples["train"], examples["valid"], tok, tok, decoder_only=True, test=examples["test"],
                     description=f"{description}, as one sequence: source {SEP} target", pairs=splits)


def prompt_length(example: Example) -> int:
    """Tokens of the prompt <s> source <sep>: up to the first position with a label; 0 for plain next-token
    windows, whose every position has one."""
    first = next((i for i, label in enumerate(example.labels) if label != IGNORE), 0)
    return first + 1 if first else 0


def complete(model, examples: list[Example], batch_size: int = 256) -> list[list[int] | None]:
    """Each example's greedy continuation of its prompt up to its end token (None: it did not end within the
    target's length + 2 tokens); prompts of one length run as one batch, so no padding is needed."""
    import torch

    from ..running.decoding import _evaluating

    end = model.config.eos_id
    by_length: dict[int, list[int]] = {}
    for i, e in enumerate(examples):
        by_length.setdefault(prompt_length(e), []).append(i)
    out: list[list[int] | None] = [None] * len(examples)
    with _evaluating(model):
        for n_prompt, group in by_length.items():
            for start in range(0, len(group), batch_size):
                chunk = group[start : start + batch_size]
                ys = torch.tensor([examples[i].tgt_in[:n_prompt] for i in chunk], device=model.device)  # (B, P)
                longest = max(len(examples[i].labels) for i in chunk) - n_prompt + 3
                for _ in range(max(0, min(longest, model.config.max_len - n_prompt))):
                    logits = model.generator(model.decode(ys, None, None)[:, -1:])  # (B, 1, V)
                    ys = torch.cat([ys, logits.argmax(-1)], dim=1)  # (B, P + t)
                for i, row in zip(chunk, ys[:, n_prompt:].tolist()):
                    out[i] = row[: row.index(end)] if end in row else None
    return out


def target_of(example: Example) -> list[int]:
    """The target's ids: the labels from the separator on, without the end token."""
    return example.labels[prompt_length(example) - 1 : -1]


def completion_hits(model, examples: list[Example]) -> int:
    """How many examples' greedy continuation of their prompt equals their target exactly (then </s>)."""
    return sum(row == target_of(e) for row, e in zip(complete(model, examples), examples))
