"""Test-split figures for a trained model: exact-match accuracy, and how well cross-attention aligns words.

Alignment accuracy: for each target word j of a gold (teacher-forced) pass, take the cross-attention row of
the decoder position that emits word j (its input is word j−1), and ask whether its argmax over the source
lands on the gold source word. Computed for every layer with the heads averaged, and for every single head.
The figure reported is the heads-averaged layer stored in the model's config (extra["alignment_layer"]),
which training chooses on the validation split — never on the test split.

A decoder-only model trained on pairs as one sequence (`<s> source <sep> target`, training/sequences.py) is scored
on its self-attention, with one difference: the row taken is that of the position that *reads* target word j, and
its argmax over every position it may see is compared with the position of word j's gold source word. A decoder
has no encoder that hands each source position the word's meaning; what two layers learn instead (as in an
induction head) is a first layer that copies each word into the next position, and a second whose row of word j
finds word j in the source and reads what was copied there: the word that comes next. For reversal that is the
anti-diagonal through the separator (the row of the k-th word after <sep> looks k positions before it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..errors import UserError
from ..recording.intervention_context import head_name
from ..recording.trace import tracing
from ..running.batching import collate
from ..running.decoding import greedy_batch


@dataclass
class Evaluation:
    split: str
    n_pairs: int
    exact_match: float
    n_words: int = 0  # target words with a gold alignment that were scored
    layer_accuracy: list[float] = field(default_factory=list)  # heads averaged, per decoder layer
    head_accuracy: list[list[float]] = field(default_factory=list)  # (layers × heads)
    chosen_layer: int | None = None
    chosen_by: str = ""
    skipped: int = 0  # pairs whose words did not map one-to-one onto tokens (or had no alignment)
    examples: list[dict] = field(default_factory=list)  # a few wrong translations, for people
    guided_head: tuple[int, int] | None = None  # (layer, head) trained with guided alignment, if any
    attention: str = "cross_attn"  # the attention scored: cross_attn, or self_attn for a decoder-only sequence model

    @property
    def alignment_accuracy(self) -> float | None:
        if self.chosen_layer is None or not self.layer_accuracy:
            return None
        return self.layer_accuracy[self.chosen_layer]

    @property
    def best_head(self) -> tuple[int, int, float] | None:
        if not self.head_accuracy:
            return None
        arr = np.asarray(self.head_accuracy)
        layer, head = np.unravel_index(int(arr.argmax()), arr.shape)
        return int(layer), int(head), float(arr[layer, head])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["alignment_accuracy"] = self.alignment_accuracy
        d["best_head"] = self.best_head
        return d


def _examples(bundle, pairs):
    """(Example, scorable) per pair: scorable when every word is one token and the pair has an alignment."""
    from ..running.batching import Example

    src_tok, tgt_tok = bundle.src_tokenizer, bundle.tgt_tokenizer
    start, end = bundle.start_id(), bundle.config.eos_id
    out = []
    for p in pairs:
        src = bundle.encode_source(p.source)
        words = tgt_tok.encode(p.target)
        one_to_one = (len(words) == len(p.target.split())
                      and len(src_tok.encode(p.source)) == len(p.source.split()))
        out.append((Example(src, [start] + words, words + [end], tuple(p.alignment)),
                    bool(p.alignment) and one_to_one))
    return out


def _score(rows: torch.Tensor, gold: torch.Tensor, layer: int, layer_hits, head_hits) -> int:
    """Count one sentence's alignment hits of layer `layer`: rows (h, n_words, keys) of each head's map, gold
    (n_words,) the key each word belongs to; the heads' mean map for the layer, each head's own for the heads.
    Returns the words counted (once per sentence: on layer 0)."""
    layer_hits[layer] += int((rows.mean(0).argmax(-1) == gold).sum())
    head_hits[layer] += (rows.argmax(-1) == gold[None]).sum(-1).numpy()
    return len(gold) if layer == 0 else 0


def _prefix_len(bundle) -> int:
    """Source tokens put before the first word (extra["src_prefix"]): alignment indices shift by this."""
    return len(bundle._special("src_prefix", bundle.src_tokenizer))


@torch.no_grad()
def evaluate(bundle, pairs, split: str = "test", layer: int | None = None, batch_size: int = 128,
             alignment_only: bool = False) -> Evaluation:
    """Exact match (greedy decoding) and cross-attention alignment accuracy on `pairs`."""
    model = bundle.model
    c = model.config
    sequences = c.has_decoder and not c.has_encoder and bool(c.extra.get("sequence"))
    if not (c.has_encoder and c.has_decoder) and not sequences:
        raise UserError("Evaluation needs an encoder-decoder model (source → target), or a decoder-only model "
                        "trained on pairs as one sequence (scratchformer train --preset).")
    if not pairs:
        raise UserError(f"The {split} split is empty; there is nothing to evaluate.")
    if sequences:
        return _finish_choice(_evaluate_sequences(bundle, pairs, split, batch_size, alignment_only), c, layer)
    items = _examples(bundle, pairs)
    shift = _prefix_len(bundle)
    was_training = model.training
    model.eval()
    hits, wrong = 0, []
    layer_hits = np.zeros(c.n_decoder_layers)
    head_hits = np.zeros((c.n_decoder_layers, c.n_heads))
    n_words, skipped = 0, 0
    try:
        for startpos in range(0, len(items), batch_size):
            chunk = items[startpos : startpos + batch_size]
            examples = [e for e, _ in chunk]
            batch = collate(examples, model.device, pad_id=c.pad_id or 0)
            if not alignment_only:
                rows = greedy_batch(model, batch.src, batch.src_pad, max(len(e.labels) for e in examples) + 5)
                for (e, _), row, pair in zip(chunk, rows, pairs[startpos : startpos + batch_size]):
                    if row == e.labels[:-1]:
                        hits += 1
                    elif len(wrong) < 5:
                        wrong.append({"source": pair.source, "gold": pair.target,
                                      "output": bundle.tgt_tokenizer.decode(row)})
            scorable = [i for i, (_, ok) in enumerate(chunk) if ok]
            skipped += len(chunk) - len(scorable)
            if not scorable:
                continue
            with tracing() as tracer:
                model.decode(batch.tgt_in, model.encode(batch.src, batch.src_pad), batch.src_pad, batch.tgt_pad)
            weights = {s.name: s.tensor for s in tracer.steps if s.kind == "attention_weights"}
            for li in range(c.n_decoder_layers):
                w = weights[f"decoder.{li}.cross_attn.weights"]  # (B, h, T, S)
                for i in scorable:
                    gold = torch.tensor(chunk[i][0].alignment) + shift  # (n_words,)
                    rows = w[i, :, : len(gold)]  # (h, n_words, S): row j emits target word j
                    n_words += _score(rows, gold, li, layer_hits, head_hits)
    finally:
        model.train(was_training)
    result = Evaluation(split, len(pairs), hits / len(pairs) if not alignment_only else float("nan"),
                        n_words, skipped=skipped, examples=wrong)
    if n_words:
        result.layer_accuracy = (layer_hits / n_words).tolist()
        result.head_accuracy = (head_hits / n_words).tolist()
    return _finish_choice(result, c, layer)


def _evaluate_sequences(bundle, pairs, split: str, batch_size: int, alignment_only: bool) -> Evaluation:
    """evaluate() for a decoder-only model that reads `<s> source <sep> target`: exact match of its greedy
    continuation of `<s> source <sep>`, and where the self-attention row of each target word looks (the row
    that reads it: see the module's docstring)."""
    from .sequences import complete, sequence_example, target_of

    model, c, tok = bundle.model, bundle.config, bundle.tgt_tokenizer
    items = []
    for p in pairs:
        src, tgt = tok.encode(p.source), tok.encode(p.target)
        one_to_one = len(src) == len(p.source.split()) and len(tgt) == len(p.target.split())
        items.append((sequence_example(src, tgt, tok), len(src), bool(p.alignment) and one_to_one))
    hits, wrong = 0, []
    if not alignment_only:
        rows = complete(model, [e for e, _, _ in items], batch_size)
        for (e, _, _), row, pair in zip(items, rows, pairs):
            if row == target_of(e):
                hits += 1
            elif len(wrong) < 5:
                wrote = tok.decode(row) if row is not None else "(no end token)"
                wrong.append({"source": pair.source, "gold": pair.target, "output": wrote})
    layer_hits = np.zeros(c.n_decoder_layers)
    head_hits = np.zeros((c.n_decoder_layers, c.n_heads))
    n_words, skipped = 0, sum(not ok for _, _, ok in items)
    scorable = [(e, n, p) for (e, n, ok), p in zip(items, pairs) if ok]
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(scorable), batch_size):
            chunk = scorable[start : start + batch_size]
            batch = collate([e for e, _, _ in chunk], model.device, pad_id=c.pad_id or 0)
            with torch.no_grad(), tracing() as tracer:
                model.decode(batch.tgt_in, None, None, batch.tgt_pad)
            weights = {s.name: s.tensor for s in tracer.steps if s.kind == "attention_weights"}
            for li in range(c.n_decoder_layers):
                w = weights[f"decoder.{li}.self_attn.weights"]  # (B, h, T, T)
                for i, (_, n, pair) in enumerate(chunk):
                    gold = torch.tensor(pair.alignment) + 1  # (m,): source word k sits at position 1 + k
                    rows = w[i, :, n + 2 : n + 2 + len(gold)]  # (h, m, T): row n + 2 + j reads target word j
                    n_words += _score(rows, gold, li, layer_hits, head_hits)
    finally:
        model.train(was_training)
    result = Evaluation(split, len(pairs), hits / len(pairs) if not alignment_only else float("nan"), n_words,
                        skipped=skipped, examples=wrong, attention="self_attn")
    if n_words:
        result.layer_accuracy = (layer_hits / n_words).tolist()
        result.head_accuracy = (head_hits / n_words).tolist()
    return result


def _finish_choice(result: Evaluation, c, layer: int | None) -> Evaluation:
    """The guided head and the layer whose heads-averaged alignment is reported (--layer, the model's stored
    choice, or the best on this split when it stores none)."""
    if result.layer_accuracy:
        guided = c.extra.get("guided_alignment")
        if guided and 0 <= guided["layer"] < c.n_decoder_layers and 0 <= guided["head"] < c.n_heads:
            result.guided_head = (int(guided["layer"]), int(guided["head"]))
        stored = c.extra.get("alignment_layer")
        if layer is not None:
            if not 0 <= layer < c.n_decoder_layers:
                raise UserError(f"Decoder layer {layer + 1} does not exist; this model has decoder layers "
                                f"1 to {c.n_decoder_layers}.")
            result.chosen_layer, result.chosen_by = layer, "--layer"
        elif stored is not None and 0 <= int(stored) < c.n_decoder_layers:
            result.chosen_layer = int(stored)
            result.chosen_by = "the model's alignment_layer (chosen on the validation split)"
        else:
            result.chosen_layer = int(np.argmax(result.layer_accuracy))
            result.chosen_by = f"best heads-averaged layer on this {result.split} split (the model stores no choice)"
    return result


def choose_alignment_layer(bundle, valid_pairs) -> tuple[int, list[float]] | None:
    """The decoder layer whose heads-averaged cross-attention aligns best on the validation pairs."""
    if not valid_pairs or not any(p.alignment for p in valid_pairs):
        return None
    result = evaluate(bundle, valid_pairs, "valid", alignment_only=True)
    if not result.layer_accuracy:
        return None
    return int(np.argmax(result.layer_accuracy)), result.layer_accuracy


def _head_name(layer: int, head: int, attention: str = "cross_attn") -> str:
    """'decoder layer 2, head 1 (decoder.1.cross_attn.head0)': counted from 1 as in the window, then the name
    --ablate takes (counted from 0, as step names are)."""
    return f"decoder layer {layer + 1}, head {head + 1} ({head_name(f'decoder.{attention}', layer, head)})"


def format_table(result: Evaluation, model_name: str) -> str:
    """The figures as text, layers and heads counted from 1 as in the window (the JSON keeps 0-based lists)."""
    lines = [f"model {model_name} on the {result.split} split ({result.n_pairs} pairs)"]
    lines.append(f"exact match (greedy): {result.exact_match:.2%}")
    if not result.layer_accuracy:
        lines.append("alignment accuracy: not available (no gold alignment, or words are not single tokens)")
        return "\n".join(lines)
    n_heads = len(result.head_accuracy[0])
    if result.attention == "cross_attn":
        lines.append(f"cross-attention alignment accuracy over {result.n_words} target words "
                     "(argmax of the row that emits each word == its gold source word):")
    else:
        lines.append(f"self-attention alignment accuracy over {result.n_words} target words "
                     "(argmax of the row that reads each word == the position of its gold source word):")
    head_cols = "  ".join(f"head {h + 1:<3}" for h in range(n_heads))
    lines.append(f"  {'layer':<6} {'heads avg':>9}  {head_cols}")
    for li, acc in enumerate(result.layer_accuracy):
        heads = "  ".join(f"{a:>8.2%}" for a in result.head_accuracy[li])
        mark = "  ←" if li == result.chosen_layer else ""
        lines.append(f"  {li + 1:<6} {acc:>9.2%}  {heads}{mark}")
    layer, head, acc = result.best_head
    lines.append(f"alignment accuracy (decoder layer {result.chosen_layer + 1}, heads averaged; chosen by "
                 f"{result.chosen_by}): {result.alignment_accuracy:.2%}")
    lines.append(f"best single head: {_head_name(layer, head, result.attention)}: {acc:.2%}")
    if result.guided_head is not None:
        gl, gh = result.guided_head
        named = _head_name(gl, gh, result.attention)
        lines.append(f"guided head (trained on the gold alignment, chosen before testing): {named}: "
                     f"{result.head_accuracy[gl][gh]:.2%}")
    if result.skipped:
        lines.append(f"({result.skipped} pairs without a usable gold alignment were not scored for alignment)")
    return "\n".join(lines)
