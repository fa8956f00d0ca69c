"""The feature cards a page carries: for each attached dictionary, the cards of the features the page shows (each
token's strongest), compact in the index and in words in that step's explanation, so a student reading the page
sees what each feature fires on and pushes without the model, the corpus or the window."""

from __future__ import annotations

from ..features.cards import CardSet, FeatureCard, strongest_per_token
from ..recording.trace import Trace

SHOWN = 8  # features written out per features step and batch item
CONTEXTS = 3  # top contexts a page keeps per card


def _compact(card: FeatureCard) -> dict:
    return {"density": round(card.density, 6), "max": round(card.max_act, 4), "mean": round(card.mean_act, 4),
            "contexts": [{"tokens": c.tokens, "acts": [round(a, 3) for a in c.acts]} for c in card.contexts[:CONTEXTS]],
            "up": [[t, round(v, 4)] for t, v in card.up[:5]], "down": [[t, round(v, 4)] for t, v in card.down[:5]]}


def _sentence(f: int, card: FeatureCard) -> str:
    where = ""
    if card.contexts:
        c = card.contexts[0]
        p = c.peak
        words = [f"[{t}]" if i == p else t for i, t in enumerate(c.tokens)]
        where = f"; strongest ({c.top:.3g}) in “{' '.join(words)}”"
    up = ", ".join(t for t, _ in card.up[:3])
    return f"Feature {f} fires on {card.density:.2%} of the corpus's tokens{where}" + (f"; it pushes up {up}" if up
                                                                                       else "") + "."


def attach_cards(trace: Trace, cards: dict[str, CardSet], items: list[int], explanations: dict) -> dict:
    """Write the shown features' cards into the explanations of each `<S>.dict.features` step (in place) and
    return the index's "cards" entry: {S: {"corpus", "note", "features": {feature: compact card}}}."""
    out: dict = {}
    for step, cardset in cards.items():
        found = trace.find(f"{step}.dict.features")
        if found is None:
            continue
        entry = out.setdefault(step, {"corpus": cardset.corpus, "note": cardset.effect_note, "features": {}})
        for b in items:
            shown: list[int] = []
            for token in strongest_per_token(trace, step, b, top=1):
                shown += [f for f, _ in token.features if f not in shown]
            shown = shown[:SHOWN]
            for f in shown:
                entry["features"][str(f)] = _compact(cardset.card(f))
            key = f"{found.index}/{b}"
            if key in explanations and shown:
                text = " ".join(_sentence(f, cardset.card(f)) for f in shown)
                explanations[key]["numbers"] += (f" Cards of the strongest features here (over {cardset.corpus}, "
                                                 f"{cardset.tokens} tokens): {text}")  # fmt: skip
    return out
