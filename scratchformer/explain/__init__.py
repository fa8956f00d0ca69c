"""Plain-language explanations of every step of a trace, with this run's numbers in them.

    from scratchformer.explain import explain_step
    ex = explain_step(trace, step, config, batch=0)   # step: a Step or its index
    print(ex.text())

The sentences live as data in texts.py (TEXTS, easy to edit or translate); numbers.py computes the values that
fill their placeholders; explanation.py puts the two together.
"""

from .explanation import Explanation, explain_step, explainer
from .texts import TEXTS

__all__ = ["TEXTS", "Explanation", "explain_step", "explainer"]
