"""What each tab of the window shows, and why, with this run's numbers: the explanation panel's text while a tab
other than Step or Heads is open (those two follow the current step's explanation, explanation.py).

    explain_tab("masks", trace, config, batch=0)  → Explanation(what, why, numbers)

The sentences are data (TAB_TEXTS), the numbers come from the trace and the model's config; `facts` carries what
only the window knows (the translation, the snapshots' steps, the interventions).
"""

from __future__ import annotations

import math
import re

from ..plotdata.masks import ATTENTION_TITLES, attention_types
from ..plotdata.norms import layer_norm_steps
from ..plotdata.training import attention_layers
from ..recording.trace import Trace
from ..transformer.config import TransformerConfig
from .explanation import Explanation
from .kinds import KIND_TEXTS, kind_numbers, model_kind

TAB_TEXTS: dict[str, dict[str, str]] = {
    "positional": {
        "what": "The position signal added to each token's embedding before the first layer: one row per "
                "position, one column per dimension of d_model. The Show selector also plots a few dimensions "
                "as curves over position, and PE·PEᵀ, how alike two positions' vectors are.",
        "why": "Attention itself ignores order: it would give the same output for the words shuffled. Adding a "
               "different vector at every position lets the layers tell first from last, and with sinusoids a "
               "fixed shift in position is the same rotation everywhere, so relative distance is easy to read.",
    },
    "rotary": {
        "what": "Rotary positions (RoPE): inside every attention, each pair of a query's or key's dimensions (i, "
                "i + d_rot/2) is turned by the angle position × ω_i, ω_i = θ^(−2i/d_rot). The map shows cos of "
                "that angle for every position and pair; below, one query and one key of this run turned to "
                "positions shifted together by s, and their score at each shift.",
        "why": "A dot product of two turned vectors only sees the difference of their angles, so the score of "
               "query m and key n depends on m − n alone, and a rotation never changes a vector's length. The "
               "2017 paper instead adds a position vector to each embedding once, below the first layer: that "
               "vector mixes into the word's meaning and every score then depends on where both tokens stand, "
               "not only on how far apart they are.",
    },
    "masks": {
        "what": "What each attention may not look at. A blocked cell gets −∞ added to its score, so the softmax "
                "gives it weight 0. Below, the current attention's scores with the mask added, and the weights "
                "after the softmax, side by side.",
        "why": "Padding is not part of the sentence, so no position may attend to it. The decoder is trained on "
               "the whole target at once, so its self-attention must not peek at later tokens (the causal mask): "
               "row t may read positions 0 … t only, as it will when it generates one token at a time.",
    },
    "layernorm": {
        "what": "One normalisation step: each token's vector before and after it, as its mean and standard "
                "deviation over the features, and what BatchNorm would have normalised instead (each feature "
                "over the tokens).",
        "why": "Every sublayer adds its output to a running sum (the residual stream). Normalising each token "
               "on its own keeps those sums at a steady scale, layer after layer, whatever the sentence length "
               "or batch; the learned gain γ and bias β then set the scale each feature should have.",
    },
    "overview": {
        "what": "Every attention map of this run at once, as thumbnails: one mosaic per attention type, a row "
                "per layer and a column per head. A click goes to that layer's step and head.",
        "why": "Heads specialise: some look at the previous or next token, some at one fixed token, some do the "
               "work (in translation, the word alignment). Seeing all of them side by side is the quickest way "
               "to find the ones that matter.",
    },
    "neuron": {
        "what": "One query position against one key position in one head: the query vector q_i and the key "
                "vector k_j (one number per dimension of d_k), their products q_i[e]·k_j[e] as bars, whose sum is "
                "the score q_i·k_j; then ÷ √d_k, the mask, and where the score lands in its row's softmax.",
        "why": "This is all an attention weight is: how well a query lines up with a key, compared with how well "
               "it lines up with every other key. Tall bars of one sign are the dimensions where the two vectors "
               "agree (or disagree) most; dividing by √d_k keeps the sum from growing with the width of the head, "
               "so the softmax stays soft enough to learn from (paper §3.2.1).",
    },
    "weighted_sum": {
        "what": "One query's output row of one head, taken apart: every key's value vector v_j (left), the "
                "query's weight on each key (middle), and each value scaled by its weight with their sum, the "
                "head's output, in the last row (right).",
        "why": "Attention does not pick one word: it blends the values of all of them, in the proportions the "
               "softmax chose. The output is a new, contextual vector for the query's token — mostly the value of "
               "the key it weighs most, tinted by the others.",
    },
    "lens": {
        "what": "The logit lens: the decoder's running vector read through the model's own final norm and output "
                "layer at every point — after the embeddings and after each sublayer — as if the model stopped "
                "there. The map gives the probability of the token the model finally emits; the table, each "
                "point's own top guesses at one position.",
        "why": "Each sublayer adds its output to one running sum, so every point of that sum can be read like the "
               "last one. Where a row turns bright is where the prediction forms: which layer, and which sublayer "
               "(often cross-attention, in a translation model) put it there.",
    },
    "trajectory": {
        "what": "Every token's vector at every point of the residual stream — after the embeddings and after each "
                "sublayer — drawn as one path per token on the two directions along which all those vectors vary "
                "most (principal component analysis, fitted once on all of them or on one chosen point).",
        "why": "Each sublayer adds a small correction to the running vector. Following a token from its embedding "
               "to the last layer shows which sublayers move it far and which barely touch it, and when tokens "
               "that start apart are drawn together by what they read from their context.",
    },
    "rollout": {
        "what": "Attention rollout (or flow): every layer's attention, heads averaged and with the residual "
                "counted as half of each row, multiplied from the first layer up, so that each position's row "
                "says how much of it comes from each input token — beside the last layer's raw attention.",
        "why": "Raw attention in a late layer mixes vectors that are already mixtures, so it can point away from "
               "the words that matter (Abnar & Zuidema, 2020). The agreement number says how far the two maps "
               "tell the same story here.",
    },
    "attribution": {
        "what": "Integrated Gradients: how much each source token and each decoder-input token adds to the "
                "log-probability of the token the model predicts at one position, measured along a straight path "
                "from a baseline (zero embeddings or padding) to the real input; beside it, the cross-attention row "
                "that produced the prediction.",
        "why": "Attention says where a head looked, not what the output depends on. Attributions do: they add up "
               "to the change in the output between the baseline and the input (completeness), which is checked "
               "and shown.",
    },
    "output": {
        "what": "The last step: the final linear layer turns each decoder position's vector into one score per "
                "word of the target vocabulary, and the softmax turns the scores into probabilities. The table "
                "lists each position's most likely next tokens.",
        "why": "Row t has read the decoder input up to token t and predicts token t + 1. Training raises the "
               "probability of the right next token at every row at once; generating picks one token from the "
               "last row and feeds it back in.",
    },
    "decoding": {
        "what": "Generation one token at a time: each step feeds the tokens so far into the decoder, takes the "
                "last row's probabilities and appends the most likely token (greedy decoding), until </s>. Each "
                "step shows the new row's cross-attention over the source and its top candidates.",
        "why": "At training time the decoder reads the whole target at once (teacher forcing); a real "
               "translation has no target, so the model must read its own earlier guesses. This tab shows that "
               "loop, which the causal mask makes equal to the one-pass trace.",
    },
    "training": {
        "what": "How this model learned: the loss and accuracy curves of its training run, and the current "
                "input run through copies of the model saved along the way (snapshots), beside the final model. "
                "Both maps read the same input, so their rows line up. Under the curves, Heads over training "
                "measures every head at every snapshot: how spread its attention is (entropy), how well it follows "
                "the task's word alignment, and how much the output needs it (importance).",
        "why": "Attention is learned, not designed. Early in training a head spreads its weight evenly; as the "
               "loss falls it settles on the tokens that help predict the next word.",
    },
    "compare": {
        "what": "The current step twice, from a run without your changes (before) and one with them (after), "
                "and their difference (after − before, red up, blue down, white unchanged).",
        "why": "Ablating a head (setting its output to zero or to its mean) and watching what changes is how "
               "to test what a head is for: steps before the change stay white, and the difference spreads "
               "from there through the residual stream to the output.",
    },
    "compare_patch": {
        "what": "The current step twice, from the corrupted run and from that run with one component's activation "
                "copied in from the clean run (patched), and their difference (patched − corrupted, red up, blue "
                "down, white unchanged).",
        "why": "Activation patching asks where the difference between two inputs is carried: if copying one "
               "component from the clean run brings the clean answer back, the information the answer needs "
               "passes through it. Steps before the patched one stay white; from it on, the difference shows how "
               "the copied activation travels to the output.",
    },
    "importance": {
        "what": "How much each head matters for this input: every head is zeroed in turn and the drop in the "
                "probability of the chosen output tokens is drawn as a layers × heads map, one per attention "
                "type.",
        "why": "Many heads can be removed with little effect, and a few cannot; this finds those few. A click "
               "on a cell goes to that head, where the Compare tab shows what zeroing it changes.",
    },
    "patching": {
        "what": "Activation patching: the sentence runs twice, clean and with one word changed (corrupted). Each "
                "head's output, each residual-stream point and each feed-forward output at each position is copied "
                "from the clean run into the corrupted one, one at a time, and the map shows how much of the clean "
                "answer at the last position comes back: effect = (m_patched − m_corrupt) / (m_clean − m_corrupt).",
        "why": "Ablating a component asks what breaks without it; patching asks which components carry the "
               "difference between two inputs, the information the answer depends on. Attribution patching "
               "estimates every cell from one backward pass, a straight-line guess that can miss where attention "
               "saturates, so the view can set it beside the real patches; path patching follows one head's "
               "output into one later head. A click on a cell opens its patched run in Compare.",
    },
    "graph": {
        "what": "The attribution graph of one prediction: every transcoder feature active at a layer and position, "
                "one error node per layer and position (what its transcoder misses of the real feed-forward), the "
                "input embeddings at the bottom and the explained logit on top. An edge is one node's direct effect "
                "on another in the local replacement model (attention patterns and norms frozen at this run), red "
                "raising its target and blue lowering it, wider for a larger share; for an encoder-decoder the "
                "source's nodes are on the left and the decoder's on the right, joined through the cross-attention.",
        "why": "A logit is a sum of contributions, and the graph follows them back through features rather than "
               "neurons: which input tokens, through which features, made the model say this. Pruning keeps the "
               "nodes that carry most of the influence on the logit (the Nodes slider), and the edges among them "
               "that carry most of it (the Edges slider); the replacement score says "
               "how much of it runs through features rather than error nodes — a low score means the transcoders "
               "explain little of this prediction.",
    },
}

# The lens tab for an encoder-only model read through its masked-language-model head.
ENCODER_LENS = {
    "what": "The logit lens over an encoder: each token's running vector read through the model's "
            "masked-language-model head at every point — after the embeddings and after each sublayer — as if "
            "the encoder stopped there. The map gives the probability of the token the head finally predicts "
            "at each source position (its guess for the token there, what a [MASK] should be); the table, "
            "each point's own top guesses at one position.",
    "why": "The head was trained on the encoder's last layer only, but every sublayer adds its part to the same "
           "running sum, so each earlier point can be read the same way. Where a row turns bright is where the "
           "encoder has settled what belongs at a position — from the token itself, or from the words on both "
           "sides of it.",
}

TABS = tuple(TAB_TEXTS)


def _attention_counts(trace: Trace) -> dict[str, tuple[int, int]]:
    """Attention type → (layers, heads) in the trace, in the order the model runs them."""
    heads = {s.attention_type: s.shape[1] for s in trace.attention_steps()}  # (B, H, Q, K) weights
    return {kind: (attention_layers(trace, kind), heads[kind]) for kind in attention_types(trace)}


def _name(kind: str) -> str:
    """'cross-attention', 'decoder masked self-attention': the window's title, in the middle of a sentence."""
    title = ATTENTION_TITLES.get(kind, kind)
    return title[0].lower() + title[1:]


def _lengths(trace: Trace, batch: int) -> tuple[int, int]:
    """(source tokens, decoder input tokens) of one batch item; 0 where the model has no such side."""
    sizes = []
    for stack, labels in (("src_embed", trace.source_tokens), ("tgt_embed", trace.target_tokens)):
        ids = trace.find(f"{stack}.tokens")  # (B, L)
        sizes.append(ids.shape[1] if ids is not None else len(labels[batch]) if batch < len(labels) else 0)
    return sizes[0], sizes[1]


def _pads(pad, batch: int) -> int:
    """Padded positions of one batch item, from the trace's padding mask (B, L), True at padding."""
    return int(pad[batch].sum()) if pad is not None and batch < pad.shape[0] else 0


def _numbers(tab: str, trace: Trace, config: TransformerConfig, batch: int, facts: dict) -> str:
    s, t = _lengths(trace, batch)
    d = config.d_model
    if tab == "positional":
        where = " and ".join(f"{n} {side} positions" for n, side in ((s, "source"), (t, "target")) if n)
        if config.positional in ("sinusoidal", "sinusoidal_halves"):
            slowest = 2 * math.pi * 10000 ** ((d - 2) / d)
            return (f"{where}, each a vector of d_model = {d} numbers. The fastest pair of dimensions repeats "
                    f"every 2π ≈ 6.3 positions, the slowest every {slowest:,.0f}: every position up to far "
                    "beyond this input gets its own pattern.")
        if config.positional == "learned":
            return (f"{where}. This model learned its {config.max_len} position vectors of {d} numbers in "
                    "training instead of using sinusoids.").lstrip(". ")
        if config.positional == "rotary":
            return ("This model adds no position vectors (the map is all zeros): its positions rotate the queries "
                    f"and keys inside every attention instead (RoPE, θ = {config.rope_theta:g}); the Rotary "
                    "positions tab shows how.")
        return ("This model adds no position vectors: it learns order another way (in T5, a bias on the "
                "attention scores that depends on the distance between query and key).")
    if tab == "rotary":
        if config.positional != "rotary":
            return ("This model does not rotate its queries and keys: "
                    + ("it adds sinusoids to the embeddings (the Positional encoding tab)."
                       if config.positional in ("sinusoidal", "sinusoidal_halves") else
                       "it adds learned position vectors to the embeddings." if config.positional == "learned"
                       else "it has no rotary positions."))
        half = config.d_rotary // 2
        theta = config.rope_theta
        slowest = 2 * math.pi * theta ** ((config.d_rotary - 2) / max(config.d_rotary, 1))
        text = (f"Each head's d_head = {config.d_head} numbers hold {half} turning pairs (d_rot = {config.d_rotary}"
                f"), base θ = {theta:g}: the fastest pair turns one radian per position and comes round every "
                f"2π ≈ 6.3 positions, the slowest every {slowest:,.0f}.")
        shown = "; ".join(facts.get(tab, "").splitlines())
        return f"{text} {shown}".strip()
    if tab == "masks":
        parts = []
        for kind in _attention_counts(trace):
            if kind == "decoder.self_attn" and t:
                parts.append(f"the decoder's causal mask blocks {t * (t - 1) // 2} of its {t} × {t} cells, the "
                             "ones above the diagonal")
            elif kind == "encoder.self_attn" and s:
                parts.append(f"encoder self-attention is {s} × {s}")
            elif kind == "decoder.cross_attn" and s and t:
                parts.append(f"cross-attention is {t} × {s} (decoder rows, source columns)")
        pads, pads_t = _pads(trace.source_pad, batch), _pads(trace.target_pad, batch)
        causal = "decoder.self_attn" in _attention_counts(trace)
        padding = (f"Batch item {batch + 1} has {pads} padded source and {pads_t} padded target positions, "
                   "which every attention blocks." if pads or pads_t else
                   "There is no padding in this run, so " +
                   ("only the causal mask blocks anything." if causal else "nothing is blocked."))
        if not parts:
            return padding
        listed = "; ".join(parts)
        return f"{listed[0].upper()}{listed[1:]}. {padding}"
    if tab == "layernorm":
        count = len(layer_norm_steps(trace))
        kind = "RMSNorm (no mean subtracted, no β)" if config.norm == "rmsnorm" else "LayerNorm"
        place = ("after each sublayer's output, before it is added (OLMo 2)" if config.post_norm_only else
                 "before each sublayer (pre-LN, as in GPT-2)" if config.norm_first else
                 "after each residual sum (post-LN, as in the paper)")
        return (f"This model applies {kind} {count} times, {place}, each over d_model = {d} features with "
                f"ε = {config.layer_norm_eps:g}.")
    if tab == "overview":
        counts = _attention_counts(trace)
        total = sum(layers * heads for layers, heads in counts.values())
        listed = "; ".join(f"{_name(k)}: {layers} layer{'s' * (layers > 1)} × {heads} heads"
                           for k, (layers, heads) in counts.items())
        return f"{total} maps in all — {listed}."
    if tab == "lens":
        if not config.has_decoder and config.mlm_head:
            return (f"{1 + config.n_encoder_layers * 2} points (the embeddings, then 2 sublayers in each of "
                    f"{config.n_encoder_layers} encoder layers) × {s} source positions, each read through the "
                    f"masked-LM head against {config.src_vocab_size:,} vocabulary entries.")
        if not config.has_decoder:
            return ("This model has no decoder stream to read through an output layer, and no masked-language-model "
                    "head to read its encoder through.")
        per_layer = 3 if config.has_encoder else 2
        return (f"{1 + config.n_decoder_layers * per_layer} points (the embeddings, then {per_layer} sublayers in "
                f"each of {config.n_decoder_layers} decoder layers) × {t} positions, each read against "
                f"{config.tgt_vocab_size:,} vocabulary entries.")
    if tab == "trajectory":
        part = "residual" if config.norm_first else "out"  # the stream after a sublayer (analyses/stream.py)
        points = {side: 1 + sum(bool(re.fullmatch(rf"{side}\.\d+\.add_norm\d\.{part}", st.name)) for st in trace)
                  if on else 0 for side, on in (("encoder", config.has_encoder), ("decoder", config.has_decoder))}
        parts = [f"{n} tokens × {points[side]} points of the {side}" for n, side in
                 ((s, "encoder"), (t, "decoder")) if n and points[side]]  # fmt: skip
        shown = facts.get(tab, "")
        return (f"{' and '.join(parts)}, each a vector of d_model = {d} numbers, projected onto 2 dimensions. "
                f"{shown}").strip()
    if tab == "rollout":
        counts = _attention_counts(trace)
        listed = "; ".join(f"{_name(k)}: {layers} layer{'s' * (layers > 1)} of {heads} heads averaged"
                           for k, (layers, heads) in counts.items())
        return f"Rolled out here — {listed}." if listed else "This model has no attention to roll out."
    if tab == "attribution":
        parts = [f"{n} {side} tokens" for n, side in ((s, "source"), (t, "decoder-input")) if n]
        return (f"{' and '.join(parts)}, each one number: its attribution summed over the {d} dimensions of its "
                "embedding.")
    if tab in ("neuron", "weighted_sum"):
        return "; ".join(facts.get(tab, "").splitlines()) or "Pick an attention sublayer, a head and positions above."
    if tab == "output":
        rows = t or s
        return (f"{rows} positions × {config.tgt_vocab_size:,} vocabulary entries: each row's probabilities "
                f"sum to 1, and its top token is the model's guess for the next one.")
    if tab == "decoding":
        translation = facts.get("translation", "")
        if translation:
            n = len(translation.split())
            return (f"Greedy decoding wrote “{translation}” ({n} word{'s' * (n != 1)}) in {n + 1} steps: one per "
                    "token, plus the step that chose </s>.")
        return "Type no target to see the model generate; with a target typed, the steps feed it in instead."
    if tab == "training":
        steps = facts.get("snapshot_steps") or []
        if steps:
            total = facts.get("total_steps")
            end = f" of the {total:,} it trained for" if total else ""
            text = (f"{len(steps)} snapshots, at steps {', '.join(str(x) for x in steps)}{end}; the final model "
                    "is the last frame.")
        elif facts.get("revisions"):
            names = facts["revisions"]
            text = (f"No training log or snapshots, but {len(names)} step revisions of this model sit in the Hugging "
                    f"Face cache ({', '.join(names)}): Heads over training runs the input through each and measures "
                    "how every head's attention changes from one to the next.")
        else:
            text = "This model has no training snapshots; train one with snapshots from File › Train…"
        eps, valid = facts.get("label_smoothing"), facts.get("best_valid_loss")
        if eps and valid is not None:
            vocab = config.tgt_vocab_size
            text += (f" The training loss levels off well above the validation loss: with label smoothing "
                     f"{eps:g} over {vocab:,} tokens the training target is itself spread out, so that loss can "
                     f"never go below {smoothing_floor(eps, vocab):.2f}, while the validation loss is plain "
                     f"cross-entropy and falls to {valid:.3f}.")
        return text
    if tab == "compare":
        changes = facts.get("interventions") or []
        if changes:
            return f"Changed in this run: {'; '.join(changes)}."
        return "Nothing is changed yet: right-click a head in the Heads, Overview or Step tab to ablate it."
    if tab == "compare_patch":
        patched = facts.get("patched") or "one component taken from the clean run"
        return (f"Patched: {patched}. The Patching view's map gives this cell's effect; the Output tab shows "
                "the patched run's prediction.")
    if tab == "patching":
        return facts.get("patching") or ("Pick a word to change and press Sweep; the metric is then written out "
                                         "here with this run's numbers.")
    if tab == "graph":
        return facts.get("graph") or ("Open the tab on a run of a model with transcoders (en-hi ships a set) to "
                                      "build the graph of its prediction; its numbers are then written out here.")
    if tab == "importance":
        heads = sum(layers * h for layers, h in _attention_counts(trace).values())
        return f"This model has {heads} heads, so the measurement runs the input {heads + 1} times (once untouched)."
    return ""


def smoothing_floor(eps: float, vocab: int) -> float:
    """The lowest label-smoothed cross-entropy there is: the entropy of the smoothed target itself, which puts
    1 − ε + ε/V on the right token and ε/V on each of the other V − 1 (as torch's label_smoothing does)."""
    right, other = 1 - eps + eps / vocab, eps / vocab
    return -(right * math.log(right) + (vocab - 1) * other * math.log(other))


def explain_tab(tab: str, trace: Trace, config: TransformerConfig, batch: int = 0,
                facts: dict | None = None) -> Explanation | None:
    """The explanation of one tab (a key of TAB_TEXTS) for this run; None for a tab without one."""
    if tab not in TAB_TEXTS:
        return None
    kind = model_kind(config, trace)
    text = KIND_TEXTS.get((tab, kind), TAB_TEXTS[tab])  # the sentences for this kind of model
    if tab == "lens" and not config.has_decoder and config.mlm_head:
        text = ENCODER_LENS  # an encoder read through its masked-LM head
    batch = max(0, min(batch, max(len(trace.source_tokens), len(trace.target_tokens), 1) - 1))
    facts = facts or {}
    numbers = kind_numbers(tab, kind, trace, config, sum(_lengths(trace, batch)), facts)
    if numbers is None:
        numbers = _numbers(tab, trace, config, batch, facts)
    return Explanation(text["what"], text["why"], numbers, key=f"tab.{tab}")
