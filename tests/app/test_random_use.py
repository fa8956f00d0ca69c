"""Random use of the window, seeded so a failure can be replayed: models, nasty texts (emoji, control characters,
right-to-left marks, a 5,000-character word, nothing at all), runs, steps, views, heads, batch items, ablations
and resizes. No Python error may escape (pytest-qt fails the test on an exception raised in a slot or event
handler), no message may quote one, and the window stays consistent with its run."""

from __future__ import annotations

import random

import pytest

from scratchformer.patching.interventions import HeadChange

TEXTS = [
    "the girl eats an apple",
    "I ❤️ 🍎 and 👩‍👩‍👧 — ok?",
    "a\x00b\x07c\u202ed\u200b e\tf",  # NUL, bell, right-to-left override, zero-width space, tab
    "x" * 5000,  # one 5,000-character word
    "",
    "   \n  ",
    "लड़की सेब खाती है",
    "we are friends\nand we eat apples",
]
MODELS = ["en-hi", "blog", "reverse"]
SIZES = [(1024, 700), (1400, 900), (800, 600), (1600, 1000)]
# What a message must never say: a Python error quoted, or a pick outside the run that the window made itself.
PYTHON_ERRORS = ("Traceback", "Error:", "Exception", "object has no attribute", "NoneType", "out of range")


def settled(qtbot, w) -> None:
    view = w.current_view()
    qtbot.waitUntil(lambda: not w.is_busy() and not getattr(view, "is_busy", lambda: False)(), timeout=60_000)


@pytest.mark.parametrize("seed", [1, 7])
def test_random_use_of_the_window_raises_no_python_error(qtbot, make_window, seed):
    rng = random.Random(seed)
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    messages: list[str] = []
    actions = ["model", "text", "run", "step", "step", "step", "go", "view", "view", "head", "batch", "ablate",
               "resize", "first_last"]  # fmt: skip
    runs = 0
    for _ in range(100):
        action = rng.choice(actions)
        trace = w.current_trace()
        if action == "model":
            w.set_model(rng.choice(MODELS))
        elif action == "text":
            w.source_edit.setText(rng.choice(TEXTS))
            w.target_edit.setText(rng.choice(["", "", "लड़की", "🍎" * 3]) if w.target_edit.isEnabled() else "")
        elif action == "run":
            w.run()
            runs += 1
        elif action == "step" and trace is not None:
            (w.next_step if rng.random() < 0.7 else w.previous_step)()
        elif action == "go" and trace is not None:
            w.go_to(rng.randrange(len(trace)))
        elif action == "view":
            w.tabs.setCurrentIndex(rng.randrange(len(w.views)))
        elif action == "head":
            w.set_head(rng.randrange(0, 12))  # beyond the model's heads too
        elif action == "batch":
            w.set_batch(rng.randrange(0, 3))
        elif action == "ablate" and trace is not None and trace.attention_steps():
            attention = rng.choice(trace.attention_steps()).sublayer
            w.interventions_panel.add(HeadChange(attention, rng.randrange(2), rng.choice(["zero", "mean", "keep"])))
        elif action == "resize":
            w.resize(*rng.choice(SIZES))
        elif action == "first_last" and trace is not None:
            (w.first_step if rng.random() < 0.5 else w.last_step)()
        settled(qtbot, w)
        messages.append(w.message_text())
        step, trace = w.current_step(), w.current_trace()
        if trace is not None:  # the stepper shows a step of the run it holds
            assert step is not None and trace.find(step.name) is step
            assert 0 <= w.current_head() and 0 <= w.current_batch()
    assert runs >= 5
    quoted = [m for m in messages if any(p in m for p in PYTHON_ERRORS)]
    assert not quoted, quoted
