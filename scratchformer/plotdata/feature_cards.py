"""A feature's card and this run's strongest features per token, as plot data the window and the exporters share.

`card_plot` turns a FeatureCard (scratchformer.features.cards) into what the card's picture draws: a headline, the
density line, the histogram's bars, the top contexts with each token's shade (its activation ÷ the feature's
largest over the corpus, 0 … 1), and the pushed-up and pushed-down tokens with their bar lengths. The window's
card widget and the PNG/SVG/PDF export paint this same object (app/export/card_render.py), so what is exported is
what is shown. `token_table` is the per-token table (the Features view's list and its CSV).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..features.cards import CardSet, FeatureCard, TokenFeatures

CONTEXT_WINDOW = 14  # tokens of a context shown around its strongest token, at most


@dataclass
class ContextRow:
    tokens: list[str]
    acts: list[float]
    shades: list[float]  # (tokens,) activation ÷ the feature's largest, 0 … 1
    peak: int  # index (in `tokens`) of the strongest token
    clipped_left: bool
    clipped_right: bool


@dataclass
class CardPlot:
    title: str  # 'Feature 65'
    subtitle: str  # the dictionary and the corpus
    density: str  # 'fires on 122 of 3199 tokens (3.81 %); mean 2.31, largest 5.78 when it fires'
    hist_centres: list[float]
    hist_counts: list[int]
    hist_width: float
    contexts: list[ContextRow]
    up: list[tuple[str, float]]
    down: list[tuple[str, float]]
    effect_note: str
    pushed_scale: float  # the largest |logit change| of up and down, for bar lengths


def _window(n: int, peak: int, width: int) -> tuple[int, int]:
    a = max(0, min(peak - width // 2, n - width))
    return a, min(n, a + width)


def card_plot(cards: CardSet, feature: int, contexts: int = 12, window: int = CONTEXT_WINDOW) -> CardPlot:
    """The card of `feature` as the picture draws it."""
    card: FeatureCard = cards.card(feature)
    top = card.max_act if card.max_act > 0 else 1.0
    rows = []
    for ctx in card.contexts[:contexts]:
        a, b = _window(len(ctx.tokens), ctx.peak, window)
        acts = ctx.acts[a:b]
        rows.append(ContextRow(ctx.tokens[a:b], acts, [max(0.0, min(1.0, v / top)) for v in acts], ctx.peak - a,
                               a > 0, b < len(ctx.tokens)))  # fmt: skip
    edges = card.hist_edges
    width = edges[1] - edges[0] if len(edges) > 1 else 1.0
    if card.fired:
        density = (f"fires on {card.fired} of {card.tokens} tokens ({card.density:.2%}); mean {card.mean_act:.3g}, "
                   f"largest {card.max_act:.3g} when it fires")  # fmt: skip
    else:
        density = f"never fires on the {card.tokens} tokens of the corpus (a dead feature there)"
    pushed = [abs(v) for _, v in card.up + card.down]
    return CardPlot(
        title=f"Feature {feature}",
        subtitle=f"{cards.describe or cards.step} · corpus {cards.corpus or '?'} ({cards.inputs} inputs) · "
        f"{cards.model}",
        density=density,
        hist_centres=[(x + y) / 2 for x, y in zip(edges, edges[1:])],
        hist_counts=list(card.hist_counts),
        hist_width=width,
        contexts=rows,
        up=list(card.up),
        down=list(card.down),
        effect_note=cards.effect_note,
        pushed_scale=max(pushed, default=1.0) or 1.0,
    )


def token_table(rows: list[TokenFeatures], top: int | None = None) -> tuple[list[str], list[list[str]]]:
    """(header, one row per token): position (from 1), token, then feature and activation of the strongest
    `top` (all given when None), strongest first; empty cells where a token has fewer firing features."""
    k = max((len(r.features) for r in rows), default=0) if top is None else top
    header = ["position", "token"] + [x for i in range(1, k + 1) for x in (f"feature_{i}", f"activation_{i}")]
    body = []
    for r in rows:
        cells = [str(r.position + 1), r.token]
        for i in range(k):
            if i < len(r.features):
                f, v = r.features[i]
                cells += [str(f), f"{v:.6g}"]
            else:
                cells += ["", ""]
        body.append(cells)
    return header, body
