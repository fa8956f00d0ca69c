"""The live page: the interactive page with the model inside, rerun in the browser on the sentence the reader types.

Python, each a module here:
    model.py     live_model, live_refusal: the weights, tokenizers and config numbers the engine reads, and the one
                 sentence why a model cannot run in the browser
    part.py      live_text, live_part, live_page_refusal: what a live page adds to the recorded one (page/data.py)
    explain.py   explain_context: what the browser needs to explain a typed sentence's steps as Python does
    derive.py    derive_context: what it needs to derive a clicked cell and read the logit lens

JavaScript, inlined into the page in this order after the viewer (page/html.py's LIVE_SCRIPTS):
    engine.js    the forward pass            bpe.js        GPT-2's byte-level BPE
    run.js       tokenizing, greedy decoding and the engine the page calls (window.sfLive)
    format.js    numbers as Python prints them
    explain.js, derive_kit.js, derive_rules.js, derive.js   the plug-ins: explanations, derivations, the lens
    page.js      the text boxes, and each run drawn as the recorded run's maps
"""

from .part import LIVE_CHUNK, live_page_refusal, live_part, live_text

__all__ = ["LIVE_CHUNK", "live_page_refusal", "live_part", "live_text"]
