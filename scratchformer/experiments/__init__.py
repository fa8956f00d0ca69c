"""Live experiments: each claim of the lessons shown, measured, on the model in front of you.

    run_experiment("mask", bundle, "the girl eats an apple") → {"with_mask": {...}, "without_mask": {...}, ...}

One small module per experiment (scaling, mask, order, norm, teacher_forcing, temperature, superposition,
polysemantic), each with TITLE,
CLAIM, CONTROLS (name → default), `applies(bundle)` (None, or one sentence saying why it does not apply to this
model) and `run(bundle, source, target, **controls) -> dict`. EXPERIMENTS is the registry the command line
(`scratchformer experiment NAME`), the window's Experiments view and the lessons read; names are fixed: lessons
refer to them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

from ..errors import UserError


class NotApplicable(UserError):
    """This experiment does not apply to this model (one sentence, exit status 2 on the command line)."""


@dataclass(frozen=True)
class Experiment:
    name: str  # "teacher_forcing"
    module: str  # "scratchformer.experiments.teacher_forcing"
    aliases: tuple[str, ...] = field(default=())  # other spellings the command line accepts

    def code(self) -> ModuleType:
        return importlib.import_module(self.module)

    @property
    def title(self) -> str:
        return self.code().TITLE

    @property
    def claim(self) -> str:
        return self.code().CLAIM

    @property
    def controls(self) -> dict:
        """Control name → default value (d_k, temperature, seed, the view's switch …)."""
        return dict(self.code().CONTROLS)

    def applies(self, bundle) -> str | None:
        """None when it applies to this model, else one sentence saying why not."""
        return self.code().applies(bundle)


EXPERIMENTS: dict[str, Experiment] = {
    name: Experiment(name, f"scratchformer.experiments.{name}", aliases)
    for name, aliases in (("scaling", ()), ("mask", ()), ("order", ()), ("norm", ()),
                          ("teacher_forcing", ("teacher-forcing",)), ("temperature", ()), ("superposition", ()),
                          ("polysemantic", ("polysemantic-neuron", "polysemantic_neuron")))
}


def experiment_named(name: str) -> Experiment:
    """The experiment of a name or alias ("teacher-forcing"); UserError with the list of names otherwise."""
    key = (name or "").strip().lower()
    for exp in EXPERIMENTS.values():
        if key == exp.name or key in exp.aliases:
            return exp
    raise UserError(f"Unknown experiment {name!r}; the experiments are {', '.join(EXPERIMENTS)}.")


def run_experiment(name: str, bundle, source: str, target: str | None = None, **controls) -> dict:
    """Run one experiment on this model and input. Returns its JSON (DESIGN.md "Analyses and teaching") with
    "experiment", "model", "source", "controls", "claim" and a one-sentence "summary" added. Raises
    NotApplicable (one sentence) when the experiment does not apply to the model, UserError for bad input or
    an unknown control."""
    exp = experiment_named(name)
    defaults = exp.controls
    unknown = sorted(set(controls) - set(defaults))
    if unknown:
        raise UserError(f"The {exp.name} experiment has no control {unknown[0]!r}; its controls are "
                        f"{', '.join(defaults) or 'none'}.")  # fmt: skip
    why_not = exp.applies(bundle)
    if why_not:
        raise NotApplicable(why_not)
    settings = {**defaults, **{k: v for k, v in controls.items() if v is not None}}
    measured = exp.code().run(bundle, source, target, **settings)
    return {"experiment": exp.name, "model": bundle.name, "source": source, "target": target or "",
            "controls": settings, "claim": exp.claim, **measured}
