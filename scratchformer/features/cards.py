"""Feature cards: what one feature of a dictionary does over a corpus, and what it writes towards the output.

A card holds, for feature i of a dictionary reading step S:

    contexts   the inputs where f_i is largest (one per input, strongest first), each with every token's f_i
    histogram  the non-zero values of f_i over the corpus, in equal bins from 0 to the largest
    density    the share of the corpus's tokens with f_i > 0
    up / down  the output tokens its decoder direction W_dec[i] pushes up and down by the direct path:
               W_dec[i] W_U (the generator's projection), for an encoder point W_dec[i] W_V W_O W_U through every
               decoder layer's cross-attention as if attention carried it unchanged — a linear reading that
               skips the norms and later layers in between; `effect_note` says which path was read

Every feature's card comes from one pass over the corpus in micro-batches (activations.batches / collect): the
features are kept sparse (token, feature, value), then cut per feature. A set of cards is written as JSON, in
the dictionary's folder (`cards-<hash of corpus and model>.json`) or, when that cannot be written, in the user's
cache folder, and read back while the dictionary's weights are unchanged (their hash is stored beside them).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..errors import UserError
from ..loading.memory import default_budget
from .activations import Text, batches, collect, corpus_texts
from .dictionary import Dictionary
from .points import position_dim

CARDS_VERSION = 1
CONTEXTS = 12  # top activating inputs kept per feature
BINS = 24  # histogram bins of the non-zero values
PUSHED = 10  # output tokens listed pushed up, and down
MAX_INPUTS = 1000  # inputs of the corpus read for cards, at most


@dataclass
class Context:
    """One input where the feature fires: its tokens (the side the dictionary reads) and f_i at each."""

    input: int  # index in the corpus
    tokens: list[str]
    acts: list[float]  # (positions,) f_i at each token, 0 where it does not fire

    @property
    def peak(self) -> int:
        return max(range(len(self.acts)), key=lambda p: self.acts[p]) if self.acts else 0

    @property
    def top(self) -> float:
        return max(self.acts, default=0.0)


@dataclass
class FeatureCard:
    feature: int
    fired: int  # tokens with f_i > 0
    tokens: int  # tokens read
    max_act: float
    mean_act: float  # over the tokens where it fires
    hist_edges: list[float]  # (BINS + 1,)
    hist_counts: list[int]  # (BINS,)
    contexts: list[Context] = field(default_factory=list)
    up: list[tuple[str, float]] = field(default_factory=list)  # (token, logit change per unit of f_i)
    down: list[tuple[str, float]] = field(default_factory=list)

    @property
    def density(self) -> float:
        return self.fired / self.tokens if self.tokens else 0.0


@dataclass
class CardSet:
    """Every feature's card of one dictionary over one corpus, with what they were made from."""

    step: str  # the step the dictionary reads
    model: str
    corpus: str
    weights: str  # hash of the dictionary's weights
    tokens: int
    inputs: int
    effect_note: str  # which path `up` and `down` read, in words
    cards: list[FeatureCard]
    describe: str = ""

    def card(self, feature: int) -> FeatureCard:
        if not 0 <= feature < len(self.cards):
            raise UserError(f"The dictionary has features 0 to {len(self.cards) - 1}; there is no feature {feature}.")
        return self.cards[feature]

    def to_json(self) -> dict:
        out = asdict(self)
        out["version"] = CARDS_VERSION
        return out

    @classmethod
    def from_json(cls, data: dict) -> CardSet:
        cards = []
        for c in data["cards"]:
            contexts = [Context(**x) for x in c.pop("contexts")]
            up = [(str(t), float(v)) for t, v in c.pop("up")]
            down = [(str(t), float(v)) for t, v in c.pop("down")]
            cards.append(FeatureCard(**c, contexts=contexts, up=up, down=down))
        fields = {k: data[k] for k in ("step", "model", "corpus", "weights", "tokens", "inputs", "effect_note")}
        return cls(**fields, cards=cards, describe=data.get("describe", ""))


def weights_hash(d: Dictionary) -> str:
    """A hash of the dictionary's weights: cards made from other weights are not reused."""
    h = hashlib.sha256()
    for t in (d.W_enc, d.W_dec, d.b_enc, d.b_dec, d.threshold):
        h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
    h.update(f"{d.architecture}:{d.k}:{d.centres_input}".encode())
    return h.hexdigest()[:16]


def cache_name(corpus: str, model: str, max_inputs: int) -> str:
    """cards-<hash>.json for this corpus spec and model name."""
    key = json.dumps([CARDS_VERSION, corpus, model, max_inputs, CONTEXTS, BINS])
    return f"cards-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def _user_cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "scratchformer" / "cards"


def _shipped(folder: Path) -> bool:
    """Whether the folder is inside the installed package's resources (a bundled model's dictionary)."""
    from ..loading.bundle import resources_dir

    try:
        return folder.resolve().is_relative_to(resources_dir().resolve())
    except OSError:
        return False


def cache_paths(folder: str | Path | None, corpus: str, model: str, max_inputs: int) -> list[Path]:
    """Where a card set is looked for, first the dictionary's folder, then the user's cache (named by the folder)."""
    name = cache_name(corpus, model, max_inputs)
    out = []
    if folder is not None:
        if not _shipped(Path(folder)):  # a bundled dictionary's cards go to the user's cache, never the package
            out.append(Path(folder) / name)
        tag = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:10]
        out.append(_user_cache() / f"{tag}-{name}")
    else:
        out.append(_user_cache() / name)
    return out


def _read(path: Path, weights: str) -> CardSet | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != CARDS_VERSION or data.get("weights") != weights:
            return None
        return CardSet.from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, unreadable or from another version: made again


def _write(paths: list[Path], cards: CardSet) -> Path | None:
    text = json.dumps(cards.to_json(), ensure_ascii=False)
    for path in paths:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            part.write_text(text, encoding="utf-8")
            part.replace(path)
            return path
        except OSError:
            continue  # a read-only folder: the next place
    return None


def direct_effect(bundle, d: Dictionary, step: str) -> tuple[torch.Tensor | None, str]:
    """(d_sae, vocab) logit change per unit of each feature by the direct path, and that path in words; (None,
    why) when the model has no output vocabulary to read."""
    model, c = bundle.model, bundle.config
    gen = getattr(model, "generator", None)
    if gen is None:
        return None, "This model has no output vocabulary (an encoder only): no tokens are pushed."
    w_u = gen.proj.weight.detach().float().cpu()  # (vocab, d_model)
    dirs = d.W_dec.detach().float().cpu()  # (d_sae, d_model)
    scale = gen.scale or 1.0
    if position_dim(step) == "src_pos":  # through each decoder layer's cross-attention, values then output
        total = torch.zeros(d.d_sae, c.d_model)
        n = 0
        for layer in model.decoder:
            attn = getattr(layer, "cross_attn", None)
            if attn is None:
                continue
            w_v = attn.kv_proj.weight.detach().float().cpu()[attn.d_attn :]  # (d_attn, d_model): v = x W_Vᵀ
            w_o = attn.out_proj.weight.detach().float().cpu()  # (d_model, d_attn)
            total += dirs @ w_v.T @ w_o.T  # (d_sae, d_model)
            n += 1
        note = (f"Direct path only: W_dec[i] through W_V W_O of the {n} decoder layers' cross-attention (summed) into "
                "the generator — what the feature would push if attention sent it unchanged; the norms and later "
                "layers in between are left out.")  # fmt: skip
        return (total @ w_u.T) * scale, note  # (d_sae, vocab)
    last = f"decoder.{len(model.decoder) - 1}.add_norm3.out"
    straight = step in (last, "decoder.final_norm.out") and (step != last or model.decoder_norm is None)
    if straight and not c.norm_first:
        note = "W_dec[i] goes straight into the generator's projection W: these are its exact logit changes."
    else:
        note = ("Direct path only: W_dec[i] W, as if it reached the generator's projection unchanged; the norms and "
                "later layers in between are left out.")  # fmt: skip
    return (dirs @ w_u.T) * scale, note  # (d_sae, vocab)


def _pushed(bundle, effect: torch.Tensor | None, feature: int) -> tuple[list, list]:
    if effect is None:
        return [], []
    row = effect[feature]  # (vocab,)
    k = min(PUSHED, row.numel())
    hi, lo = row.topk(k), (-row).topk(k)
    names = bundle.tgt_tokenizer.token_strings
    up = list(zip(names(hi.indices.tolist()), hi.values.tolist()))
    down = list(zip(names(lo.indices.tolist()), (-lo.values).tolist()))
    return up, down


def compute_cards(bundle, d: Dictionary, step: str, texts: list[Text], corpus: str = "",
                  budget: int | None = None, progress: Callable[[int, int], None] | None = None,
                  cancelled: Callable[[], bool] | None = None) -> CardSet | None:  # fmt: skip
    """Every feature's card over `texts`, in one pass of micro-batches; None when cancelled. progress(done inputs,
    all inputs) after each micro-batch. `step` is the step the dictionary reads in this model."""
    if not texts:
        raise UserError("The corpus is empty: cards need inputs to read.")
    side = position_dim(step)
    tok = bundle.src_tokenizer if side == "src_pos" else bundle.tgt_tokenizer
    rows_tok: list[torch.Tensor] = []  # each firing's token (corpus-wide index)
    rows_feat: list[torch.Tensor] = []
    rows_val: list[torch.Tensor] = []
    token_input: list[int] = []  # corpus token → its input
    token_pos: list[int] = []  # corpus token → its position in that input
    input_tokens: list[list[str]] = []  # each input's tokens as read
    seen = 0
    budget = default_budget() if budget is None else budget  # as the command line's --memory-budget
    for batch in batches(bundle, list(texts), budget):
        if cancelled is not None and cancelled():
            return None
        x = collect(bundle, batch, [step])[step]  # (real tokens, d_in), row-major over (item, position)
        with torch.no_grad():
            f = d.encode(x)  # (real tokens, d_sae)
        nz = f.nonzero()  # (firings, 2): token, feature
        rows_tok.append(nz[:, 0] + len(token_input))
        rows_feat.append(nz[:, 1])
        rows_val.append(f[nz[:, 0], nz[:, 1]])
        ids, real = (batch.src, batch.real("src_pos")) if side == "src_pos" else (batch.tgt, batch.real("tgt_pos"))
        for b in range(ids.shape[0]):
            kept = ids[b][real[b]].tolist()
            input_tokens.append(tok.token_strings(kept))
            token_input += [seen + b] * len(kept)
            token_pos += list(range(len(kept)))
        seen += ids.shape[0]
        if progress is not None:
            progress(seen, len(texts))
    n_tokens = len(token_input)
    toks, feats, vals = torch.cat(rows_tok), torch.cat(rows_feat), torch.cat(rows_val)
    t_input, t_pos = torch.tensor(token_input), torch.tensor(token_pos)
    order = torch.argsort(feats, stable=True)
    toks, feats, vals = toks[order], feats[order], vals[order]
    counts = torch.bincount(feats, minlength=d.d_sae)  # (d_sae,) firings of each feature
    starts = torch.cumsum(counts, 0) - counts
    effect, note = direct_effect(bundle, d, step)
    cards = []
    for i in range(d.d_sae):
        a, n = int(starts[i]), int(counts[i])
        v, t = vals[a : a + n], toks[a : a + n]  # (n,) this feature's firings
        top = float(v.max()) if n else 0.0
        edges = torch.linspace(0.0, top if top > 0 else 1.0, BINS + 1)
        hist = torch.histc(v, bins=BINS, min=0.0, max=float(edges[-1])) if n else torch.zeros(BINS)
        contexts = []
        if n:
            inputs = t_input[t]  # (n,) the input of each firing
            best: dict[int, float] = {}
            for inp, val in zip(inputs.tolist(), v.tolist()):
                if val > best.get(inp, 0.0):
                    best[inp] = val
            for inp in sorted(best, key=lambda j: -best[j])[:CONTEXTS]:
                acts = [0.0] * len(input_tokens[inp])
                for p, val in zip(t_pos[t[inputs == inp]].tolist(), v[inputs == inp].tolist()):
                    acts[p] = val
                contexts.append(Context(inp, input_tokens[inp], acts))
        up, down = _pushed(bundle, effect, i)
        cards.append(FeatureCard(i, n, n_tokens, top, float(v.mean()) if n else 0.0, edges.tolist(),
                                 [int(x) for x in hist.tolist()], contexts, up, down))  # fmt: skip
    return CardSet(step, bundle.name, corpus, weights_hash(d), n_tokens, seen, note, cards, d.describe())


def cards_for(bundle, d: Dictionary, step: str, corpus: str, folder: str | Path | None = None,
              max_inputs: int = MAX_INPUTS, budget: int | None = None,
              progress: Callable[[int, int], None] | None = None, cancelled: Callable[[], bool] | None = None
              ) -> CardSet | None:  # fmt: skip
    """The card set of dictionary `d` (loaded from `folder`) over `corpus` (a corpus spec): read from its cache
    when made before from the same weights, else computed and written there. None when cancelled."""
    paths = cache_paths(folder, corpus, bundle.name, max_inputs)
    weights = weights_hash(d)
    for path in paths:
        found = _read(path, weights) if path.is_file() else None
        if found is not None:
            return found
    texts = corpus_texts(corpus, max_inputs)
    made = compute_cards(bundle, d, step, texts, corpus, budget, progress, cancelled)
    if made is not None:
        _write(paths, made)
    return made


@dataclass
class TokenFeatures:
    """A token of this run and its strongest features: [(feature, value)], strongest first."""

    position: int
    token: str
    features: list[tuple[int, float]]


def strongest_per_token(trace, step: str, batch: int = 0, top: int = 5) -> list[TokenFeatures]:
    """This run's strongest features at each token, from the trace's `<step>.dict.features` step."""
    found = trace.find(f"{step}.dict.features")
    if found is None:
        raise UserError(f"This run has no dictionary on {step}; attach one (Run › Attach dictionary…).")
    f = found.item(min(batch, found.shape[0] - 1)).float()  # (positions, d_sae)
    labels = trace.source_tokens if position_dim(step) == "src_pos" else trace.target_tokens
    tokens = list(labels[min(batch, len(labels) - 1)]) if labels else []
    out = []
    k = min(top, f.shape[-1])
    for p in range(f.shape[0]):
        values, index = f[p].topk(k)
        feats = [(int(i), float(v)) for i, v in zip(index.tolist(), values.tolist()) if v > 0]
        out.append(TokenFeatures(p, tokens[p] if p < len(tokens) else str(p), feats))
    return out


def dictionary_steps(trace) -> list[str]:
    """The steps that dictionaries read in this run (each has a `<step>.dict.features` step)."""
    return [s.name.removesuffix(".dict.features") for s in trace if s.name.endswith(".dict.features")]
