"""Example inputs that every model carries, so the first Run always shows something that makes sense.

Where they come from, first match wins:
- a checkpoint's own config: `extra["examples"]` (a list of sentences, or of {"source", "target", "windows"});
- a task the model was trained on (`extra["task"]`: en-hi, copy, reverse, sort);
- the presets, here in code: `blog` reads the walkthrough's text as 4 windows of 10 tokens, `paper` an English
  sentence;
- anything else (an imported BERT or Marian folder, a checkpoint without examples): a neutral English sentence.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    source: str
    target: str = ""  # empty: the decoder reads the model's own output
    windows: tuple[int, int] | None = None  # (S, B): read the source as the walkthrough's batch of windows
    label: str = ""  # what a menu shows; the source when empty

    def menu_text(self, width: int = 60) -> str:
        text = self.label or self.source
        text = " ".join(text.split())
        return text if len(text) <= width else text[: width - 1] + "…"


# The opening of the "Transformers from Scratch" walkthrough's own example text (data/samples/walkthrough.txt):
# with windows of 10 tokens and stride 1, the first 4 windows are the batch its tiny model reads.
WALKTHROUGH_TEXT = (
    "A language model learns to guess the next word. That sounds like a small trick, but it turns out to be a "
    "remarkably good way to learn about language."
)

NEUTRAL = (Example("The cat sat on the mat because it was warm."), Example("Where is the nearest train station?"))

PRESET_EXAMPLES: dict[str, tuple[Example, ...]] = {
    "blog": (
        Example(WALKTHROUGH_TEXT, windows=(10, 4), label="The walkthrough's text: 4 windows of 10 tokens"),
        Example("machine learning using PyTorch"),
    ),
    "paper": (
        Example("The quick brown fox jumps over the lazy dog."),
        Example("Attention is all you need."),
    ),
}

TASK_EXAMPLES: dict[str, tuple[Example, ...]] = {
    "en-hi": (
        Example("the girl eats an apple"),
        Example("the old man sees funny daughters"),
        Example("we are friends"),
        Example("the thirsty teacher washes the clean car"),
    ),
    "copy": (Example("3 1 4 1 5 9 2 6"), Example("2 7 1 8 2 8")),
    "reverse": (Example("3 1 4 1 5 9 2 6"), Example("2 7 1 8 2 8")),
    "sort": (Example("3 1 4 1 5 9 2 6"), Example("2 7 1 8 2 8")),
}


def _from_config(raw) -> list[Example]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, str) and item.strip():
            out.append(Example(item.strip()))
        elif isinstance(item, dict) and str(item.get("source", "")).strip():
            windows = item.get("windows")
            ok = isinstance(windows, (list, tuple)) and len(windows) == 2 and all(isinstance(w, int) for w in windows)
            out.append(Example(str(item["source"]).strip(), str(item.get("target", "") or ""),
                               tuple(windows) if ok else None, str(item.get("label", "") or "")))
    return out


def examples_for(name: str, origin: str, extra: dict | None = None) -> list[Example]:
    """The example inputs of a model (`extra`: its config's free-form facts): its own, its task's, its preset's,
    or a neutral sentence."""
    extra = extra or {}
    own = _from_config(extra.get("examples"))
    if own:
        return own
    task = extra.get("task")
    if task in TASK_EXAMPLES:
        return list(TASK_EXAMPLES[task])
    if origin == "preset" and name in PRESET_EXAMPLES:
        return list(PRESET_EXAMPLES[name])
    return list(NEUTRAL)


def known_fraction(tokenizer, text: str) -> float:
    """The share of the text's words that the tokenizer knows (1.0 for byte-level BPE, which knows every word)."""
    words = text.split()
    if not words:
        return 1.0
    unknown = tokenizer.unknown_words(text)
    return max(0.0, 1.0 - len(unknown) / len(words))
