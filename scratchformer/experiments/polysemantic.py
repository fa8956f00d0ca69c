"""A polysemantic neuron: one hidden unit of the encoder's feed-forward network, ReLU(x W_1 + b_1) (paper §3.3),
that fires for words of several unrelated kinds — the toy model's superposition, met in a trained model.

Measured over the en-hi task's own sentences (drawn from its grammar with a seed, scratchformer.tasks.en_hi):
every encoder layer's `ffn.hidden` step is read through the trace, and for each neuron the strongest activation
each source word gives it. A neuron's firing words are its TOP strongest, as far as they reach half its largest
activation; the words' classes (noun, verb, adjective, pronoun, determiner, preposition, auxiliary) come from
the grammar. The neuron shown is the one whose firing words span the most classes (ties: the more even spread,
then the stronger activation).
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict

import torch

from ..recording.trace import tracing
from .inputs import special_ids

TITLE = "A polysemantic neuron (en-hi)"
CLAIM = ("A feed-forward neuron of the trained model fires for words that have nothing in common — nouns, verbs and "
         "function words at once: it is not one feature, but a mixture of several.")  # fmt: skip
CONTROLS = {"seed": 0}
SENTENCES = 400  # drawn from the task's grammar
TOP = 8  # a neuron's firing words: at most this many …
HALF = 0.5  # … with at least this share of its largest activation
CLASSES = ("noun", "verb", "adjective", "pronoun", "determiner", "preposition", "auxiliary", "other")
_DETERMINERS = {"the", "a", "an", "this", "that", "these", "those", "my", "your", "his", "her", "our", "their",
                "two", "three", "four", "five"}  # fmt: skip
_PREPOSITIONS = {"in", "on", "under", "near", "with", "to", "from"}
_AUXILIARIES = {"am", "is", "are", "not"}
_KEPT: OrderedDict[tuple, dict] = OrderedDict()
_LOCK = threading.Lock()


def applies(bundle) -> str | None:
    c = bundle.config
    if bundle.name.split("@")[0] != "en-hi" or not c.has_encoder:
        return (f"The polysemantic-neuron experiment reads the en-hi task's sentences and its words' classes; "
                f"{bundle.name} was not trained on them: open en-hi.")  # fmt: skip
    return None


def word_classes() -> dict[str, str]:
    """Each English word of the task's grammar → its class (a word of two classes keeps the first found here)."""
    from ..tasks import en_hi

    out: dict[str, str] = {}
    for p in en_hi.PRONOUNS:
        out.setdefault(p.en, "pronoun")
    for w in _DETERMINERS:
        out.setdefault(w, "determiner")
    for w in _PREPOSITIONS:
        out.setdefault(w, "preposition")
    for w in _AUXILIARIES:
        out.setdefault(w, "auxiliary")
    for v in en_hi.VERBS:
        for w in (v.en, v.en_s, v.en_ing):
            if w:
                out.setdefault(w, "verb")
    for a in en_hi.ADJECTIVES:
        out.setdefault(a.en, "adjective")
    for n in en_hi.NOUNS:
        for w in (n.en, n.en_plural):
            if w:
                out.setdefault(w, "noun")
    return out


def task_sentences(n: int, seed: int) -> list[str]:
    """n distinct English sentences of the task's grammar (the first n of a seeded draw, repeats left out)."""
    from ..tasks.en_hi import generate_pairs

    seen: dict[str, None] = {}
    for pair in generate_pairs(3 * n, seed=seed):
        seen.setdefault(pair.source, None)
        if len(seen) == n:
            break
    return list(seen)


def hidden_by_word(bundle, sentences: list[str]) -> tuple[dict[str, torch.Tensor], list[str], int]:
    """Every encoder layer's feed-forward hidden activations, reduced to each word's strongest per neuron:
    step name → (words, d_ff), with the words' strings and the number of token positions read."""
    c, model = bundle.config, bundle.model
    rows = [bundle.encode_source(s, truncate=True) for s in sentences]
    width = max(len(r) for r in rows)
    src = torch.full((len(rows), width), c.pad_id, dtype=torch.long)  # (B, S)
    for i, r in enumerate(rows):
        src[i, : len(r)] = torch.tensor(r)
    pad = src == c.pad_id  # (B, S): True at padding
    with torch.inference_mode(), tracing() as tracer:
        model.encode(src.to(model.device), pad.to(model.device))
    special = torch.tensor(sorted(special_ids(bundle, "src")), dtype=torch.long)
    real = ~(pad | torch.isin(src, special)).reshape(-1)  # (B·S,): the words, not padding or start/end tokens
    ids = src.reshape(-1)[real]  # (N,) token ids of the real positions
    vocab, word_of = torch.unique(ids, return_inverse=True)  # (W,), (N,)
    out = {}
    for step in tracer.steps:
        if step.name.startswith("encoder.") and step.name.endswith(".ffn.hidden"):
            acts = step.tensor.detach().float().cpu().reshape(-1, step.tensor.shape[-1])[real]  # (N, d_ff)
            table = torch.full((len(vocab), acts.shape[1]), -math.inf)  # (W, d_ff)
            table.scatter_reduce_(0, word_of[:, None].expand_as(acts), acts, "amax")
            out[step.name] = table
    features = _transcoder_tables(bundle, tracer, real, word_of, len(vocab))
    return out, bundle.src_tokenizer.token_strings(vocab.tolist()), int(ids.numel()), features


def _transcoder_tables(bundle, tracer, real: torch.Tensor, word_of: torch.Tensor, n_words: int
                       ) -> dict[str, torch.Tensor]:  # fmt: skip
    """For each encoder feed-forward with a bundled transcoder (scratchformer.features.bundled): its features read
    from the feed-forward's input, reduced like the neurons to each word's strongest: `<layer>.ffn.hidden` → (W,
    d_sae). {} for a model that ships none."""
    from ..features.bundled import bundled_transcoders
    from ..features.folder import load
    from ..features.points import ffn_input

    folder = bundled_transcoders(bundle.name)
    out: dict[str, torch.Tensor] = {}
    if folder is None:
        return out
    steps = {s.name: s for s in tracer.steps}
    for sub in sorted(folder.iterdir()):
        if not sub.name.startswith("encoder."):
            continue
        x = steps.get(ffn_input(bundle.model, sub.name))
        if x is None:
            continue
        t = load(sub)
        with torch.no_grad():
            f = t.encode(x.tensor.float().cpu()).reshape(-1, t.d_sae)[real]  # (B, S, d_sae) → (N, d_sae)
        table = torch.zeros((n_words, f.shape[1]))  # (W, d_sae): features are ≥ 0
        table.scatter_reduce_(0, word_of[:, None].expand_as(f), f, "amax")
        out[sub.name.replace(".ffn.out", ".ffn.hidden")] = table
    return out


def firing(column: torch.Tensor) -> list[int]:
    """A neuron's firing words (indices into its column (W,)): its TOP strongest ≥ HALF of its largest, if > 0."""
    values, order = column.sort(descending=True)
    top = float(values[0])
    if top <= 0:
        return []
    return [int(i) for v, i in zip(values[:TOP], order[:TOP]) if float(v) >= HALF * top]


def spread(classes: list[str]) -> tuple[int, float]:
    """(distinct classes, entropy in nats of their counts) of a neuron's firing words."""
    counts = Counter(classes)
    total = sum(counts.values())
    return len(counts), -sum(k / total * math.log(k / total) for k in counts.values()) if total else 0.0


def measure(bundle, seed: int) -> dict:
    key = (bundle.name, id(bundle.model), int(seed))
    with _LOCK:
        if key in _KEPT:
            return _KEPT[key]
    sentences = task_sentences(SENTENCES, int(seed))
    tables, words, n_tokens, feature_tables = hidden_by_word(bundle, sentences)
    classes = word_classes()
    word_class = [classes.get(w, "other") for w in words]
    best, best_score, mixed, total = None, None, 0, 0
    for name, table in tables.items():
        for j in range(table.shape[1]):
            fired = firing(table[:, j])
            if not fired:
                continue
            total += 1
            n_classes, entropy = spread([word_class[i] for i in fired])
            mixed += n_classes >= 3
            score = (n_classes, round(entropy, 9), float(table[fired, j].mean()))
            if best_score is None or score > best_score:
                best, best_score = (name, j, fired), score
    name, j, fired = best
    column = tables[name][:, j]
    top = [{"token": words[i], "class": word_class[i], "activation": float(column[i])} for i in fired]
    per_class = {k: max((float(column[i]) for i in range(len(words)) if word_class[i] == k), default=0.0)
                 for k in CLASSES}  # fmt: skip
    n_classes = best_score[0]
    out = {
        "neuron": {
            "step": name, "layer": int(name.split(".")[1]) + 1, "index": j, "top": top,
            "top_text": ", ".join(f"{t['token']} ({t['class']}) {t['activation']:.2f}" for t in top),
            "tokens_text": ", ".join(t["token"] for t in top),
            "classes": sorted({t["class"] for t in top}, key=CLASSES.index),
            "classes_text": ", ".join(sorted({t["class"] for t in top}, key=CLASSES.index)),
            "n_classes": n_classes, "n_firing": len(top), "per_class": {k: max(v, 0.0) for k, v in per_class.items()},
        },
        **_separated(feature_tables.get(name), fired, words),
        "sentences": len(sentences), "tokens": n_tokens, "words": len(words),
        "neurons": sum(t.shape[1] for t in tables.values()), "active_neurons": total, "mixed_neurons": mixed,
    }  # fmt: skip
    with _LOCK:
        _KEPT[key] = out
        while len(_KEPT) > 4:
            _KEPT.popitem(last=False)
    return out


def _separated(table: torch.Tensor | None, fired: list[int], words: list[str]) -> dict:
    """The neuron's firing words as the layer's transcoder reads them: each word's strongest feature, and how many
    different features they are (a separate feature per meaning, where the neuron mixed them)."""
    if table is None:
        return {"separated": [], "separated_text": "", "n_features": 0}
    rows = [{"token": words[i], "feature": int(table[i].argmax()), "activation": float(table[i].max())} for i in fired]
    return {"separated": rows, "n_features": len({r["feature"] for r in rows}),
            "separated_text": ", ".join(f"{r['token']} → feature {r['feature']}" for r in rows)}


def run(bundle, source: str = "", target: str | None = None, seed: int = 0) -> dict:
    """`source` and `target` are taken as every experiment takes them, and not read: the neuron is found over the
    task's sentences, not one."""
    measured = measure(bundle, int(seed))
    n = measured["neuron"]
    summary = (f"Over {measured['sentences']} of the task's sentences ({measured['tokens']} tokens), neuron "
               f"{n['index']} of encoder layer {n['layer']}'s feed-forward fires most for {n['tokens_text']}: words of "
               f"{n['n_classes']} classes ({n['classes_text']}). {measured['mixed_neurons']} of the "
               f"{measured['active_neurons']} neurons that fire at all mix three or more classes.")  # fmt: skip
    return {**measured, "summary": summary}
