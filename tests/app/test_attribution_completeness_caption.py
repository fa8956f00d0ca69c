"""The Attribution view's completeness figures, in percent: while Integrated Gradients refines, the caption says by
how much the last try missed completeness, and at the end how close the answer is; both against a hand
computation in float64 (100 · |Σ attributions − Δ| / |Δ|, Δ = f(input) − f(baseline)) from the same points run on
their own."""

from __future__ import annotations

import re

from app.views.attribution_view import AttributionView
from scratchformer.analyses import attribute
from tests.scratchformer.test_attribution_completeness_figure import percent_from_complete, shown_as


def test_the_captions_give_the_missed_share_in_percent(qtbot, en_hi):
    w = en_hi
    result = w.current_result()
    first = {}  # position → the first try's answer (64 points), where it falls short
    for p in range(result.trace["tgt_embed.tokens"].shape[-1]):
        a = attribute.compute(result.bundle, result.inputs, result.trace, p, max_steps=attribute.DEFAULT_STEPS)
        if not a.complete_enough:
            first[p] = a
    assert first, "64 points should fall short somewhere on this sentence"
    position, short = max(first.items(), key=lambda kv: kv[1].gap)  # the farthest off: the clearest figure
    view = next(v for v in w.views if isinstance(v, AttributionView))
    captions: list[str] = []
    real = view.progressed
    view.progressed = lambda *news: (real(*news), captions.append(view.caption.text()))
    view.show_position(position)
    qtbot.waitUntil(lambda: view.value is not None and not view.is_busy(), timeout=60_000)
    found = re.fullmatch(r"Integrated Gradients with 64 steps missed completeness by (\d+\.\d)%; refining with "
                         r"128 steps…", captions[0])  # fmt: skip
    assert found, captions[0]
    shown_as(found.group(1), percent_from_complete(short.source, short.target, short.f_input, short.f_baseline))
    a = view.value[0] if isinstance(view.value, tuple) else view.value
    found = re.search(r"\(completeness within (\d+\.\d)%; ", view.caption.text())
    assert found, view.caption.text()
    shown_as(found.group(1), percent_from_complete(a.source, a.target, a.f_input, a.f_baseline))
